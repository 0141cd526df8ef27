"""``gluonkit.language.nvidia.blackwell``: Gluon's Blackwell namespace (re-exported from
:mod:`gluonkit.lang.nvidia.blackwell`)."""

from ....lang.nvidia.blackwell import *  # noqa: F401,F403
from ....lang.nvidia.blackwell import __all__ as _names
from . import clc, tma  # noqa: E402 (the submodules, after the re-export)

__all__ = list(_names) + ["clc", "tma"]
