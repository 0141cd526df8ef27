"""Kernels of CTA pairs (``cta_group::2`` tcgen05 MMAs), shared by the interpreter, ptxas and Triton cross-check tests.

Written once as a factory over the ``gl`` and ``blackwell`` modules (Gluon 3.9 names only),
like :mod:`tcgen05_kernels`, so ``tests/test_triton39_crosscheck.py`` builds the same source
with Triton's Gluon.
"""

from __future__ import annotations


def pair_mma_source(gl, blackwell):
    """``c = a @ b`` by one CTA pair: a ``[BM, K]`` (BM = 256) times ``[K, BN]``, K in BK steps
    (with B_KMAJOR, B is ``[N, K]`` and its ``[BN, BK]`` blocks are passed permuted).

    Each CTA loads its half of A's rows and of B's columns (TMA, split ``cga_layout``) onto
    the pair's ``ready`` barrier (``two_ctas``), which the even CTA waits on before issuing
    the pair's MMA; the MMA's commit arrives on ``done`` in both CTAs, and each CTA stores
    its rows of ``c`` from its own tensor memory.  With SKIP_READY_WAIT the even CTA does
    not wait for the loads (a planted bug); with EARLY_LOAD each CTA reads the accumulator
    before waiting on ``done`` (another); DONE_COUNT is ``done``'s arrival count (1 is right:
    the pair's one commit arrives once on each CTA's barrier).
    """

    def pair_mma(a_desc, b_desc, c_ptr, N, K, SKIP_READY_WAIT: gl.constexpr, EARLY_LOAD: gl.constexpr,
                 DONE_COUNT: gl.constexpr, B_KMAJOR: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0] if B_KMAJOR else b_desc.block_type.shape[1]
        a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
        ready = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
        done = blackwell.mbarrier.allocate_mbarrier()
        blackwell.mbarrier.init(ready, count=1)
        blackwell.mbarrier.init(done, count=DONE_COUNT)
        tmem_layout: gl.constexpr = blackwell.TensorMemoryLayout((BM // 2, BN), col_stride=1, cga_layout=[[1, 0]],
                                                                 two_ctas=True)
        acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], tmem_layout)
        gl.barrier(cluster=True)  # both CTAs' barriers are initialized before any CTA arrives on them
        off_m = gl.program_id(0) * BM
        off_n = gl.program_id(1) * BN
        phase = 0
        for k in range(0, K, BK):
            blackwell.mbarrier.expect(ready, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
            blackwell.tma.async_load(a_desc, [off_m, k], ready, a_smem)
            if B_KMAJOR:
                blackwell.tma.async_load(b_desc, [off_n, k], ready, b_smem)
            else:
                blackwell.tma.async_load(b_desc, [k, off_n], ready, b_smem)
            if not SKIP_READY_WAIT:
                blackwell.mbarrier.wait(ready, phase)
            if B_KMAJOR:
                blackwell.tcgen05_mma(a_smem, b_smem.permute((1, 0)), acc, use_acc=k > 0, mbarriers=[done])
            else:
                blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=k > 0, mbarriers=[done])
            if EARLY_LOAD:
                acc.load(acc.get_reg_layout())
            blackwell.mbarrier.wait(done, phase)
            phase ^= 1
        reg: gl.constexpr = acc.get_reg_layout()
        rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, reg))
        cols = off_n + gl.arange(0, BN, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))

    return pair_mma


