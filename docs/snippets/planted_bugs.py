"""Kernels with one planted pipeline bug each, for the "Debugging pipelines" page.

``docs/debugging.rst`` runs them in the CPU interpreter while the docs are built (the
``checker-report`` directive) and shows the report the checker gives, so the page always
shows what the current gluonkit says.  ``BUG`` selects the mistake; ``BUG=""`` is correct.
"""

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import (
    TensorMemoryLayout, allocate_tensor_memory, fence_async_shared, mbarrier, tcgen05_mma, tma,
)
from gluonkit.nvidia.hopper import TensorDescriptor


@gluonkit.jit
def _loader(x_desc, bufs, ready, empty, TILES: gl.constexpr, BUG: gl.constexpr):
    BM: gl.constexpr = x_desc.block_type.shape[0]
    for i in range(TILES):
        s = i % 2
        if BUG == "wrong parity":
            mbarrier.wait(empty.index(s), (i // 2) & 1)  # should be ((i // 2) & 1) ^ 1
        else:
            mbarrier.wait(empty.index(s), ((i // 2) & 1) ^ 1)
        mbarrier.expect(ready.index(s), x_desc.block_type.nbytes)
        tma.async_load(x_desc, [i * BM, 0], ready.index(s), bufs.index(s))


@gluonkit.jit
def _consumer(y_ptr, bufs, ready, empty, TILES: gl.constexpr, BUG: gl.constexpr):
    BM: gl.constexpr = bufs.shape[1]
    N: gl.constexpr = bufs.shape[2]
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, gl.SliceLayout(0, layout))
    for i in range(TILES):
        s = i % 2
        mbarrier.wait(ready.index(s), (i // 2) & 1)
        if BUG == "early release":
            mbarrier.arrive(empty.index(s))  # hands the buffer back before reading it
            x = bufs.index(s).load(layout)
        else:
            x = bufs.index(s).load(layout)
            gl.thread_barrier()
            mbarrier.arrive(empty.index(s))
        gl.store(y_ptr + (i * BM + rows)[:, None] * N + cols[None, :], x * 2)


@gluonkit.jit
def ring_kernel(x_desc, y_ptr, TILES: gl.constexpr, BUG: gl.constexpr):
    """``y = 2 x``, tile by tile: a TMA loader warp feeds the kernel's warps through a two-stage ring."""
    bufs = gl.allocate_shared_memory(x_desc.dtype, [2] + x_desc.block_type.shape, x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(2):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    gl.warp_specialize([(_consumer, (y_ptr, bufs, ready, empty, TILES, BUG)),
                        (_loader, (x_desc, bufs, ready, empty, TILES, BUG))], [1])


def run_ring(bug: str, tiles: int = 4, BM: int = 32, N: int = 32):
    """Launch ``ring_kernel`` with mistake ``bug`` on random data; returns (x, y)."""
    x = np.random.default_rng(0).standard_normal((tiles * BM, N)).astype(np.float32)
    y = np.full_like(x, np.nan)
    desc = TensorDescriptor.from_tensor(x, [BM, N], gl.NVMMASharedLayout.get_default_for([BM, N], gl.float32))
    ring_kernel[(1,)](desc, y, TILES=tiles, BUG=bug)
    return x, y


@gluonkit.jit
def tmem_kernel(a_ptr, b_ptr, c_ptr, BUG: gl.constexpr):
    """``c = a @ b`` ([128, 64] x [64, 64], fp16 in, fp32 out) with one tcgen05 MMA into tensor memory."""
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rm = gl.arange(0, 128, gl.SliceLayout(1, blk))
    rk = gl.arange(0, 64, gl.SliceLayout(1, blk))
    ck = gl.arange(0, 64, gl.SliceLayout(0, blk))
    a = gl.allocate_shared_memory(gl.float16, [128, 64], gl.NVMMASharedLayout.get_default_for([128, 64], gl.float16),
                                  gl.load(a_ptr + rm[:, None] * 64 + ck[None, :]))
    b = gl.allocate_shared_memory(gl.float16, [64, 64], gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16),
                                  gl.load(b_ptr + rk[:, None] * 64 + ck[None, :]))
    acc = allocate_tensor_memory(gl.float32, [128, 64], TensorMemoryLayout([128, 64], col_stride=1))
    done = mbarrier.allocate_mbarrier()
    mbarrier.init(done, count=1)
    fence_async_shared()
    tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[done])
    reg: gl.constexpr = acc.get_reg_layout()
    if BUG != "read before wait":
        mbarrier.wait(done, 0)
    c = acc.load(reg)
    rows = gl.arange(0, 128, gl.SliceLayout(1, reg))
    cols = gl.arange(0, 64, gl.SliceLayout(0, reg))
    gl.store(c_ptr + rows[:, None] * 64 + cols[None, :], c)
    if BUG == "read before wait":
        mbarrier.wait(done, 0)


def run_tmem(bug: str):
    """Launch ``tmem_kernel`` with mistake ``bug`` on random data; returns (a, b, c)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = np.full((128, 64), np.nan, np.float32)
    tmem_kernel[(1,)](a, b, c, BUG=bug)
    return a, b, c


@gluonkit.jit
def stages_kernel(x_desc, STAGES: gl.constexpr):
    """Allocates a ring of ``STAGES`` A and B tiles and an epilogue tile, as a GEMM would."""
    BM: gl.constexpr = x_desc.block_type.shape[0]
    BK: gl.constexpr = x_desc.block_type.shape[1]
    a = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK], x_desc.layout)
    b = gl.allocate_shared_memory(gl.float16, [STAGES, BK, BM], x_desc.layout)
    c = gl.allocate_shared_memory(gl.float32, [BM, BM], gl.NVMMASharedLayout.get_default_for([BM, BM], gl.float32))
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(bars.index(s), count=1)
        mbarrier.expect(bars.index(s), 2 * x_desc.block_type.nbytes)
        tma.async_load(x_desc, [0, 0], bars.index(s), a.index(s))
        tma.async_load(x_desc, [0, 0], bars.index(s), b.index(s))
        mbarrier.wait(bars.index(s), 0)
    c.store(gl.zeros([BM, BM], gl.float32, gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])))


def run_stages(stages: int):
    x = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float16)
    desc = TensorDescriptor.from_tensor(x, [128, 128], gl.NVMMASharedLayout.get_default_for([128, 128], gl.float16))
    stages_kernel[(1,)](desc, STAGES=stages)
