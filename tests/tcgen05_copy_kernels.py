"""tcgen05_copy of 32-bit tiles into a TensorMemoryLayout, shared by the interpreter, ptxas and Triton cross-check
tests.

Written once as factories over the ``gl`` and ``blackwell`` modules (Gluon 3.9 names only), like
:mod:`tcgen05_scaled_kernels`; the ``@gluonkit.jit`` versions are at the end.
"""

from __future__ import annotations

import gluonkit
import gluonkit.language as gluonkit_gl
from gluonkit.language.nvidia import blackwell as gluonkit_blackwell


def tile_copy_source(gl, blackwell):
    """``y = x`` for an ``[M, N]`` tile: global → registers → ``SMEM_LAYOUT`` → tcgen05_copy → ``TMEM_LAYOUT`` → y.

    With ``MMA`` the copied tile is the accumulator of one ``tcgen05_mma`` issued right after the copy
    (no wait between: the tensor pipe orders them): ``y = x + a @ b`` with ``a`` ``[M, K]``, ``b`` ``[K, N]``
    float16.  ``TWICE`` copies a second tile (``x`` scaled by 2 in registers) into the same tensor memory
    after waiting on the first, and stores both results (y, then y + M*N).
    """

    def tile_copy(x_ptr, y_ptr, a_ptr, b_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr,
                  SMEM_LAYOUT: gl.constexpr, TMEM_LAYOUT: gl.constexpr, MMA: gl.constexpr, TWICE: gl.constexpr):
        blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
        rm = gl.arange(0, M, gl.SliceLayout(1, blk))
        rn = gl.arange(0, N, gl.SliceLayout(0, blk))
        offs = rm[:, None] * N + rn[None, :]
        x = gl.load(x_ptr + offs)
        smem = gl.allocate_shared_memory(gl.float32, [M, N], SMEM_LAYOUT, x)
        tmem = blackwell.allocate_tensor_memory(gl.float32, [M, N], TMEM_LAYOUT)
        bar = gl.allocate_shared_memory(gl.int64, [1], blackwell.mbarrier.MBarrierLayout())
        blackwell.mbarrier.init(bar, count=1)
        blackwell.fence_async_shared()
        blackwell.tcgen05_copy(smem, tmem)
        if MMA:
            rk = gl.arange(0, K, gl.SliceLayout(0, blk))
            rkr = gl.arange(0, K, gl.SliceLayout(1, blk))
            a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, K], gl.float16)
            b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([K, N], gl.float16)
            a = gl.allocate_shared_memory(gl.float16, [M, K], a_layout, gl.load(a_ptr + rm[:, None] * K + rk[None, :]))
            b = gl.allocate_shared_memory(gl.float16, [K, N], b_layout, gl.load(b_ptr + rkr[:, None] * N + rn[None, :]))
            blackwell.fence_async_shared()
            blackwell.tcgen05_mma(a, b, tmem, use_acc=True, mbarriers=[bar])  # its commit covers the copy too
        else:
            blackwell.tcgen05_commit(bar)
        blackwell.mbarrier.wait(bar, 0)
        reg: gl.constexpr = tmem.get_reg_layout()
        gl.store(y_ptr + offs, gl.convert_layout(tmem.load(reg), blk))
        if TWICE:
            smem.store(x * 2.0)
            blackwell.fence_async_shared()
            blackwell.tcgen05_copy(smem, tmem)
            blackwell.tcgen05_commit(bar)
            blackwell.mbarrier.wait(bar, 1)
            gl.store(y_ptr + M * N + offs, gl.convert_layout(tmem.load(reg), blk))
        blackwell.mbarrier.invalidate(bar)

    return tile_copy


tile_copy = gluonkit.jit(tile_copy_source(gluonkit_gl, gluonkit_blackwell))


def views_source(gl):
    """Print the layouts of ``buffer.index(1).permute(ORDER).reshape(RESHAPE)`` for a ``[2] + SHAPE`` uint8 buffer in
    ``LAYOUT`` (the chain tutorial 11 uses on its scale boxes), with ``gl.static_print``."""

    def views(SHAPE: gl.constexpr, LAYOUT: gl.constexpr, ORDER: gl.constexpr, RESHAPE: gl.constexpr):
        buffer = gl.allocate_shared_memory(gl.uint8, [2] + SHAPE, LAYOUT)
        permuted = buffer.index(1).permute(ORDER)
        gl.static_print(permuted.type.layout)
        gl.static_print(permuted.reshape(RESHAPE).type.layout)

    return views