def pair_tmem_a_mma_source(gl, blackwell):
    """``c = a @ b`` by one CTA pair with A read from tensor memory: a ``[256, K]`` (each CTA stores
    its 128 rows into its own tensor memory, ``two_ctas`` split by rows), times a ``[K, BN]`` B loaded
    by TMA split by columns onto the pair's ``ready`` barrier (with B_KMAJOR, B is ``[BN, K]`` and passed
    permuted; tf32 needs it).  With STORE_EARLY each CTA overwrites its rows of A before waiting for the
    MMA (a planted bug)."""

    def pair_tmem_a_mma(b_desc, a_ptr, c_ptr, N, B_KMAJOR: gl.constexpr, STORE_EARLY: gl.constexpr):
        BM: gl.constexpr = 256
        K: gl.constexpr = b_desc.block_type.shape[1] if B_KMAJOR else b_desc.block_type.shape[0]
        BN: gl.constexpr = b_desc.block_type.shape[0] if B_KMAJOR else b_desc.block_type.shape[1]
        a_layout: gl.constexpr = blackwell.TensorMemoryLayout((BM // 2, K), col_stride=1, cga_layout=[[1, 0]],
                                                              two_ctas=True)
        a_tmem = blackwell.allocate_tensor_memory(a_ptr.dtype.element_ty, [BM, K], a_layout)
        a_reg: gl.constexpr = a_tmem.get_reg_layout()
        ra = gl.arange(0, BM, gl.SliceLayout(1, a_reg))
        ka = gl.arange(0, K, gl.SliceLayout(0, a_reg))
        a = gl.load(a_ptr + ra[:, None] * K + ka[None, :])
        a_tmem.store(a)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
        ready = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
        done = blackwell.mbarrier.allocate_mbarrier()
        blackwell.mbarrier.init(ready, count=1)
        blackwell.mbarrier.init(done, count=1)
        acc_layout: gl.constexpr = blackwell.TensorMemoryLayout((BM // 2, BN), col_stride=1, cga_layout=[[1, 0]],
                                                                two_ctas=True)
        acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
        gl.barrier(cluster=True)  # both CTAs' barriers and A rows are ready before the even CTA issues
        blackwell.mbarrier.expect(ready, b_desc.nbytes_per_cta)
        blackwell.tma.async_load(b_desc, [0, 0], ready, b_smem)
        blackwell.mbarrier.wait(ready, 0)
        if B_KMAJOR:
            blackwell.tcgen05_mma(a_tmem, b_smem.permute((1, 0)), acc, use_acc=False, mbarriers=[done])
        else:
            blackwell.tcgen05_mma(a_tmem, b_smem, acc, use_acc=False, mbarriers=[done])
        if STORE_EARLY:
            a_tmem.store(a)
        blackwell.mbarrier.wait(done, 0)
        reg: gl.constexpr = acc.get_reg_layout()
        rows = gl.arange(0, BM, gl.SliceLayout(1, reg))
        cols = gl.arange(0, BN, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))

    return pair_tmem_a_mma


def multicast_mma_source(gl, blackwell):
    """``c = a @ b`` by a cluster of CTA pairs (``num_ctas`` 4 or 8) that share operands.

    The cluster computes one ``[BM, BN]`` tile: its accumulator's ``ACC_CGA`` puts each pair on
    its part (bit 0 the pair, each further bit a whole pair tile), A and B are split the way
    the MMA reads them, and an operand that a CTA bit does not move (a zero basis) is the same
    for the CTAs that differ in that bit: with MULTICAST it is loaded once and multicast to
    them, and each MMA's commit arrives on the ``done`` barrier of every CTA that shares an
    operand with its pair (``tcgen05_mma_barrier_count`` arrivals).  With COMMIT_DESCS the
    MMA is committed by ``tcgen05_commit(done, descs=[a, b])`` instead of ``mbarriers=``.
    Every CTA expects on its pair's ``ready`` barrier the bytes of its own shares (those that
    a peer's multicast brings included).
    """

    def multicast_mma(a_desc, b_desc, c_ptr, N, K, MULTICAST: gl.constexpr, ACC_CGA: gl.constexpr,
                      TMEM_BN: gl.constexpr, COMMIT_DESCS: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
        ready = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
        done = blackwell.mbarrier.allocate_mbarrier()
        blackwell.mbarrier.init(ready, count=1)
        commits: gl.constexpr = blackwell.tcgen05_mma_barrier_count([a_smem, b_smem], MULTICAST, True)
        blackwell.mbarrier.init(done, count=commits)
        tmem_layout: gl.constexpr = blackwell.TensorMemoryLayout((128, TMEM_BN), col_stride=1, cga_layout=ACC_CGA,
                                                                 two_ctas=True)
        acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], tmem_layout)
        gl.barrier(cluster=True)  # every CTA's barriers are initialized before any CTA arrives on them
        off_m = gl.program_id(0) * BM
        off_n = gl.program_id(1) * BN
        phase = 0
        for k in range(0, K, BK):
            blackwell.mbarrier.expect(ready, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
            blackwell.tma.async_load(a_desc, [off_m, k], ready, a_smem, multicast=MULTICAST)
            blackwell.tma.async_load(b_desc, [k, off_n], ready, b_smem, multicast=MULTICAST)
            blackwell.mbarrier.wait(ready, phase)
            if COMMIT_DESCS:
                blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=k > 0, mbarriers=[])
                blackwell.tcgen05_commit(done, descs=[a_smem, b_smem])
            else:
                blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=k > 0, mbarriers=[done], multicast=MULTICAST)
            blackwell.mbarrier.wait(done, phase)
            phase ^= 1
        reg: gl.constexpr = acc.get_reg_layout()
        rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, reg))
        cols = off_n + gl.arange(0, BN, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))

    return multicast_mma


