"""``gluonkit.language.nvidia.blackwell.tma``: TMA copies (re-exported from :mod:`gluonkit.lang.nvidia.tma`)
and Blackwell's gather and scatter (:mod:`gluonkit.lang.nvidia.tma_gather`)."""

from ....lang.nvidia.tma import *  # noqa: F401,F403
from ....lang.nvidia.tma import __all__ as _tma_names
from ....lang.nvidia.tma_gather import async_gather, async_scatter  # noqa: F401

__all__ = list(_tma_names) + ["async_gather", "async_scatter"]
