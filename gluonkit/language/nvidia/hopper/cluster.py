"""``gluonkit.language.nvidia.hopper.cluster`` (re-exported from :mod:`gluonkit.lang.nvidia.cluster`)."""

from ....lang.nvidia.cluster import *  # noqa: F401,F403
from ....lang.nvidia.cluster import __all__  # noqa: F401
