"""One key block of the Blackwell attention forward, as a single-partition Gluon kernel that both
gluonkit and Triton 3.9 compile (``tests/test_triton39_crosscheck.py``).

It uses the instruction forms of ``examples/attention/blackwell_attention.py`` on one block:
``S = Q Kᵀ`` by ``tcgen05_mma`` into one of two S buffers in tensor memory (K-major B: the
``permute`` of the ``[BLOCK_N, D]`` K tile), the exp2 softmax on S loaded with the 32x32b
layout, P (16-bit) through shared memory or (``P_TMEM``) over S in tensor memory, ``O = P V``
into tensor memory (V N-major; A from tensor memory with ``P_TMEM``), and O loaded back.  Written as a factory over the ``gl``/``blackwell`` modules, like :mod:`tcgen05_kernels`.
"""

from __future__ import annotations


def attention_block_source(gl, blackwell):
    """``o = softmax2(q kᵀ · qk_scale) v`` for one ``[128, D]`` query tile and one ``[BLOCK_N, D]`` key block."""

    def attention_block(q_ptr, k_ptr, v_ptr, o_ptr, D: gl.constexpr, BLOCK_N: gl.constexpr, P_TMEM: gl.constexpr):
        BLOCK_M: gl.constexpr = 128
        dtype: gl.constexpr = q_ptr.dtype.element_ty
        blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        rm = gl.arange(0, BLOCK_M, gl.SliceLayout(1, blk))
        rn = gl.arange(0, BLOCK_N, gl.SliceLayout(1, blk))
        cd = gl.arange(0, D, gl.SliceLayout(0, blk))
        qo_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, D], dtype)
        kv_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], dtype)
        p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype)
        q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, D], qo_layout, gl.load(q_ptr + rm[:, None] * D + cd[None, :]))
        k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, D], kv_layout, gl.load(k_ptr + rn[:, None] * D + cd[None, :]))
        v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, D], kv_layout, gl.load(v_ptr + rn[:, None] * D + cd[None, :]))
        p_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], p_layout)
        s_tmem = blackwell.allocate_tensor_memory(gl.float32, [2, BLOCK_M, BLOCK_N],
                                                  blackwell.TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
        o_tmem = blackwell.allocate_tensor_memory(gl.float32, [BLOCK_M, D],
                                                  blackwell.TensorMemoryLayout([BLOCK_M, D], col_stride=1))
        bar = gl.allocate_shared_memory(gl.int64, [1], blackwell.mbarrier.MBarrierLayout())
        blackwell.mbarrier.init(bar, count=1)
        blackwell.fence_async_shared()
        blackwell.tcgen05_mma(q_smem, k_smem.permute((1, 0)), s_tmem.index(0), use_acc=False, mbarriers=[bar])
        blackwell.mbarrier.wait(bar, 0)
        s_reg: gl.constexpr = s_tmem.index(0).get_reg_layout()
        s = s_tmem.index(0).load(s_reg) * 0.18033688011112042
        p = gl.exp2(s - gl.expand_dims(gl.max(s, 1), 1))
        if P_TMEM:
            p_tmem = s_tmem.index(0).reinterpret(dtype, [BLOCK_M, BLOCK_N],
                                                 blackwell.TensorMemoryLayout([BLOCK_M, BLOCK_N], col_stride=1))
            p_tmem.store(gl.convert_layout(p.to(dtype), p_tmem.get_reg_layout()))
            blackwell.tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False, mbarriers=[bar])
        else:
            p_smem.store(p.to(dtype))
            blackwell.fence_async_shared()
            blackwell.tcgen05_mma(p_smem, v_smem, o_tmem, use_acc=False, mbarriers=[bar])
        blackwell.mbarrier.wait(bar, 1)
        o_reg: gl.constexpr = o_tmem.get_reg_layout()
        o = o_tmem.load(o_reg) / gl.expand_dims(gl.convert_layout(gl.sum(p, 1), gl.SliceLayout(1, o_reg)), 1)
        orow = gl.arange(0, BLOCK_M, gl.SliceLayout(1, o_reg))
        ocol = gl.arange(0, D, gl.SliceLayout(0, o_reg))
        gl.store(o_ptr + orow[:, None] * D + ocol[None, :], o.to(dtype))
        blackwell.mbarrier.invalidate(bar)

    return attention_block
