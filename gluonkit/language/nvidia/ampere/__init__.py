"""``gluonkit.language.nvidia.ampere``: Gluon's Ampere namespace (re-exported from
:mod:`gluonkit.lang.nvidia.ampere`)."""

from ....lang.nvidia.ampere import *  # noqa: F401,F403
from ....lang.nvidia.ampere import __all__  # noqa: F401
from . import async_copy, mbarrier  # noqa: F401,E402
