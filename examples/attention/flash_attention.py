"""FlashAttention-3-style forward attention on Hopper: a TMA producer warp and two ping-pong
consumer warpgroups.

``O = softmax(Q Kᵀ · sm_scale [+ causal mask]) V`` for Q, K, V, O of shape ``[B, H, S, D]``
(fp16 or bf16, contiguous), and the log-sum-exp ``LSE[b, h, i] = log Σ_j exp(s_ij)`` of every
row (fp32, natural log) that a backward pass needs.

The work is cut into *tiles* of ``2 · BLOCK_M`` query rows of one (batch, head).  The grid is
**persistent**: one program per SM, each running tiles round robin (head after head, so the
programs running together share a few heads' K and V in L2; causally in pairs of a long and a
short tile of one head, so that every program gets the same work).  ``gl.warp_specialize``
splits a program:

* the **producer** (one worker warp with few registers) loads each tile's two Q blocks, as
  soon as the consumers have released the previous ones, then streams the K and V blocks of
  ``BLOCK_N`` keys through a ring of ``STAGES`` buffers whose position runs on from tile to
  tile (so the next tile's first blocks load under the current tile's last products and
  epilogue): K and V of a block have separate ``ready`` barriers, so the first product
  starts before V has landed; a stage is refilled once both consumers have handed it back
  (``empty``, count 2);
* the two **consumers** (the kernel's 4 warps, and a 4-warp worker), one warpgroup each, own
  ``BLOCK_M`` query rows of a tile.  For each key block: ``S = Q Kᵀ`` by wgmma from shared
  memory, the online softmax in fp32 in registers (base 2: ``sm_scale · log2 e`` and the row
  max are folded into one FFMA, then one ``ex2.approx.ftz``), then ``O += P V`` by wgmma with
  **P taken from registers** (``DotOperandLayout`` operand A: P never goes through shared memory);
* **intra-warpgroup overlap** (``OVERLAP=True``; the default at ``D = 128``, where it was
  faster on the H100, see docs/attention.rst): block ``j``'s ``Q K_jᵀ`` and block ``j - 1``'s ``P V`` are
  issued together; ``warpgroup_mma_wait(1)`` waits for the first only, so block ``j``'s
  softmax runs while the tensor cores do ``P_{j-1} V_{j-1}``; then O is rescaled;
* **ping-pong**: two ``turn`` mbarriers make the consumers issue their products in
  alternation, so one warpgroup's softmax also runs under the other's products.

Causal attention (``CAUSAL``; query ``i`` sees keys ``j ≤ i``) skips the key blocks right of
the tile's last row altogether and masks only the blocks that cross the diagonal.  Any
sequence length works: the key loop masks keys ``≥ S`` in the last block; K and V are read
through 2-D descriptors over ``[B·H·S, D]`` (rows past a head's end belong to the next head,
or are zero-filled by TMA at the end of the tensor, and only ever meet the mask); Q goes
through a 3-D descriptor over ``[B·H, S, D]``, whose loads zero-fill the rows past ``S`` of
each head.  O is stored straight from registers with a row mask (no shared buffer, so the
next tile's Q can load while O is written), and the LSE beside it.

Run: ``python examples/attention/flash_attention.py`` (the GPU if it is a Hopper, else the
CPU interpreter at a small ragged size).
"""

import functools
import math
import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.nvidia.hopper import TensorDescriptor

LOG2E = 1.4426950408889634


