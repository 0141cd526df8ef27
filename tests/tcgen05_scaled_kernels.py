"""Block-scaled tcgen05 kernels shared by the interpreter, ptxas and Triton cross-check tests.

Written once as factories over the ``gl`` and ``blackwell`` modules (Gluon 3.9 names only),
like :mod:`tcgen05_kernels`; the ``@gluonkit.jit`` versions are below.
"""

from __future__ import annotations

import gluonkit
import gluonkit.language as gluonkit_gl
from gluonkit.language.nvidia import blackwell as gluonkit_blackwell
from gluonkit.layouts import scales_copy_bases


def scale_smem_layout(gl, rows: int, scales: int):
    """The shared layout ``tcgen05_copy`` reads ``[rows, scales]`` scale factors from (built with ``gl``)."""
    return gl.SharedLinearLayout(offset_bases=scales_copy_bases(rows, scales), alignment=128)


def mma_scaled_source(gl, blackwell):
    """``c = (a * a_scale) @ (b * b_scale)`` (+ ``c`` when ACC) with one asynchronous tcgen05_mma_scaled.

    ``a`` is ``[M, K]`` and ``b`` ``[N, K]`` (passed as ``.permute((1, 0))``) in the storage
    of their formats (e2m1: ``uint8``, two per byte along K, so ``KA``/``KB`` bytes per row);
    ``a_scale`` is ``[M, SK]``, ``b_scale`` ``[N, SK]``, row-major in global memory.  With
    COPY the scales go to shared memory in ``SA_LAYOUT``/``SB_LAYOUT`` and then to tensor
    memory with ``tcgen05_copy``; otherwise they are stored into tensor memory from registers.
    """

    def mma_scaled(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, KA: gl.constexpr,
                   KB: gl.constexpr, SK: gl.constexpr, A_FMT: gl.constexpr, B_FMT: gl.constexpr, COPY: gl.constexpr,
                   ACC: gl.constexpr, SA_LAYOUT: gl.constexpr, SB_LAYOUT: gl.constexpr):
        blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
        rm = gl.arange(0, M, gl.SliceLayout(1, blk))
        rn = gl.arange(0, N, gl.SliceLayout(1, blk))
        cka = gl.arange(0, KA, gl.SliceLayout(0, blk))
        ckb = gl.arange(0, KB, gl.SliceLayout(0, blk))
        cs = gl.arange(0, SK, gl.SliceLayout(0, blk))
        a_dtype: gl.constexpr = a_ptr.dtype.element_ty
        b_dtype: gl.constexpr = b_ptr.dtype.element_ty
        s_dtype: gl.constexpr = sa_ptr.dtype.element_ty
        a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, KA], a_dtype)
        b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([N, KB], b_dtype)
        a_smem = gl.allocate_shared_memory(a_dtype, [M, KA], a_layout, gl.load(a_ptr + rm[:, None] * KA + cka[None, :]))
        b_smem = gl.allocate_shared_memory(b_dtype, [N, KB], b_layout, gl.load(b_ptr + rn[:, None] * KB + ckb[None, :]))
        scales_layout: gl.constexpr = blackwell.TensorMemoryScalesLayout()
        a_scale = blackwell.allocate_tensor_memory(s_dtype, [M, SK], scales_layout)
        b_scale = blackwell.allocate_tensor_memory(s_dtype, [N, SK], scales_layout)
        sa = gl.load(sa_ptr + rm[:, None] * SK + cs[None, :])
        sb = gl.load(sb_ptr + rn[:, None] * SK + cs[None, :])
        if COPY:
            sa_smem = gl.allocate_shared_memory(s_dtype, [M, SK], SA_LAYOUT, sa)
            sb_smem = gl.allocate_shared_memory(s_dtype, [N, SK], SB_LAYOUT, sb)
            blackwell.fence_async_shared()
            blackwell.tcgen05_copy(sa_smem, a_scale)
            blackwell.tcgen05_copy(sb_smem, b_scale)
        else:
            a_scale.store(gl.convert_layout(sa, a_scale.get_reg_layout()))
            b_scale.store(gl.convert_layout(sb, b_scale.get_reg_layout()))
        acc = blackwell.allocate_tensor_memory(gl.float32, [M, N], blackwell.TensorMemoryLayout([M, N], col_stride=1))
        reg: gl.constexpr = acc.get_reg_layout()
        rows = gl.arange(0, M, gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, gl.SliceLayout(0, reg))
        offs = rows[:, None] * N + cols[None, :]
        if ACC:
            acc.store(gl.load(c_ptr + offs))
        bar = gl.allocate_shared_memory(gl.int64, [1], blackwell.mbarrier.MBarrierLayout())
        blackwell.mbarrier.init(bar, count=1)
        blackwell.fence_async_shared()
        blackwell.tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc, a_scale, b_scale, A_FMT, B_FMT,
                                     use_acc=ACC, mbarriers=[bar])
        blackwell.mbarrier.wait(bar, 0)
        gl.store(c_ptr + offs, acc.load(reg))
        blackwell.mbarrier.invalidate(bar)

    return mma_scaled


mma_scaled = gluonkit.jit(mma_scaled_source(gluonkit_gl, gluonkit_blackwell))
