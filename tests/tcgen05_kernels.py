"""tcgen05 MMA kernels shared by the interpreter, ptxas and Triton cross-check tests.

Written once as factories over the ``gl`` and ``blackwell`` modules they use (Gluon 3.9
names only), like :mod:`tmem_kernels`, so ``tests/test_triton39_crosscheck.py`` builds the
same source with Triton's Gluon; the ``@gluonkit.jit`` versions are below.
"""

from __future__ import annotations

import numpy as np

import gluonkit
import gluonkit.language as gluonkit_gl
from gluonkit.language.nvidia import blackwell as gluonkit_blackwell

_TF32 = np.uint32(0xFFFFE000)


def tensor_core_values(x: np.ndarray) -> np.ndarray:
    """The float64 values the tensor cores multiply: float32 inputs are read as tf32 (low 13 mantissa bits dropped)."""
    if x.dtype == np.float32:
        x = (x.view(np.uint32) & _TF32).view(np.float32)
    return x.astype(np.float64)


def mma_source(gl, blackwell):
    """``c = a @ b`` (+ ``c`` when ACC) with one asynchronous tcgen05_mma, committed to a barrier.

    ``a`` is ``[M, K]``; ``b`` is ``[K, N]`` (N contiguous) or, with B_KMAJOR, an ``[N, K]``
    buffer passed as its ``.permute((1, 0))``.  With ACC, ``c`` is first stored into tensor memory.
    The accumulator has ``c``'s type (float32, or float16 for 16-bit inputs).
    """

    def mma(a_ptr, b_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr, B_KMAJOR: gl.constexpr,
            ACC: gl.constexpr):
        blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        rm = gl.arange(0, M, gl.SliceLayout(1, blk))
        rk = gl.arange(0, K, gl.SliceLayout(1, blk))
        rn = gl.arange(0, N, gl.SliceLayout(1, blk))
        ck = gl.arange(0, K, gl.SliceLayout(0, blk))
        cn = gl.arange(0, N, gl.SliceLayout(0, blk))
        dtype: gl.constexpr = a_ptr.dtype.element_ty
        a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, K], dtype)
        a_smem = gl.allocate_shared_memory(dtype, [M, K], a_layout, gl.load(a_ptr + rm[:, None] * K + ck[None, :]))
        if B_KMAJOR:
            b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([N, K], dtype)
            b_buf = gl.allocate_shared_memory(dtype, [N, K], b_layout, gl.load(b_ptr + rn[:, None] * K + ck[None, :]))
            b_smem = b_buf.permute((1, 0))
        else:
            b_layout2: gl.constexpr = gl.NVMMASharedLayout.get_default_for([K, N], dtype)
            b_smem = gl.allocate_shared_memory(dtype, [K, N], b_layout2,
                                               gl.load(b_ptr + rk[:, None] * N + cn[None, :]))
        acc_dtype: gl.constexpr = c_ptr.dtype.element_ty
        tmem_layout: gl.constexpr = blackwell.TensorMemoryLayout([M, N], col_stride=32 // acc_dtype.primitive_bitwidth)
        acc = blackwell.allocate_tensor_memory(acc_dtype, [M, N], tmem_layout)
        reg: gl.constexpr = acc.get_reg_layout()
        rows = gl.arange(0, M, gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, gl.SliceLayout(0, reg))
        offs = rows[:, None] * N + cols[None, :]
        if ACC:
            acc.store(gl.load(c_ptr + offs))
        bar = gl.allocate_shared_memory(gl.int64, [1], blackwell.mbarrier.MBarrierLayout())
        blackwell.mbarrier.init(bar, count=1)
        blackwell.fence_async_shared()
        blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=ACC, mbarriers=[bar])
        blackwell.mbarrier.wait(bar, 0)
        gl.store(c_ptr + offs, acc.load(reg))
        blackwell.mbarrier.invalidate(bar)

    return mma


