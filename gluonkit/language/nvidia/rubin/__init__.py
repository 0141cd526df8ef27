"""``gluonkit.language.nvidia.rubin``: Gluon's Rubin namespace (re-exported from
:mod:`gluonkit.lang.nvidia.rubin`)."""

from ....lang.nvidia.rubin import *  # noqa: F401,F403
from ....lang.nvidia.rubin import __all__ as _names
from . import mbarrier  # noqa: E402 (the submodules, after the re-export)

__all__ = list(_names) + ["mbarrier"]
