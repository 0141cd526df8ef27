"""FlashAttention forward for Blackwell (sm_100a): S and O in tensor memory, both products by
``tcgen05_mma``, four warp-specialized partitions.

``O = softmax(Q Kᵀ · sm_scale [+ causal mask]) V`` for Q, K, V, O of shape ``[B, H, S, D]``
(fp16 or bf16, D = 64 or 128) and the log-sum-exp ``LSE[b, h, i]`` of every row (fp32, natural
log), as the Hopper kernel (``flash_attention.py``) computes them.  A program takes
``BLOCK_M = 128`` query rows of one (batch, head); ``gl.warp_specialize`` splits it into

* the **loader** (one warp): Q once, then K and V block after block through a ring of
  ``STAGES`` shared buffers (separate ``k_ready`` / ``v_ready``; ``kv_empty`` frees a stage);
* the **MMA warp** (one warp, one issuing thread): ``S_j = Q K_jᵀ`` into one of **two S buffers
  in tensor memory**, so the product of block ``j + 1`` runs while the softmax works on block
  ``j``, then ``O += P_j V_j`` into the **O accumulator in tensor memory**;
* the **softmax** warpgroup (4 warps, one query row per thread): loads ``S_j`` from tensor
  memory, the online softmax in fp32 with ``exp2`` (the Hopper kernel's ``_softmax``), writes
  ``P_j`` (fp16/bf16, packed) back over ``S_j`` in tensor memory, where ``P_j V_j`` reads it as
  its A operand, and the rows' rescale factors ``alpha_j`` to shared memory;
* the **correction** warpgroup (the kernel's own 4 warps): rescales O in tensor memory by
  ``alpha_j`` between ``P_{j-1} V_{j-1}`` and ``P_j V_j``, and at the end writes ``O / l``
  through Q's shared buffer and a TMA store.

With ``P_TMEM=False`` P goes through shared memory instead (kept to compare the two on a
Blackwell GPU).  docs/blackwell_attention.rst gives the barrier protocol, the tensor-memory
budget and the choices.  Any sequence length works as in the Hopper kernel (the key loop masks keys
``≥ S``; Q and O use 3-D descriptors that zero-fill and clip each head's rows).

Run: ``python examples/attention/blackwell_attention.py`` (the CPU interpreter: there is no
Blackwell GPU here; the interpreter also explores the partitions' interleavings).
"""

import math
import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, fence_async_shared,
                                                mbarrier, tcgen05_mma, tma)
from gluonkit.nvidia.blackwell import TensorDescriptor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flash_attention import LOG2E, _flat, _kv_range, _softmax, element_dtype, reference  # noqa: E402,F401

# The Hopper kernel's helpers count a tile as two warpgroups' ``BLOCK_M`` rows; a program here is
# one tile of ``BLOCK_M`` rows, so they are called with ``BLOCK_M // 2``.


