"""A Hopper cluster kernel (wgmma on accumulators split between CTAs, B multicast), shared by
the Triton 3.9 cross-check and the interpreter tests.

Written once as a factory over the ``gl`` and ``hopper`` modules (Gluon 3.9 names only), like
:mod:`pair_kernels`, so ``tests/test_triton39_crosscheck.py`` builds the same source with
Triton's Gluon.
"""

from __future__ import annotations


def multicast_wgmma_source(gl, hopper):
    """``c = a @ b`` for one ``BM × BN`` block with ``BK``-deep operands, by a cluster of two CTAs.

    A's block and the accumulator are split by rows (``cga_layout [[1, 0]]``: CTA ``r`` holds
    rows ``r BM/2 …``), B's block is whole in both CTAs and loaded once, by a multicast from
    CTA 0; each CTA expects its A rows and the whole B block, runs its own wgmma and stores its
    rows of C (split TMA store).
    """

    def multicast_wgmma(a_desc, b_desc, c_desc, acc_layout: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        a = gl.allocate_shared_memory(a_desc.dtype, [BM, BK], a_desc.layout)
        b = gl.allocate_shared_memory(b_desc.dtype, [BK, BN], b_desc.layout)
        bar = hopper.mbarrier.allocate_mbarrier()
        hopper.mbarrier.init(bar, count=1)
        hopper.cluster.barrier()  # CTA 1's barrier is initialized before CTA 0 multicasts onto it
        hopper.mbarrier.expect(bar, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
        hopper.tma.async_load(a_desc, [0, 0], bar, a)
        hopper.tma.async_load(b_desc, [0, 0], bar, b, multicast=True)
        hopper.mbarrier.wait(bar, 0)
        acc = hopper.warpgroup_mma(a, b, gl.zeros([BM, BN], gl.float32, acc_layout))
        c = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
        c.store(acc.to(c_desc.dtype))
        hopper.fence_async_shared()
        hopper.tma.async_store(c_desc, [0, 0], c)
        hopper.tma.store_wait(0)

    return multicast_wgmma


def multicast_wgmma_layouts(gl, dtype, BM: int, BN: int, BK: int):
    """A's, B's and C's shared layouts and the accumulator's (4 warps) for :func:`multicast_wgmma_source`."""
    rows = [[1, 0]]
    nvmma = gl.NVMMASharedLayout.get_default_for
    return (nvmma([BM, BK], dtype, cga_layout=rows), nvmma([BK, BN], dtype, cga_layout=[[0, 0]]),
            nvmma([BM, BN], dtype, cga_layout=rows),
            gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16], cga_layout=rows))
