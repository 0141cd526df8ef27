"""Kernels written for Gluon 3.9, unchanged: ``scripts/check_gluon39_kernels.py`` compiles
them with Triton 3.9; ``tests/test_porting.py`` rewrites the imports
(``triton.experimental.gluon`` -> ``gluonkit``) and runs them with gluonkit."""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma


@gluon.jit
def scale_rows_kernel(in_desc, out_desc, scale_ptr, layout: gl.constexpr):
    """out[m, :] = in[m, :] * scale[m], one [BM, BN] tile per program, through TMA."""
    BM: gl.constexpr = in_desc.block_type.shape[0]
    BN: gl.constexpr = in_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [off_m, off_n], bar, smem)
    mbarrier.wait(bar, phase=0)
    x = smem.load(layout)
    rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    scale = gl.load(scale_ptr + rows)
    gl.barrier()
    smem.store(x * gl.expand_dims(scale, 1))
    fence_async_shared()
    tma.async_store(out_desc, [off_m, off_n], smem)
    tma.store_wait(0, read_only=False)
    mbarrier.invalidate(bar)
