"""Gluon's Hopper namespace: ``from gluonkit.lang.nvidia.hopper import mbarrier, tma, warpgroup_mma``.

The same names as ``triton.experimental.gluon.language.nvidia.hopper``, so a Gluon Hopper
kernel ports by rewriting its import lines.  The fence is :mod:`gluonkit.sync`'s; the
warpgroup MMA builtins are :mod:`gluonkit.lang.nvidia.wgmma`'s; ``tma``, ``mbarrier`` and
``cluster`` are the modules of those names here; Ampere's names come along as in Gluon.
Features not built yet are stubs (:mod:`gluonkit.lang.unsupported`).
"""

from ...sync import fence_async_shared
from . import cluster, mbarrier, tma  # noqa: F401 (attributes; the user tree has submodules of these names)
from .ampere import CachePolicy, FractionalEvictionPolicy, async_copy, mma_v2
from .wgmma import warpgroup_mma, warpgroup_mma_accumulator, warpgroup_mma_init, warpgroup_mma_wait
from ..unsupported import HOPPER, install

# ``cluster``, ``mbarrier`` and ``tma`` are left out of __all__: the user tree
# (gluonkit.language.nvidia.hopper) has its own submodules of those names.
__all__ = ["fence_async_shared", "warpgroup_mma", "warpgroup_mma_wait",
           "warpgroup_mma_init", "warpgroup_mma_accumulator", "CachePolicy", "FractionalEvictionPolicy",
           "async_copy", "mma_v2"] + install(globals(), HOPPER)
