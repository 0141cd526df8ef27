"""A TMA gather/scatter kernel for the Triton 3.9 cross-check, written once as a factory over the
``gl``, ``tma`` and ``mbarrier`` modules (Gluon 3.9 names only), like :mod:`tcgen05_kernels`."""

from __future__ import annotations


def gather_scatter_source(gl, tma, mbarrier):
    """Gathers rows ``x`` (columns from ``y``) and scatters them back 16 columns further."""

    def gather_scatter(desc, x_ptr, y, BX: gl.constexpr, offsets_layout: gl.constexpr):
        BY: gl.constexpr = desc.block_type.shape[1]
        x = gl.load(x_ptr + gl.arange(0, BX, offsets_layout))
        smem = gl.allocate_shared_memory(desc.dtype, [BX, BY], desc.layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, BX * desc.block_type.nbytes)
        tma.async_gather(desc, x, y, bar, smem)
        mbarrier.wait(bar, 0)
        tma.async_scatter(desc, x, y + 16, smem)
        tma.store_wait(0)

    return gather_scatter
