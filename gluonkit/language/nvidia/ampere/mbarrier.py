"""``gluonkit.language.nvidia.ampere.mbarrier`` (re-exported from :mod:`gluonkit.lang.nvidia.mbarrier`)."""

from ....lang.nvidia.mbarrier import *  # noqa: F401,F403
from ....lang.nvidia.mbarrier import __all__  # noqa: F401
