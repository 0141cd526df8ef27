"""Gluon's Blackwell namespace: ``from gluonkit.lang.nvidia.blackwell import tcgen05_mma, TensorMemoryLayout, tma``.

The names of ``triton.experimental.gluon.language.nvidia.blackwell``.  The tensor-memory
layouts are :mod:`gluonkit.layouts.tmem`'s; Hopper's and Ampere's names come along as in
Gluon; tensor memory is :mod:`.tmem`'s, the MMAs :mod:`.tcgen05`'s, ``tcgen05_copy`` and
``tcgen05_mma_scaled`` :mod:`.tcgen05_scaled`'s, the packed arithmetic (``add2`` …)
:mod:`.packed_arith`'s.  ``tma`` is the one TMA module (with Blackwell's gather and scatter).
"""

from ...layouts.tmem import TensorMemoryLayout, TensorMemoryScalesLayout
from . import clc  # noqa: F401 (an attribute; the user tree has a submodule of this name)
from .hopper import (
    CachePolicy, FractionalEvictionPolicy, async_copy, async_store, cluster, fence_async_shared, mbarrier, mma_v2,
    tma,
)
from .packed_arith import add2, fma2, max2, min2, mul2, sub2
from .tcgen05 import tcgen05_commit, tcgen05_mma, tcgen05_mma_barrier_count
from .tcgen05_scaled import tcgen05_copy, tcgen05_mma_scaled
from .tmem import allocate_tensor_memory, tensor_memory_descriptor, tensor_memory_descriptor_type
from ..unsupported import BLACKWELL, install

# ``clc`` and ``tma`` are left out of __all__: the user tree (gluonkit.language.nvidia.blackwell)
# has its own submodules of those names.
__all__ = ["TensorMemoryLayout", "TensorMemoryScalesLayout", "CachePolicy", "FractionalEvictionPolicy",
           "async_copy", "async_store", "cluster", "fence_async_shared", "mbarrier", "mma_v2",
           "allocate_tensor_memory", "tensor_memory_descriptor", "tensor_memory_descriptor_type",
           "tcgen05_mma", "tcgen05_commit", "tcgen05_mma_barrier_count", "tcgen05_copy", "tcgen05_mma_scaled",
           "add2", "sub2", "mul2", "fma2", "min2", "max2"]
__all__ += install(globals(), BLACKWELL)
