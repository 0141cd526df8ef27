"""Gluon's Hopper namespace: ``from gluonkit.lang.hopper import mbarrier, fence_async_shared``.

The same names as ``triton.experimental.gluon.language.nvidia.hopper``, so a Gluon Hopper
kernel ports by rewriting its import lines.  The objects are :mod:`gluonkit.sync`'s.
"""

from ..sync import fence_async_shared, mbarrier

__all__ = ["mbarrier", "fence_async_shared"]