def sync_mma_source(gl, blackwell):
    """``c = a @ b @ b`` with two synchronous tcgen05_mma (no mbarriers), the second reading the first's result.

    The first product goes TMEM -> registers -> shared memory and is the A of the second, so
    the second MMA must see the first complete.  ``a`` is
    ``[M, K]``, ``b`` is ``[K, K]``.
    """

    def sync_mma(a_ptr, b_ptr, c_ptr, M: gl.constexpr, K: gl.constexpr):
        blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        rm = gl.arange(0, M, gl.SliceLayout(1, blk))
        rk = gl.arange(0, K, gl.SliceLayout(1, blk))
        ck = gl.arange(0, K, gl.SliceLayout(0, blk))
        a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, K], gl.float16)
        b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([K, K], gl.float16)
        a_smem = gl.allocate_shared_memory(gl.float16, [M, K], a_layout, gl.load(a_ptr + rm[:, None] * K + ck[None, :]))
        b_smem = gl.allocate_shared_memory(gl.float16, [K, K], b_layout, gl.load(b_ptr + rk[:, None] * K + ck[None, :]))
        acc = blackwell.allocate_tensor_memory(gl.float32, [M, K], blackwell.TensorMemoryLayout([M, K], col_stride=1))
        blackwell.fence_async_shared()
        blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=False)
        reg: gl.constexpr = acc.get_reg_layout()
        ab = acc.load(reg).to(gl.float16)
        ab_smem = gl.allocate_shared_memory(gl.float16, [M, K], a_layout, ab)
        blackwell.fence_async_shared()
        blackwell.tcgen05_mma(ab_smem, b_smem, acc, use_acc=False)
        rows = gl.arange(0, M, gl.SliceLayout(1, reg))
        cols = gl.arange(0, K, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * K + cols[None, :], acc.load(reg))

    return sync_mma


def tmem_a_mma_source(gl, blackwell):
    """``c = a @ b`` with A read from tensor memory (the ``[a_tmem]`` form) for any input kind.

    ``a`` (``[M, K]``) goes registers -> tensor memory, packed (``col_stride=1``: 32 bits of inputs
    per column); ``b`` is ``[K, N]`` in shared memory (N contiguous) or, with B_KMAJOR, an
    ``[N, K]`` buffer passed as its ``.permute((1, 0))`` (tf32 needs K-major B); ``c`` is float32.
    """

    def tmem_a_mma(a_ptr, b_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr, B_KMAJOR: gl.constexpr):
        blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        dtype: gl.constexpr = a_ptr.dtype.element_ty
        rm = gl.arange(0, M, gl.SliceLayout(1, blk))
        ck = gl.arange(0, K, gl.SliceLayout(0, blk))
        a_tmem = blackwell.allocate_tensor_memory(dtype, [M, K], blackwell.TensorMemoryLayout([M, K], col_stride=1))
        a_tmem.store(gl.convert_layout(gl.load(a_ptr + rm[:, None] * K + ck[None, :]), a_tmem.get_reg_layout()))
        if B_KMAJOR:
            rn = gl.arange(0, N, gl.SliceLayout(1, blk))
            b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([N, K], dtype)
            b_buf = gl.allocate_shared_memory(dtype, [N, K], b_layout, gl.load(b_ptr + rn[:, None] * K + ck[None, :]))
            b_smem = b_buf.permute((1, 0))
        else:
            rk = gl.arange(0, K, gl.SliceLayout(1, blk))
            cn = gl.arange(0, N, gl.SliceLayout(0, blk))
            b_layout2: gl.constexpr = gl.NVMMASharedLayout.get_default_for([K, N], dtype)
            b_smem = gl.allocate_shared_memory(dtype, [K, N], b_layout2, gl.load(b_ptr + rk[:, None] * N + cn[None, :]))
        acc = blackwell.allocate_tensor_memory(gl.float32, [M, N], blackwell.TensorMemoryLayout([M, N], col_stride=1))
        bar = gl.allocate_shared_memory(gl.int64, [1], blackwell.mbarrier.MBarrierLayout())
        blackwell.mbarrier.init(bar, count=1)
        blackwell.fence_async_shared()
        blackwell.tcgen05_mma(a_tmem, b_smem, acc, use_acc=False, mbarriers=[bar])
        blackwell.mbarrier.wait(bar, 0)
        reg: gl.constexpr = acc.get_reg_layout()
        rows = gl.arange(0, M, gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))
        blackwell.mbarrier.invalidate(bar)

    return tmem_a_mma


def _jit(source):
    return gluonkit.jit(source(gluonkit_gl, gluonkit_blackwell))


mma = _jit(mma_source)
sync_mma = _jit(sync_mma_source)
tmem_a_mma = _jit(tmem_a_mma_source)
