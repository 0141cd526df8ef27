"""Gluon's Rubin namespace: Blackwell's names plus the four-lane packed arithmetic.

The names of ``triton.experimental.gluon.language.nvidia.rubin``; gluonkit compiles for
``sm_90a`` and ``sm_100a`` only, so Rubin's own names are stubs
(:mod:`gluonkit.lang.unsupported`).
"""

from . import clc, tma
from .blackwell import *  # noqa: F401,F403
from .blackwell import __all__ as _blackwell_names
from ..unsupported import RUBIN, install

# ``mbarrier`` is left out of __all__: the user tree (gluonkit.language.nvidia.rubin) has its
# own submodule of that name.
__all__ = [n for n in _blackwell_names if n != "mbarrier"] + ["clc", "tma"] + install(globals(), RUBIN)
