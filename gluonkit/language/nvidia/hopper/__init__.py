"""``gluonkit.language.nvidia.hopper``: Gluon's Hopper namespace (re-exported from
:mod:`gluonkit.lang.nvidia.hopper`)."""

from ....lang.nvidia.hopper import *  # noqa: F401,F403
from ....lang.nvidia.hopper import __all__  # noqa: F401
from . import async_copy, mbarrier, tma  # noqa: F401,E402
