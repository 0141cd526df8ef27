"""The synchronization vocabulary: mbarriers, fences and the program-wide barrier.

``from gluonkit.sync import mbarrier, fence_async_shared, thread_barrier``;
:mod:`gluonkit.lang.nvidia.hopper` re-exports them under Gluon's import path.
(May import :mod:`gluonkit.ir` and :mod:`gluonkit.layouts` only.)
"""

from . import mbarrier
from .fence import barrier, cluster_barrier, fence_async_shared, thread_barrier

__all__ = ["mbarrier", "fence_async_shared", "thread_barrier", "barrier", "cluster_barrier"]