@gluonkit.jit
def _blocks(SEQ, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """The program's first query row, its number of key blocks and how many of them need no mask.
    Causal programs are numbered from the longest rows down."""
    pid = gl.program_id(0)
    if CAUSAL:
        pid = gl.cdiv(SEQ, BLOCK_M) - 1 - pid
    q_start = pid * BLOCK_M
    n_blocks, n_full = _kv_range(SEQ, q_start, BLOCK_M // 2, BLOCK_N, CAUSAL)
    return q_start, n_blocks, n_full


@gluonkit.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, v_ready, kv_empty, SEQ,
            CAUSAL: gl.constexpr, STAGES: gl.constexpr):
    """The TMA warp: the Q tile once, then K and V of every key block through the ring."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    q_start, n_blocks, n_full = _blocks(SEQ, BLOCK_M, BLOCK_N, CAUSAL)
    row0 = gl.program_id(1) * SEQ
    mbarrier.expect(q_ready, q_desc.block_type.nbytes)
    tma.async_load(q_desc, [gl.program_id(1), q_start, 0], q_ready, q_smem)
    for j in range(n_blocks):
        stage = j % STAGES
        mbarrier.wait(kv_empty.index(stage), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
        tma.async_load(k_desc, [row0 + j * BLOCK_N, 0], k_ready.index(stage), k_smem.index(stage))
        mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
        tma.async_load(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(stage), v_smem.index(stage))


@gluonkit.jit
def _issue_scores(j, q, k_smem, s_tmem, k_ready, s_ready, s_free, STAGES: gl.constexpr):
    """``S_j = Q K_jᵀ`` into S buffer ``j % 2`` once K_j has landed and the buffer is free again (``P_{j-2}
    V_{j-2}`` has read P out of it; with P in shared memory: the softmax has loaded ``S_{j-2}``)."""
    stage = j % STAGES
    buf = j % 2
    mbarrier.wait(k_ready.index(stage), (j // STAGES) & 1)
    mbarrier.wait(s_free.index(buf), ((j // 2) & 1) ^ 1)
    tcgen05_mma(q, k_smem.index(stage).permute((1, 0)), s_tmem.index(buf), use_acc=False,
                mbarriers=[s_ready.index(buf)])


@gluonkit.jit
def _mma_warp(q_smem, k_smem, v_smem, p_smem, s_tmem, o_tmem, q_ready, k_ready, v_ready, kv_empty, s_ready, s_free,
              p_ready, o_fixed, pv_done, SEQ, CAUSAL: gl.constexpr, STAGES: gl.constexpr, P_TMEM: gl.constexpr):
    """The single issuing warp: block ``j + 1``'s scores go ahead of block ``j``'s ``P V``."""
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    q_start, n_blocks, n_full = _blocks(SEQ, BLOCK_M, BLOCK_N, CAUSAL)
    q = q_smem.reshape([BLOCK_M, HEAD_DIM])
    mbarrier.wait(q_ready, 0)
    _issue_scores(0, q, k_smem, s_tmem, k_ready, s_ready, s_free, STAGES)
    for j in range(n_blocks):
        if j + 1 < n_blocks:
            _issue_scores(j + 1, q, k_smem, s_tmem, k_ready, s_ready, s_free, STAGES)
        stage = j % STAGES
        mbarrier.wait(v_ready.index(stage), (j // STAGES) & 1)
        mbarrier.wait(p_ready, j & 1)                          # P_j is written
        mbarrier.wait(o_fixed, (j - 1) & 1, pred=j > 0)        # O is rescaled to block j's max
        # The commit frees the K/V stage and tells the softmax (P's buffer) and the correction (O).
        if P_TMEM:  # P_j is in S buffer j % 2, which is free again once this product has read it
            tcgen05_mma(_p_view(s_tmem, j % 2, v_smem.dtype), v_smem.index(stage), o_tmem, use_acc=j > 0,
                        mbarriers=[kv_empty.index(stage), pv_done, s_free.index(j % 2)])
        else:
            tcgen05_mma(p_smem, v_smem.index(stage), o_tmem, use_acc=j > 0,
                        mbarriers=[kv_empty.index(stage), pv_done])


@gluonkit.jit
def _p_view(s_tmem, buf, dtype: gl.constexpr):
    """P (16-bit, two per column) over the first half of S buffer ``buf``'s columns."""
    BLOCK_M: gl.constexpr = s_tmem.shape[1]
    BLOCK_N: gl.constexpr = s_tmem.shape[2]
    return s_tmem.index(buf).reinterpret(dtype, [BLOCK_M, BLOCK_N], TensorMemoryLayout([BLOCK_M, BLOCK_N], 1))


@gluonkit.jit
def _softmax_block(j, s_tmem, p_smem, alpha_smem, s_ready, s_free, p_ready, pv_done, m_i, l_i, qk_scale, rows, SEQ,
                   MASK: gl.constexpr, CAUSAL: gl.constexpr, P_TMEM: gl.constexpr, dtype: gl.constexpr):
    """Block ``j``: S from tensor memory, the online-softmax step, then P (over S in tensor memory, or to
    shared memory) and alpha (to shared memory)."""
    s_layout: gl.constexpr = s_tmem.index(0).get_reg_layout()
    buf = j % 2
    mbarrier.wait(s_ready.index(buf), (j // 2) & 1)
    s = s_tmem.index(buf).load(s_layout)
    if not P_TMEM:
        gl.thread_barrier()                                    # every warp has read S_j: the buffer is free
        mbarrier.arrive(s_free.index(buf))
    p, m_i, l_i, alpha = _softmax(j, s, m_i, l_i, qk_scale, rows, SEQ, MASK, CAUSAL, s_layout, s_layout)
    mbarrier.wait(pv_done, (j - 1) & 1, pred=j > 0)            # P_{j-1} V_{j-1} has read P's and alpha's buffers
    if P_TMEM:
        p_tmem = _p_view(s_tmem, buf, dtype)
        p_tmem.store(gl.convert_layout(p.to(dtype), p_tmem.get_reg_layout()))
    else:
        p_smem.store(p.to(dtype))
        fence_async_shared()                                   # the MMA reads P through the async proxy
    alpha_smem.store(alpha)
    gl.thread_barrier()
    mbarrier.arrive(p_ready)
    return m_i, l_i


@gluonkit.jit
def _softmax_partition(s_tmem, p_smem, alpha_smem, s_ready, s_free, p_ready, pv_done, lse_ptr, SEQ, qk_scale,
                       CAUSAL: gl.constexpr, P_TMEM: gl.constexpr, dtype: gl.constexpr):
    """One query row per thread: the running max ``m_i`` and sum ``l_i`` stay in registers."""
    BLOCK_M: gl.constexpr = s_tmem.shape[1]
    BLOCK_N: gl.constexpr = s_tmem.shape[2]
    s_layout: gl.constexpr = s_tmem.index(0).get_reg_layout()
    q_start, n_blocks, n_full = _blocks(SEQ, BLOCK_M, BLOCK_N, CAUSAL)
    rows = q_start + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    m_i = gl.full([BLOCK_M], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    for j in range(n_full):
        m_i, l_i = _softmax_block(j, s_tmem, p_smem, alpha_smem, s_ready, s_free, p_ready, pv_done, m_i, l_i,
                                  qk_scale, rows, SEQ, False, CAUSAL, P_TMEM, dtype)
    for j in range(n_full, n_blocks):
        m_i, l_i = _softmax_block(j, s_tmem, p_smem, alpha_smem, s_ready, s_free, p_ready, pv_done, m_i, l_i,
                                  qk_scale, rows, SEQ, True, CAUSAL, P_TMEM, dtype)
    # Hand the row sums to the correction through alpha's buffer, once it has read the last alpha.
    mbarrier.wait(pv_done, (n_blocks - 1) & 1)
    alpha_smem.store(l_i)
    gl.thread_barrier()
    mbarrier.arrive(p_ready)
    lse = (m_i + gl.log2(l_i)) * 0.6931471805599453
    gl.store(lse_ptr + gl.program_id(1) * SEQ + rows, lse, mask=rows < SEQ)


@gluonkit.jit
def _correction(o_tmem, q_smem, alpha_smem, o_desc, p_ready, o_fixed, pv_done, SEQ, CAUSAL: gl.constexpr,
                BLOCK_N: gl.constexpr, O_SPLIT: gl.constexpr):
    """Rescale O by ``alpha_j`` before ``P_j V_j`` (``O_SPLIT`` column slices at a time), then the epilogue."""
    BLOCK_M: gl.constexpr = o_tmem.shape[0]
    HEAD_DIM: gl.constexpr = o_tmem.shape[1]
    SLICE: gl.constexpr = HEAD_DIM // O_SPLIT
    slice_layout: gl.constexpr = o_tmem.slice(0, SLICE).get_reg_layout()
    o_layout: gl.constexpr = o_tmem.get_reg_layout()
    q_start, n_blocks, n_full = _blocks(SEQ, BLOCK_M, BLOCK_N, CAUSAL)
    for j in range(1, n_blocks):
        # O holds P_{j-1} V_{j-1}; then alpha_j is in shared memory (this order: p_ready's parity is
        # unambiguous only once P_{j-1} V_{j-1}, which needed its previous phase, is done).
        mbarrier.wait(pv_done, (j - 1) & 1)
        mbarrier.wait(p_ready, j & 1)
        alpha = gl.expand_dims(alpha_smem.load(gl.SliceLayout(1, slice_layout)), 1)
        for i in gl.static_range(O_SPLIT):
            part = o_tmem.slice(i * SLICE, SLICE)
            part.store(part.load(slice_layout) * alpha)
        gl.thread_barrier()
        mbarrier.arrive(o_fixed)
    # Epilogue: the row sums arrive after the last product (which also ends every read of Q's buffer).
    mbarrier.wait(pv_done, (n_blocks - 1) & 1)
    mbarrier.wait(p_ready, n_blocks & 1)
    l_i = alpha_smem.load(gl.SliceLayout(1, o_layout))
    o = o_tmem.load(o_layout) / gl.expand_dims(l_i, 1)
    q_smem.reshape([BLOCK_M, HEAD_DIM]).store(o.to(o_desc.dtype))
    fence_async_shared()
    tma.async_store(o_desc, [gl.program_id(1), q_start, 0], q_smem)
    tma.store_wait(0)


@gluonkit.jit
def blackwell_attention_kernel(q_desc, k_desc, v_desc, o_desc, lse_ptr, SEQ, qk_scale, CAUSAL: gl.constexpr,
                               STAGES: gl.constexpr, O_SPLIT: gl.constexpr, SOFTMAX_REGS: gl.constexpr,
                               P_TMEM: gl.constexpr):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[2]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    gl.static_assert(o_desc.block_type.shape == q_desc.block_type.shape, "O's block must be Q's: O reuses Q's buffer")
    gl.static_assert(BLOCK_M == 128, "one query row per thread of a warpgroup: BLOCK_M must be 128")
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [1, BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    alpha_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    q_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    s_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    s_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    p_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    o_fixed = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    pv_done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for bar in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(bar), count=1)
        mbarrier.init(v_ready.index(bar), count=1)
        mbarrier.init(kv_empty.index(bar), count=1)
    for bar in gl.static_range(2):
        mbarrier.init(s_ready.index(bar), count=1)
        mbarrier.init(s_free.index(bar), count=1)
    mbarrier.init(q_ready, count=1)
    mbarrier.init(p_ready, count=1)
    mbarrier.init(o_fixed, count=1)
    mbarrier.init(pv_done, count=1)
    s_tmem = allocate_tensor_memory(gl.float32, [2, BLOCK_M, BLOCK_N], TensorMemoryLayout([BLOCK_M, BLOCK_N], 1))
    o_tmem = allocate_tensor_memory(gl.float32, [BLOCK_M, HEAD_DIM], TensorMemoryLayout([BLOCK_M, HEAD_DIM], 1))
    if P_TMEM:
        p_smem = s_tmem  # (unused: P lives over S in tensor memory)
    else:
        p_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N],
                                           gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_N], dtype))
    fence_async_shared()
    gl.warp_specialize([
        (_correction, (o_tmem, q_smem, alpha_smem, o_desc, p_ready, o_fixed, pv_done, SEQ, CAUSAL, BLOCK_N, O_SPLIT)),
        (_softmax_partition, (s_tmem, p_smem, alpha_smem, s_ready, s_free, p_ready, pv_done, lse_ptr, SEQ, qk_scale,
                              CAUSAL, P_TMEM, dtype)),
        (_mma_warp, (q_smem, k_smem, v_smem, p_smem, s_tmem, o_tmem, q_ready, k_ready, v_ready, kv_empty, s_ready,
                     s_free, p_ready, o_fixed, pv_done, SEQ, CAUSAL, STAGES, P_TMEM)),
        (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, k_ready, v_ready, kv_empty, SEQ, CAUSAL,
                   STAGES)),
    ], [4, 1, 1], [SOFTMAX_REGS, 24, 24])
    for bar in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(bar))
        mbarrier.invalidate(v_ready.index(bar))
        mbarrier.invalidate(kv_empty.index(bar))
    for bar in gl.static_range(2):
        mbarrier.invalidate(s_ready.index(bar))
        mbarrier.invalidate(s_free.index(bar))
    mbarrier.invalidate(q_ready)
    mbarrier.invalidate(p_ready)
    mbarrier.invalidate(o_fixed)
    mbarrier.invalidate(pv_done)


