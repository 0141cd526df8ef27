"""``gluonkit.language.nvidia.hopper.async_copy``: Ampere's cp.async copies, which Gluon 3.9's Hopper
namespace re-exports (from :mod:`gluonkit.lang.nvidia.async_copy`)."""

from ....lang.nvidia.async_copy import *  # noqa: F401,F403
from ....lang.nvidia.async_copy import __all__  # noqa: F401
