"""``gluonkit.language.nvidia.hopper``: Gluon's Hopper namespace (re-exported from
:mod:`gluonkit.lang.nvidia.hopper`)."""

from ....lang.nvidia.hopper import *  # noqa: F401,F403
from ....lang.nvidia.hopper import __all__ as _names
from . import cluster, mbarrier, tma  # noqa: E402 (the submodules, after the re-export)

__all__ = list(_names) + ["cluster", "mbarrier", "tma"]
