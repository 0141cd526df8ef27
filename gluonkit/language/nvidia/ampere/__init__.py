"""``gluonkit.language.nvidia.ampere``: Gluon's Ampere namespace (re-exported from
:mod:`gluonkit.lang.nvidia.ampere`)."""

from ....lang.nvidia.ampere import *  # noqa: F401,F403
from ....lang.nvidia.ampere import __all__ as _names
from . import async_copy, mbarrier  # noqa: E402 (the submodules, after the re-export)

__all__ = list(_names) + ["async_copy", "mbarrier"]