def default_config(head_dim: int) -> dict:
    """Tile sizes per head dimension (docs/blackwell_attention.rst: shared memory and TMEM budgets)."""
    return dict(BLOCK_N=128, STAGES=2, O_SPLIT=2 if head_dim > 64 else 1, SOFTMAX_REGS=208, P_TMEM=True)


def layouts(BLOCK_M: int, BLOCK_N: int, HEAD_DIM: int, dtype):
    """Shared layouts of the Q/O tiles (``[1, BLOCK_M, D]``) and of the K/V tiles (``[BLOCK_N, D]``)."""
    nvmma = gl.NVMMASharedLayout.get_default_for
    return nvmma([1, BLOCK_M, HEAD_DIM], dtype), nvmma([BLOCK_N, HEAD_DIM], dtype)


def prepare(q, k, v, o, lse, causal: bool = False, sm_scale: float = None, BLOCK_N: int = None, STAGES: int = None,
            O_SPLIT: int = None, SOFTMAX_REGS: int = None, P_TMEM: bool = None):
    """A function of no arguments that writes ``o = attention(q, k, v)`` and ``lse`` (as the Hopper
    example's ``prepare``: contiguous ``[B, H, S, D]`` fp16/bf16 and fp32 ``[B, H, S]``).  ``P_TMEM``
    (default) keeps P in tensor memory over S; ``False`` passes it through shared memory."""
    B, H, S, D = q.shape
    if D not in (64, 128):
        raise ValueError(f"blackwell attention: head dimension {D} is not supported (64 or 128)")
    if tuple(k.shape) != (B, H, S, D) or tuple(v.shape) != (B, H, S, D) or tuple(o.shape) != (B, H, S, D):
        raise ValueError("blackwell attention: q, k, v and o must all have the shape [B, H, S, D]")
    config = default_config(D)
    BLOCK_N = BLOCK_N or config["BLOCK_N"]
    STAGES = STAGES or config["STAGES"]
    O_SPLIT = O_SPLIT or config["O_SPLIT"]
    SOFTMAX_REGS = SOFTMAX_REGS or config["SOFTMAX_REGS"]
    P_TMEM = config["P_TMEM"] if P_TMEM is None else P_TMEM
    BLOCK_M = 128
    dtype = element_dtype(q)
    qo_layout, kv_layout = layouts(BLOCK_M, BLOCK_N, D, dtype)
    q_desc = TensorDescriptor.from_tensor(_flat(q, (B * H, S, D)), [1, BLOCK_M, D], qo_layout)
    k_desc = TensorDescriptor.from_tensor(_flat(k, (B * H * S, D)), [BLOCK_N, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(_flat(v, (B * H * S, D)), [BLOCK_N, D], kv_layout)
    o_desc = TensorDescriptor.from_tensor(_flat(o, (B * H, S, D)), [1, BLOCK_M, D], qo_layout)
    qk_scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)) * LOG2E
    launch = blackwell_attention_kernel[(gluonkit.cdiv(S, BLOCK_M), B * H)]

    def run():
        launch(q_desc, k_desc, v_desc, o_desc, lse, S, qk_scale, CAUSAL=causal, STAGES=STAGES, O_SPLIT=O_SPLIT,
               SOFTMAX_REGS=SOFTMAX_REGS, P_TMEM=P_TMEM, num_warps=4)
        return o, lse
    return run