def replicated_mma_source(gl, blackwell):
    """``c = a @ b`` (one ``[BM, K] x [K, BN]`` tile per program) computed by every CTA of a cluster
    with one-CTA MMAs (``cta_group::1``) on operands every CTA holds whole (zero ``cga_layout``
    bases): with MULTICAST, CTA 0 loads each K-slice once for the cluster and every CTA's MMA
    commits to every CTA (``tcgen05_mma_barrier_count`` = ``num_ctas`` arrivals), so CTA 0
    refills only after every CTA's MMA has read the slice; rank 0 stores the result."""

    def replicated_mma(a_desc, b_desc, c_ptr, N, K, MULTICAST: gl.constexpr, CTA_BITS: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
        ready = blackwell.mbarrier.allocate_mbarrier()
        done = blackwell.mbarrier.allocate_mbarrier()
        blackwell.mbarrier.init(ready, count=1)
        commits: gl.constexpr = blackwell.tcgen05_mma_barrier_count([a_smem, b_smem], MULTICAST, False)
        blackwell.mbarrier.init(done, count=commits)
        tmem_layout: gl.constexpr = blackwell.TensorMemoryLayout((BM, BN), col_stride=1,
                                                                 cga_layout=[[0, 0]] * CTA_BITS)
        acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], tmem_layout)
        gl.barrier(cluster=True)
        off_m = gl.program_id(0) * BM
        off_n = gl.program_id(1) * BN
        phase = 0
        for k in range(0, K, BK):
            blackwell.mbarrier.expect(ready, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
            blackwell.tma.async_load(a_desc, [off_m, k], ready, a_smem, multicast=MULTICAST)
            blackwell.tma.async_load(b_desc, [k, off_n], ready, b_smem, multicast=MULTICAST)
            blackwell.mbarrier.wait(ready, phase)
            blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=k > 0, mbarriers=[done], multicast=MULTICAST)
            blackwell.mbarrier.wait(done, phase)
            phase ^= 1
        reg: gl.constexpr = acc.get_reg_layout()
        rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, reg))
        cols = off_n + gl.arange(0, BN, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))

    return replicated_mma


