"""``gluonkit.language.nvidia.ampere.mbarrier``: mbarriers (re-exported from :mod:`gluonkit.sync.mbarrier`)."""

from ....sync.mbarrier import *  # noqa: F401,F403
from ....sync.mbarrier import __all__  # noqa: F401
