"""Gluon's Hopper namespace: ``from gluonkit.lang.nvidia.hopper import mbarrier, tma, fence_async_shared, warpgroup_mma``.

The same names as ``triton.experimental.gluon.language.nvidia.hopper``, so a Gluon Hopper
kernel ports by rewriting its import lines.  The synchronization objects are
:mod:`gluonkit.sync`'s; the warpgroup MMA builtins are :mod:`gluonkit.lang.nvidia.wgmma`'s; ``tma`` is
:mod:`gluonkit.lang.nvidia.tma`; ``async_copy`` is Ampere's cp.async module, which Gluon 3.9 re-exports here.
"""

from ...sync import fence_async_shared, mbarrier
from . import async_copy, tma
from .wgmma import warpgroup_mma, warpgroup_mma_accumulator, warpgroup_mma_init, warpgroup_mma_wait

__all__ = ["async_copy", "mbarrier", "tma", "fence_async_shared", "warpgroup_mma", "warpgroup_mma_wait", "warpgroup_mma_init",
           "warpgroup_mma_accumulator"]
