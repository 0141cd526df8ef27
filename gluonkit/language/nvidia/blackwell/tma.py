"""``gluonkit.language.nvidia.blackwell.tma``: TMA copies (re-exported from :mod:`gluonkit.lang.nvidia.tma`)."""

from ....lang.nvidia.tma import *  # noqa: F401,F403
from ....lang.nvidia.tma import __all__  # noqa: F401
