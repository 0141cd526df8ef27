"""``gluonkit.language.nvidia.ampere.async_copy``: cp.async copies (re-exported from
:mod:`gluonkit.lang.nvidia.async_copy`)."""

from ....lang.nvidia.async_copy import *  # noqa: F401,F403
from ....lang.nvidia.async_copy import __all__  # noqa: F401