def pair_mma_scaled_source(gl, blackwell):
    """``c = (a * a_scale) @ (b * b_scale)ᵀ`` by one CTA pair with one ``tcgen05_mma_scaled`` (fp8, BM = 256).

    ``a`` is ``[BM, BK]`` and ``b`` ``[BN, BK]`` (K-major, passed permuted), each loaded by TMA split between the
    pair as in :func:`pair_mma_source`.  The UE8M0 scales ``a_scale`` ``[BM, BK/32]`` and ``b_scale`` ``[BN, BK/32]``
    (row-major in global memory) are stored from registers: A's by rows, each CTA its own
    (``cga_layout=[[1, 0]]``), B's whole in both CTAs (``[[0, 0]]``), the placement of Gluon 3.9's 2-CTA
    block-scaled example.  With B_SCALE_SPLIT B's scales are split by rows too (wrong for the hardware: an error).
    With SA_SMEM/SB_SMEM (``SharedLinearLayout``s: A's split by rows with ``block_bases=[[128, 0]]``, B's
    ``[[0, 0]]``) the scales go through shared memory and the pair's ``tcgen05_copy`` instead.
    """

    def pair_mma_scaled(a_desc, b_desc, sa_ptr, sb_ptr, c_ptr, B_SCALE_SPLIT: gl.constexpr, SA_SMEM: gl.constexpr,
                        SB_SMEM: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0]
        SK: gl.constexpr = BK // 32
        a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
        ready = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
        done = blackwell.mbarrier.allocate_mbarrier()
        blackwell.mbarrier.init(ready, count=1)
        blackwell.mbarrier.init(done, count=1)
        acc_layout: gl.constexpr = blackwell.TensorMemoryLayout((BM // 2, BN), col_stride=1, cga_layout=[[1, 0]],
                                                                two_ctas=True)
        acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
        a_scale_layout: gl.constexpr = blackwell.TensorMemoryScalesLayout(cga_layout=[[1, 0]])
        b_scale_layout: gl.constexpr = blackwell.TensorMemoryScalesLayout(
            cga_layout=[[1, 0]] if B_SCALE_SPLIT else [[0, 0]])
        a_scale = blackwell.allocate_tensor_memory(gl.uint8, [BM, SK], a_scale_layout)
        b_scale = blackwell.allocate_tensor_memory(gl.uint8, [BN, SK], b_scale_layout)
        sa_reg: gl.constexpr = a_scale.get_reg_layout()
        sa_offs = gl.arange(0, BM, gl.SliceLayout(1, sa_reg))[:, None] * SK + gl.arange(0, SK, gl.SliceLayout(0, sa_reg))[None, :]
        sb_reg: gl.constexpr = b_scale.get_reg_layout()
        sb_offs = gl.arange(0, BN, gl.SliceLayout(1, sb_reg))[:, None] * SK + gl.arange(0, SK, gl.SliceLayout(0, sb_reg))[None, :]
        if SA_SMEM is None:
            a_scale.store(gl.load(sa_ptr + sa_offs))
            b_scale.store(gl.load(sb_ptr + sb_offs))
        else:
            sa_smem = gl.allocate_shared_memory(gl.uint8, [BM, SK], SA_SMEM, gl.load(sa_ptr + sa_offs))
            sb_smem = gl.allocate_shared_memory(gl.uint8, [BN, SK], SB_SMEM, gl.load(sb_ptr + sb_offs))
        gl.barrier(cluster=True)  # both CTAs' barriers and scales are ready before the pair's MMA
        blackwell.mbarrier.expect(ready, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
        blackwell.tma.async_load(a_desc, [0, 0], ready, a_smem)
        blackwell.tma.async_load(b_desc, [0, 0], ready, b_smem)
        blackwell.mbarrier.wait(ready, 0)
        if SA_SMEM is not None:  # issued by the even CTA for the pair, ordered before its MMA
            blackwell.fence_async_shared()
            blackwell.tcgen05_copy(sa_smem, a_scale)
            blackwell.tcgen05_copy(sb_smem, b_scale)
        blackwell.tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc, a_scale, b_scale, "e4m3", "e4m3",
                                     use_acc=False, mbarriers=[done])
        blackwell.mbarrier.wait(done, 0)
        reg: gl.constexpr = acc.get_reg_layout()
        rows = gl.arange(0, BM, gl.SliceLayout(1, reg))
        cols = gl.arange(0, BN, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * BN + cols[None, :], acc.load(reg))

    return pair_mma_scaled


def multicast_mma_scaled_source(gl, blackwell):
    """``c = (a * a_scale) @ (b * b_scale)ᵀ`` (e4m3, UE8M0 scales, one K block of BK) by a cluster of CTA pairs.

    As :func:`multicast_mma_source` with ``tcgen05_mma_scaled``: the accumulator's ``ACC_CGA`` puts each pair on
    its part of the cluster's ``[BM, BN]`` tile, ``a`` ``[BM, BK]`` and ``b`` ``[BN, BK]`` (K-major, passed
    permuted) are loaded split the way the MMA reads them (an operand a CTA bit does not move is multicast to the
    CTAs that differ in it), and the scales are stored from registers in ``SA_CGA``/``SB_CGA`` (A's move with A's
    rows; B's are whole in both CTAs of a pair and move with the pair's columns).
    """

    def multicast_mma_scaled(a_desc, b_desc, sa_ptr, sb_ptr, c_ptr, N, ACC_CGA: gl.constexpr, TMEM_BN: gl.constexpr,
                             SA_CGA: gl.constexpr, SB_CGA: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[0]
        SK: gl.constexpr = BK // 32
        a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
        b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
        ready = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
        done = blackwell.mbarrier.allocate_mbarrier()
        blackwell.mbarrier.init(ready, count=1)
        blackwell.mbarrier.init(done, count=blackwell.tcgen05_mma_barrier_count([a_smem, b_smem], True, True))
        acc_layout: gl.constexpr = blackwell.TensorMemoryLayout((128, TMEM_BN), col_stride=1, cga_layout=ACC_CGA,
                                                                two_ctas=True)
        acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
        a_scale = blackwell.allocate_tensor_memory(gl.uint8, [BM, SK], blackwell.TensorMemoryScalesLayout(SA_CGA))
        b_scale = blackwell.allocate_tensor_memory(gl.uint8, [BN, SK], blackwell.TensorMemoryScalesLayout(SB_CGA))
        off_m = gl.program_id(0) * BM
        off_n = gl.program_id(1) * BN
        sa_reg: gl.constexpr = a_scale.get_reg_layout()
        sa_rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, sa_reg))
        a_scale.store(gl.load(sa_ptr + sa_rows[:, None] * SK + gl.arange(0, SK, gl.SliceLayout(0, sa_reg))[None, :]))
        sb_reg: gl.constexpr = b_scale.get_reg_layout()
        sb_rows = off_n + gl.arange(0, BN, gl.SliceLayout(1, sb_reg))
        b_scale.store(gl.load(sb_ptr + sb_rows[:, None] * SK + gl.arange(0, SK, gl.SliceLayout(0, sb_reg))[None, :]))
        gl.barrier(cluster=True)  # every CTA's barriers and scales are ready before any pair's MMA
        blackwell.mbarrier.expect(ready, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
        blackwell.tma.async_load(a_desc, [off_m, 0], ready, a_smem, multicast=True)
        blackwell.tma.async_load(b_desc, [off_n, 0], ready, b_smem, multicast=True)
        blackwell.mbarrier.wait(ready, 0)
        blackwell.tcgen05_mma_scaled(a_smem, b_smem.permute((1, 0)), acc, a_scale, b_scale, "e4m3", "e4m3",
                                     use_acc=False, multicast=True, mbarriers=[done])
        blackwell.mbarrier.wait(done, 0)
        reg: gl.constexpr = acc.get_reg_layout()
        rows = off_m + gl.arange(0, BM, gl.SliceLayout(1, reg))
        cols = off_n + gl.arange(0, BN, gl.SliceLayout(0, reg))
        gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))

    return multicast_mma_scaled
