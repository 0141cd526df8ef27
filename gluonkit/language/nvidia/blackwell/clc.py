"""``gluonkit.language.nvidia.blackwell.clc`` (re-exported from :mod:`gluonkit.lang.nvidia.clc`)."""

from ....lang.nvidia.clc import *  # noqa: F401,F403
from ....lang.nvidia.clc import __all__  # noqa: F401