@gluonkit.jit
def _kv_range(SEQ, q_start, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """The tile's key blocks ``[0, n_blocks)``, of which ``[0, n_full)`` need no mask.

    A block needs a mask when it reaches past the sequence end or, causally, past the
    tile's first query row; causally, blocks that start after its last row are skipped.
    """
    if CAUSAL:
        n_blocks = gl.cdiv(gl.minimum(SEQ, q_start + 2 * BLOCK_M), BLOCK_N)
        n_full = gl.minimum(q_start + 1, SEQ) // BLOCK_N
    else:
        n_blocks = gl.cdiv(SEQ, BLOCK_N)
        n_full = SEQ // BLOCK_N
    return n_blocks, n_full


@gluonkit.jit
def _tile_count(SEQ, BH, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    """How many tiles (``2·BLOCK_M`` query rows of one head) this program runs.

    Tiles are handed out in *units* (one tile, or causally a pair of tiles) round robin:
    program ``p`` runs units ``p, p + G, p + 2G, …`` (``G`` programs).  Causally a unit pairs a
    long tile with a short one of the same head (:func:`_tile`), so every unit holds the same
    work and the round robin balances the programs.
    """
    UNIT: gl.constexpr = 2 if CAUSAL else 1
    n_tiles = BH * gl.cdiv(SEQ, 2 * BLOCK_M)
    n_units = gl.cdiv(n_tiles, UNIT)
    pid = gl.program_id(0)
    G = gl.num_programs(0)
    mine = gl.cdiv(n_units - pid, G) * UNIT
    # The last unit is short (one tile) when the tile count is odd.
    if (n_units - 1 - pid) % G == 0:
        mine -= UNIT * n_units - n_tiles
    return mine


@gluonkit.jit
def _tile(i, SEQ, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr):
    """The (head, first query row) of this program's ``i``-th tile (see :func:`_tile_count`).

    Tiles of a head are consecutive, so the programs running at one time share a few heads'
    K and V in L2.  Causally the tiles of a head go longest, shortest, second longest,
    second shortest, …: each unit (pair) of tiles holds the same number of key blocks.
    """
    UNIT: gl.constexpr = 2 if CAUSAL else 1
    n_q = gl.cdiv(SEQ, 2 * BLOCK_M)
    u = (gl.program_id(0) + (i // UNIT) * gl.num_programs(0)) * UNIT + i % UNIT
    bh = u // n_q
    k = u % n_q
    if CAUSAL:
        k = gl.where(k % 2 == 0, n_q - 1 - k // 2, k // 2)
    return bh, k * 2 * BLOCK_M


@gluonkit.jit
def _load_kv(c, row, k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, empty, STAGES: gl.constexpr):
    """K and V rows ``row …`` into the ring at position ``c``, once both consumers have released it."""
    stage = c % STAGES
    mbarrier.wait(empty.index(stage), ((c // STAGES) & 1) ^ 1)
    mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
    tma.async_load(k_desc, [row, 0], k_ready.index(stage), k_smem.index(stage))
    mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
    tma.async_load(v_desc, [row, 0], v_ready.index(stage), v_smem.index(stage))


@gluonkit.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, empty, SEQ, BH,
              CAUSAL: gl.constexpr, STAGES: gl.constexpr):
    """The TMA warp: for each tile, K and V block after block through the ring, whose position runs
    on across tiles, and the two Q blocks once the consumers have released the previous ones.  The
    first K/V block goes before the Q blocks: its ring slot frees before the previous tile ends,
    while Q's buffers free only at its end."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    c = 0  # ring position: key blocks loaded so far, over all tiles
    for i in range(_tile_count(SEQ, BH, BLOCK_M, CAUSAL)):
        bh, q_start = _tile(i, SEQ, BLOCK_M, CAUSAL)
        n_blocks, n_full = _kv_range(SEQ, q_start, BLOCK_M, BLOCK_N, CAUSAL)
        row0 = bh * SEQ
        _load_kv(c, row0, k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, empty, STAGES)
        for w in gl.static_range(2):
            mbarrier.wait(q_empty.index(w), (i & 1) ^ 1)
            mbarrier.expect(q_ready.index(w), q_desc.block_type.nbytes)
            tma.async_load(q_desc, [bh, q_start + w * BLOCK_M, 0], q_ready.index(w), q_smem.index(w))
        for j in range(1, n_blocks):
            _load_kv(c + j, row0 + j * BLOCK_N, k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, empty, STAGES)
        c += n_blocks


@gluonkit.jit
def _issue_scores(c, q, k_smem, k_ready, turn, STAGES: gl.constexpr, WHICH: gl.constexpr, s_layout: gl.constexpr):
    """Wait for K at ring position ``c`` and for our turn on the tensor cores; start ``S = Q Kᵀ``."""
    stage = c % STAGES
    mbarrier.wait(k_ready.index(stage), (c // STAGES) & 1)
    mbarrier.wait(turn.index(WHICH), (c & 1) ^ (1 - WHICH))
    zeros = gl.zeros([q.shape[0], k_smem.shape[1]], gl.float32, s_layout)
    return warpgroup_mma(q, k_smem.index(stage).permute((1, 0)), zeros, use_acc=False, is_async=True)


@gluonkit.jit
def _issue_pv(c, p, v_smem, v_ready, acc, STAGES: gl.constexpr):
    """Wait for V at ring position ``c``; start ``O += P V`` with P in registers."""
    stage = c % STAGES
    mbarrier.wait(v_ready.index(stage), (c // STAGES) & 1)
    return warpgroup_mma(p, v_smem.index(stage), acc, is_async=True)


@gluonkit.jit
def _release(bar):
    """This warpgroup is done with what ``bar`` guards (the MMAs that read it have completed): thread 0
    arrives.  No barrier first: a wgmma is one operation of the whole warpgroup, so once warp 0's
    ``warpgroup_mma_wait`` has seen it complete, no warp's part still reads shared memory (CUTLASS's
    pipelines release the same way, one thread a warpgroup; the named barrier this had cost 4% at
    ``4×32×16384``, ``D = 128``, causal or not, on the H100)."""
    mbarrier.arrive(bar)


@gluonkit.jit
def _release_q(c, last, q_free):
    """After the S product at ring position ``c`` has completed: if it was the tile's last one
    (``last``), Q is dead, and the producer may load the next tile's Q under this tile's last
    ``P V`` product and epilogue.

    This release keeps a barrier before its arrive (not needed, see :func:`_release`; it runs
    once a tile): a barrier cannot be predicated, so the release stays a branch, and in the key
    loop that branch is the basic-block boundary between the softmax and the wait for ``P V``
    (without it ptxas scheduled that wait ahead of the whole softmax, see ``_attend_block``)."""
    if c == last:
        gl.thread_barrier()
        mbarrier.arrive(q_free)


@gluonkit.jit
def _softmax(j, s, m_i, l_i, qk_scale, rows, SEQ, MASK: gl.constexpr, CAUSAL: gl.constexpr,
             s_layout: gl.constexpr, o_layout: gl.constexpr):
    """The online-softmax step for key block ``j``'s scores: P (fp32), the new running max and sum,
    and ``alpha``, the factor that rescales O to the new max."""
    BLOCK_N: gl.constexpr = s.shape[1]
    if MASK:
        cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if CAUSAL:
            # cols ≤ row < S for every row that is stored: the causal test alone masks the keys past S.
            keep = gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1)
        else:
            keep = gl.expand_dims(cols < SEQ, 0)
        s = gl.where(keep, s, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    # One FFMA and one MUFU.EX2 per score (a separate multiply and subtract would be two FMA-pipe ops).
    p = gl.exp2(gl.fma(s, qk_scale, gl.expand_dims(-m_new, 1)))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, m_new, l_i, gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))


@gluonkit.jit
def _p_operand(p, dtype: gl.constexpr, o_layout: gl.constexpr):
    """P in the input dtype as wgmma's register operand A (a register permutation, no shared memory)."""
    return gl.convert_layout(p.to(dtype), gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2))


@gluonkit.jit
def _attend_block(j, c, last, q_free, q, p, k_smem, v_smem, k_ready, v_ready, empty, turn, acc, m_i, l_i, qk_scale,
                  rows, SEQ, MASK: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, WHICH: gl.constexpr,
                  s_layout: gl.constexpr, o_layout: gl.constexpr):
    """Key block ``j ≥ 1`` (ring position ``c``; the tile's last is ``last``) for one warpgroup,
    overlapped with the tail of block ``j - 1``: start ``S_j = Q K_jᵀ`` and ``O += P_{j-1} V_{j-1}``,
    run block ``j``'s softmax while the second product is in flight, then rescale O."""
    s = _issue_scores(c, q, k_smem, k_ready, turn, STAGES, WHICH, s_layout)
    acc = _issue_pv(c - 1, p, v_smem, v_ready, acc, STAGES)
    mbarrier.arrive(turn.index(1 - WHICH))  # ping-pong: the other warpgroup's turn
    s = warpgroup_mma_wait(num_outstanding=1, deps=[s])
    p, m_i, l_i, alpha = _softmax(j, s, m_i, l_i, qk_scale, rows, SEQ, MASK, CAUSAL, s_layout, o_layout)
    # Q's release (a branch, see _release_q) goes between the softmax and the wait for P V on
    # purpose: with the softmax and that wait in one basic block, ptxas scheduled the wait
    # (WARPGROUP.DEPBAR) first, ahead of the whole softmax, which then no longer ran under P V.
    _release_q(c, last, q_free)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    _release(empty.index((c - 1) % STAGES))
    # P_{j-1}'s registers are free only now: converting P_j here keeps one P live, not two.
    return acc * gl.expand_dims(alpha, 1), _p_operand(p, v_smem.dtype, o_layout), m_i, l_i


@gluonkit.jit
def _attend_block_serial(j, c, last, q_free, q, k_smem, v_smem, k_ready, v_ready, empty, turn, acc, m_i, l_i,
                         qk_scale, rows, SEQ, MASK: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                         WHICH: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr):
    """Key block ``j`` (ring position ``c``; the tile's last is ``last``) for one warpgroup without intra-warpgroup overlap
    (``OVERLAP=False``): ``S = Q Kᵀ``, the softmax (under the other warpgroup's products), then ``O += P V``."""
    s = _issue_scores(c, q, k_smem, k_ready, turn, STAGES, WHICH, s_layout)
    s = warpgroup_mma_wait(num_outstanding=0, deps=[s])
    mbarrier.arrive(turn.index(1 - WHICH))  # ping-pong: the other warpgroup's turn
    _release_q(c, last, q_free)
    p, m_i, l_i, alpha = _softmax(j, s, m_i, l_i, qk_scale, rows, SEQ, MASK, CAUSAL, s_layout, o_layout)
    acc = _issue_pv(c, _p_operand(p, v_smem.dtype, o_layout), v_smem, v_ready, acc * gl.expand_dims(alpha, 1),
                    STAGES)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    _release(empty.index(c % STAGES))
    return acc, m_i, l_i


@gluonkit.jit
def _key_loop_serial(q, q_free, k_smem, v_smem, k_ready, v_ready, empty, turn, qk_scale, rows, SEQ, c, n_blocks,
                     n_full, CAUSAL: gl.constexpr, STAGES: gl.constexpr, WHICH: gl.constexpr,
                     s_layout: gl.constexpr, o_layout: gl.constexpr):
    """All key blocks of a tile without intra-warpgroup overlap; returns O (unnormalised), the
    running max and the running sum."""
    BLOCK_M: gl.constexpr = q.shape[0]
    HEAD_DIM: gl.constexpr = q.shape[1]
    m_i = gl.full([BLOCK_M], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    last = c + n_blocks - 1  # the tile's last ring position
    for j in range(n_full):
        acc, m_i, l_i = _attend_block_serial(j, c + j, last, q_free, q, k_smem, v_smem, k_ready, v_ready, empty, turn,
                                             acc, m_i, l_i, qk_scale, rows, SEQ, False, CAUSAL, STAGES, WHICH,
                                             s_layout, o_layout)
    for j in range(n_full, n_blocks):
        acc, m_i, l_i = _attend_block_serial(j, c + j, last, q_free, q, k_smem, v_smem, k_ready, v_ready, empty, turn,
                                             acc, m_i, l_i, qk_scale, rows, SEQ, True, CAUSAL, STAGES, WHICH,
                                             s_layout, o_layout)
    return acc, m_i, l_i


@gluonkit.jit
def _key_loop_overlapped(q, q_free, k_smem, v_smem, k_ready, v_ready, empty, turn, qk_scale, rows, SEQ, c, n_blocks,
                         n_full, CAUSAL: gl.constexpr, STAGES: gl.constexpr, WHICH: gl.constexpr,
                         s_layout: gl.constexpr, o_layout: gl.constexpr):
    """All key blocks of a tile with intra-warpgroup overlap (``OVERLAP=True``); returns O
    (unnormalised), the running max and the running sum."""
    BLOCK_M: gl.constexpr = q.shape[0]
    HEAD_DIM: gl.constexpr = q.shape[1]
    last = c + n_blocks - 1  # the tile's last ring position
    # Block 0 alone (always with the mask: exact, and it keeps the loops below uniform).
    s = _issue_scores(c, q, k_smem, k_ready, turn, STAGES, WHICH, s_layout)
    mbarrier.arrive(turn.index(1 - WHICH))
    s = warpgroup_mma_wait(num_outstanding=0, deps=[s])
    _release_q(c, last, q_free)
    m_i = gl.full([BLOCK_M], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([BLOCK_M], gl.float32, gl.SliceLayout(1, s_layout))
    p, m_i, l_i, _ = _softmax(0, s, m_i, l_i, qk_scale, rows, SEQ, True, CAUSAL, s_layout, o_layout)
    p = _p_operand(p, v_smem.dtype, o_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    for j in range(1, n_full):
        acc, p, m_i, l_i = _attend_block(j, c + j, last, q_free, q, p, k_smem, v_smem, k_ready, v_ready, empty, turn,
                                         acc, m_i, l_i, qk_scale, rows, SEQ, False, CAUSAL, STAGES, WHICH,
                                         s_layout, o_layout)
    for j in range(gl.maximum(n_full, 1), n_blocks):
        acc, p, m_i, l_i = _attend_block(j, c + j, last, q_free, q, p, k_smem, v_smem, k_ready, v_ready, empty, turn,
                                         acc, m_i, l_i, qk_scale, rows, SEQ, True, CAUSAL, STAGES, WHICH,
                                         s_layout, o_layout)
    acc = _issue_pv(c + n_blocks - 1, p, v_smem, v_ready, acc, STAGES)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    _release(empty.index((c + n_blocks - 1) % STAGES))
    return acc, m_i, l_i


@gluonkit.jit
def _consumer(q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, empty, turn, o_ptr, lse_ptr, SEQ, BH,
              qk_scale, CAUSAL: gl.constexpr, STAGES: gl.constexpr, WHICH: gl.constexpr,
              s_layout: gl.constexpr, o_layout: gl.constexpr, OVERLAP: gl.constexpr):
    """One consumer warpgroup: for each of the program's tiles, query rows ``q_start + WHICH·BLOCK_M …``
    against every key block, then the epilogue."""
    BLOCK_M: gl.constexpr = q_smem.shape[2]
    HEAD_DIM: gl.constexpr = q_smem.shape[3]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    q = q_smem.index(WHICH).reshape([BLOCK_M, HEAD_DIM])
    local_rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    cols = gl.expand_dims(gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout)), 0)
    c = 0  # ring position, as the producer's
    for i in range(_tile_count(SEQ, BH, BLOCK_M, CAUSAL)):
        bh, q_start = _tile(i, SEQ, BLOCK_M, CAUSAL)
        my_start = q_start + WHICH * BLOCK_M
        rows = my_start + local_rows
        n_blocks, n_full = _kv_range(SEQ, q_start, BLOCK_M, BLOCK_N, CAUSAL)
        mbarrier.wait(q_ready.index(WHICH), i & 1)
        if OVERLAP:
            acc, m_i, l_i = _key_loop_overlapped(q, q_empty.index(WHICH), k_smem, v_smem, k_ready, v_ready, empty, turn,
                                                 qk_scale, rows, SEQ, c, n_blocks, n_full, CAUSAL, STAGES, WHICH,
                                                 s_layout, o_layout)
        else:
            acc, m_i, l_i = _key_loop_serial(q, q_empty.index(WHICH), k_smem, v_smem, k_ready, v_ready, empty, turn,
                                             qk_scale, rows, SEQ, c, n_blocks, n_full, CAUSAL, STAGES, WHICH,
                                             s_layout, o_layout)
        c += n_blocks
        # The key loop has released Q after the tile's last S product.  O leaves straight from
        # registers (rows past S are not stored), so no shared buffer ties the next Q to this
        # store; the LSE in nats.
        # One reciprocal per row and a multiply per element (a division per element costs ~8 instructions).
        acc = acc * gl.expand_dims(gl.convert_layout(1.0 / l_i, gl.SliceLayout(1, o_layout)), 1)
        o_rows = gl.expand_dims(gl.convert_layout(rows, gl.SliceLayout(1, o_layout)), 1)
        o_head = o_ptr + bh.to(gl.int64) * SEQ * HEAD_DIM
        gl.store(o_head + o_rows * HEAD_DIM + cols, acc.to(o_ptr.dtype.element_ty), mask=o_rows < SEQ)
        lse = (m_i + gl.log2(l_i)) * 0.6931471805599453
        gl.store(lse_ptr + bh.to(gl.int64) * SEQ + rows, lse, mask=rows < SEQ)


@gluonkit.jit
def attention_fwd_kernel(q_desc, k_desc, v_desc, o_ptr, lse_ptr, SEQ, BH, qk_scale, CAUSAL: gl.constexpr,
                         STAGES: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                         PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, OVERLAP: gl.constexpr = False):
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[1]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[2]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [2, 1, BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for w in gl.static_range(2):
        mbarrier.init(q_ready.index(w), count=1)
        mbarrier.init(q_empty.index(w), count=1)
        mbarrier.init(turn.index(w), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)
    fence_async_shared()
    gl.warp_specialize([
        (_consumer, (q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, empty, turn, o_ptr, lse_ptr, SEQ,
                     BH, qk_scale, CAUSAL, STAGES, 0, s_layout, o_layout, OVERLAP)),
        (_consumer, (q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, empty, turn, o_ptr, lse_ptr, SEQ,
                     BH, qk_scale, CAUSAL, STAGES, 1, s_layout, o_layout, OVERLAP)),
        (_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, k_ready, v_ready, empty, SEQ,
                     BH, CAUSAL, STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    for w in gl.static_range(2):
        mbarrier.invalidate(q_ready.index(w))
        mbarrier.invalidate(q_empty.index(w))
        mbarrier.invalidate(turn.index(w))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(k_ready.index(s))
        mbarrier.invalidate(v_ready.index(s))
        mbarrier.invalidate(empty.index(s))


_GL_DTYPES = {"float16": gl.float16, "bfloat16": gl.bfloat16}


def element_dtype(array) -> gl.dtype:
    """The gluonkit dtype of a numpy array's or torch tensor's elements (fp16 or bf16)."""
    name = str(array.dtype).replace("torch.", "")
    if name not in _GL_DTYPES:
        raise TypeError(f"attention: Q, K and V must be float16 or bfloat16, got {name}")
    return _GL_DTYPES[name]


@functools.lru_cache(maxsize=64)
def attention_layouts(BLOCK_M: int, BLOCK_N: int, HEAD_DIM: int, dtype):
    """Shared layouts of the Q/O tiles (``[1, BLOCK_M, D]``) and K/V tiles, and the S and O accumulator
    layouts of one warpgroup."""
    nvmma = gl.NVMMASharedLayout.get_default_for
    s_layout = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    return nvmma([1, BLOCK_M, HEAD_DIM], dtype), nvmma([BLOCK_N, HEAD_DIM], dtype), s_layout, o_layout


def _flat(array, shape):
    """A view of a contiguous array or tensor with another shape (no copy)."""
    return array.reshape(shape) if isinstance(array, np.ndarray) else array.view(shape)


@functools.lru_cache(maxsize=None)
def _sm_count() -> int:
    from gluonkit.runtime.driver import device_properties
    return device_properties().sm_count


def default_programs() -> int:
    """Programs of the persistent grid: the GPU's SM count (one program of 12 warps per SM), or 4 in
    the interpreter (so that its programs run several tiles each)."""
    from gluonkit.runtime.driver import has_gpu
    if os.environ.get("GLUONKIT_INTERPRET") == "1" or not has_gpu():
        return 4
    return _sm_count()


def default_config(head_dim: int, causal: bool) -> dict:
    """Tile sizes per head dimension (64 query rows per warpgroup; see docs/attention.rst)."""
    if head_dim == 128:  # measured on the H100: overlap and 3 stages, causal or not (docs/attention.rst)
        return dict(BLOCK_M=64, BLOCK_N=128, STAGES=3, OVERLAP=True)
    if head_dim < 128:
        return dict(BLOCK_M=64, BLOCK_N=128, STAGES=2, OVERLAP=False)
    return dict(BLOCK_M=64, BLOCK_N=64, STAGES=2, OVERLAP=False)


def prepare(q, k, v, o, lse, causal: bool = False, sm_scale: float = None, BLOCK_M: int = None,
            BLOCK_N: int = None, STAGES: int = None, producer_regs: int = 24, consumer_regs: int = 240,
            OVERLAP: bool = None, programs: int = None):
    """A function of no arguments that writes ``o = attention(q, k, v)`` and ``lse``.

    ``q, k, v, o``: contiguous ``[B, H, S, D]`` fp16/bf16 (numpy arrays in the interpreter,
    CUDA tensors on the GPU); ``lse``: contiguous fp32 ``[B, H, S]``.  ``sm_scale`` defaults to
    ``1/√D``.  ``programs``: the persistent grid's size (default :func:`default_programs`; at most
    one per unit of work, so a large value gives one unit, a tile or causally a pair, per program).
    Descriptors, layouts and grid are built once here.
    """
    B, H, S, D = q.shape
    if D not in (64, 128, 256):
        raise ValueError(f"attention: head dimension {D} is not supported (64, 128 or 256)")
    if tuple(k.shape) != (B, H, S, D) or tuple(v.shape) != (B, H, S, D) or tuple(o.shape) != (B, H, S, D):
        raise ValueError("attention: q, k, v and o must all have the shape [B, H, S, D]")
    config = default_config(D, causal)
    BLOCK_M = BLOCK_M or config["BLOCK_M"]
    BLOCK_N = BLOCK_N or config["BLOCK_N"]
    STAGES = STAGES or config["STAGES"]
    OVERLAP = config["OVERLAP"] if OVERLAP is None else OVERLAP
    dtype = element_dtype(q)
    qo_layout, kv_layout, s_layout, o_layout = attention_layouts(BLOCK_M, BLOCK_N, D, dtype)
    q_desc = TensorDescriptor.from_tensor(_flat(q, (B * H, S, D)), [1, BLOCK_M, D], qo_layout)
    k_desc = TensorDescriptor.from_tensor(_flat(k, (B * H * S, D)), [BLOCK_N, D], kv_layout)
    v_desc = TensorDescriptor.from_tensor(_flat(v, (B * H * S, D)), [BLOCK_N, D], kv_layout)
    qk_scale = (sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)) * LOG2E
    units = gluonkit.cdiv(B * H * gluonkit.cdiv(S, 2 * BLOCK_M), 2 if causal else 1)
    launch = attention_fwd_kernel[(min(units, programs or default_programs()),)]

    def run():
        launch(q_desc, k_desc, v_desc, o, lse, S, B * H, qk_scale, CAUSAL=causal, STAGES=STAGES, s_layout=s_layout,
               o_layout=o_layout, PRODUCER_REGS=producer_regs, CONSUMER_REGS=consumer_regs, OVERLAP=OVERLAP,
               num_warps=4)
        return o, lse
    return run


def attention(q, k, v, o, lse, causal: bool = False, sm_scale: float = None, **config):
    """``o = softmax(q kᵀ · sm_scale) v`` (causal if asked) and the rows' log-sum-exp into ``lse``."""
    return prepare(q, k, v, o, lse, causal, sm_scale, **config)()


def reference(q, k, v, causal: bool, sm_scale: float = None):
    """float64 numpy attention and log-sum-exp, for checking."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    S, D = q.shape[-2:]
    s = q @ np.swapaxes(k, -1, -2) * (sm_scale if sm_scale is not None else 1.0 / math.sqrt(D))
    if causal:
        s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return p @ v / l, (m + np.log(l))[..., 0]


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from _device import arrays_for_device, gpu_available, to_numpy

    on_gpu = gpu_available()
    if on_gpu:
        import torch
        if torch.cuda.get_device_capability() != (9, 0):
            print(f"flash_attention: {torch.cuda.get_device_name()} is not a Hopper (sm_90) GPU: interpreting")
            os.environ["GLUONKIT_INTERPRET"] = "1"
            on_gpu = False
    B, H, S, D = (2, 8, 1000, 128) if on_gpu else (1, 2, 200, 64)
    rng = np.random.default_rng(0)
    q_np, k_np, v_np = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(3))
    for causal in (False, True):
        q, k, v, o, lse = arrays_for_device(q_np, k_np, v_np, np.full((B, H, S, D), np.nan, np.float16),
                                            np.full((B, H, S), np.nan, np.float32))
        attention(q, k, v, o, lse, causal=causal)
        ref_o, ref_lse = reference(q_np, k_np, v_np, causal)
        err = np.abs(to_numpy(o) - ref_o).max()
        lse_err = np.abs(to_numpy(lse) - ref_lse).max()
        where = "on the GPU" if on_gpu else "in the interpreter"
        print(f"flash_attention: B={B} H={H} S={S} D={D} causal={causal} fp16 {where}: "
              f"max |O - ref| {err:.1e}, max |LSE - ref| {lse_err:.1e}")
        assert err < 1e-2 and lse_err < 1e-3, (err, lse_err)


if __name__ == "__main__":
    main()