def attention(q, k, v, o, lse, causal: bool = False, sm_scale: float = None, **config):
    """``o = softmax(q kᵀ · sm_scale) v`` (causal if asked) and the rows' log-sum-exp into ``lse``."""
    return prepare(q, k, v, o, lse, causal, sm_scale, **config)()


def main() -> None:
    os.environ["GLUONKIT_INTERPRET"] = "1"  # no Blackwell GPU to run on: the interpreter checks the protocol
    B, H, S, D = 1, 2, 200, 64
    rng = np.random.default_rng(0)
    q_np, k_np, v_np = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(3))
    for causal in (False, True):
        o = np.full((B, H, S, D), np.nan, np.float16)
        lse = np.full((B, H, S), np.nan, np.float32)
        attention(q_np, k_np, v_np, o, lse, causal=causal, BLOCK_N=64)
        ref_o, ref_lse = reference(q_np, k_np, v_np, causal)
        err = np.abs(o - ref_o).max()
        lse_err = np.abs(lse - ref_lse).max()
        print(f"blackwell_attention: B={B} H={H} S={S} D={D} causal={causal} fp16 in the interpreter: "
              f"max |O - ref| {err:.1e}, max |LSE - ref| {lse_err:.1e}")
        assert err < 1e-2 and lse_err < 1e-3, (err, lse_err)


if __name__ == "__main__":
    main()
