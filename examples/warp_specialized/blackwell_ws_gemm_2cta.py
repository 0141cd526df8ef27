"""The warp-specialized Blackwell GEMM on CTA pairs: ``cta_group::2`` MMAs of 256-row tiles.

``C = act(A @ B)`` as ``blackwell_ws_gemm.py`` computes it (fp16/bf16, or fp8 e4m3/e5m2, in;
fp32 accumulation), but each program is a cluster of
two CTAs (``num_ctas=2``) that compute one ``256 x BN`` tile together: CTA ``r`` of the pair
loads rows ``128 r …`` of A's block and columns ``BN/2 r …`` of B's block (TMA with split
``cga_layout``: each CTA fetches only its share, so B's traffic per CTA halves), and the even
CTA issues one ``tcgen05.mma.cta_group::2`` that reads both CTAs' shares and writes each
CTA's 128 accumulator rows into that CTA's tensor memory.  Partitions, as in the one-CTA
version, in each CTA:

* the **loader** (one warp): per K-slice waits for ``empty[s]`` (its own CTA's), announces its
  share's bytes on ``ready[s]`` and loads its shares of A and B onto it.  ``ready`` is a
  *pair* barrier (``allocate_mbarrier(two_ctas=True)``): it lives in the even CTA, expects
  both CTAs' arrivals and bytes, and only the even CTA waits on it;
* the **MMA warp** (one warp): in the even CTA, per tile waits for ``acc_empty[b]`` (a pair
  barrier: both epilogues have read buffer ``b``), per K-slice for ``ready[s]``, issues the
  pair's MMA with ``mbarriers=[empty[s]]`` (the commit arrives on ``empty[s]`` in both CTAs,
  handing each loader its stage back) and after the tile commits to ``acc_ready[b]`` (both
  CTAs' again).  In the odd CTA the same code issues nothing and skips the pair barriers'
  waits, as on the GPU;
* the **epilogue** (the default partition, 4 warps): waits for its CTA's ``acc_ready[b]``,
  reads its 128 rows in ``EPILOGUE_SPLIT`` column slices, arrives on ``acc_empty[b]`` and
  stores the slices with TMA (C's block is split by rows too: each CTA writes its rows).

Optionally (``USE_CLC``) the tile loop is driven by Blackwell cluster launch control instead
of a static stride: launch one cluster per tile, and each pair keeps cancelling clusters that
have not started (``clc.try_cancel``) and computing their tiles.  Every partition needs the
tile ids, so the loader, which runs ahead, fetches them and hands them to the other
partitions through a small shared-memory ring (see ``docs/blackwell_gemm.rst``).

With ``CLUSTER_M = 2`` (``prepare(..., cluster_m=2)``) each program is a cluster of two pairs
(``num_ctas=4``) computing a ``512 x BN`` tile, pair 0 the upper rows and pair 1 the lower.
Both need the same B block, so B's layout replicates it across the pairs (``cga_layout`` ``[[0,
1], [0, 0]]``) and the loaders load it with ``multicast=True``: CTA 0 fetches its half for CTAs
0 and 2, CTA 1 its half for 1 and 3, and every CTA still expects its own shares' bytes.  Since
a loader now overwrites the stage in the other pair too, the MMA commits with
``multicast=True`` (to all four CTAs) and ``empty`` counts one commit per pair
(``tcgen05_mma_barrier_count``): a stage is refilled only after both pairs have read it
(``docs/blackwell_2cta.rst``, "Clusters of pairs: multicast").

Tensor memory: two accumulators of ``BN`` fp32 columns per CTA (``BN = 256``: all 512).

Run: ``python examples/warp_specialized/blackwell_ws_gemm_2cta.py`` (the interpreter: no
Blackwell GPU here; it runs both CTAs of each pair and their partitions together).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, clc, fence_async_shared,
                                                mbarrier, tcgen05_commit, tcgen05_mma, tcgen05_mma_barrier_count, tma)
from gluonkit.nvidia.blackwell import TensorDescriptor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "persistent_gemm")]

from persistent_gemm import default_num_programs, element_dtype, grouped_tile  # noqa: E402

#: Tile ids handed from the loader to the other partitions (USE_CLC): ring slots.
TILE_SLOTS = gl.constexpr(2)


@gluonkit.jit
def _tile_of(t, tiles_slot, tile_ready, tile_empty, USE_CLC: gl.constexpr, CONSUMERS: gl.constexpr):
    """The program-order ``t``-th tile of this pair, or -1 after the last (a consumer's view).

    Statically strided without CLC; with CLC read from slot ``t % TILE_SLOTS`` of the ring the
    loader fills, then released (one of ``CONSUMERS`` arrivals on ``tile_empty``)."""
    if USE_CLC:
        slot = t % TILE_SLOTS
        mbarrier.wait(tile_ready.index(slot), (t // TILE_SLOTS) & 1)
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        tile = gl.max(tiles_slot.index(slot).load(layout), axis=0)
        gl.thread_barrier()
        mbarrier.arrive(tile_empty.index(slot))
        return tile
    else:
        return gl.program_id(0) + t * gl.num_programs(0)


@gluonkit.jit
def _loader(a_desc, b_desc, a_smem, b_smem, ready, empty, tiles_slot, tile_ready, tile_empty, clc_result, clc_bar,
            M, N, K, GROUP_M: gl.constexpr, STAGES: gl.constexpr, USE_CLC: gl.constexpr, CLUSTER_M: gl.constexpr):
    """Each CTA loads its shares of every K-slice of the cluster's tiles onto its pair's barrier
    (with several pairs, B's share once per pair position, multicast to the same CTA of every pair)."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    tile = gl.program_id(0)
    t = 0
    while tile < num_pid_m * num_pid_n:
        if USE_CLC:  # publish this tile's id to the MMA warp and the epilogue
            slot = t % TILE_SLOTS
            mbarrier.wait(tile_empty.index(slot), ((t // TILE_SLOTS) & 1) ^ 1)
            layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
            tiles_slot.index(slot).store(gl.full([32], tile, gl.int32, layout))
            mbarrier.arrive(tile_ready.index(slot))
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(empty.index(stage), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
            tma.async_load(a_desc, [pid_m * BM, k * BK], ready.index(stage), a_smem.index(stage))
            tma.async_load(b_desc, [k * BK, pid_n * BN], ready.index(stage), b_smem.index(stage),
                           multicast=CLUSTER_M > 1)
        t += 1
        if USE_CLC:
            mbarrier.expect(clc_bar, 16)
            clc.try_cancel(clc_result, clc_bar)
            mbarrier.wait(clc_bar, (t - 1) & 1)
            result = clc.load_result(clc_result)
            tile = gl.where(result.is_canceled(), result.program_id(0), num_pid_m * num_pid_n)
        else:
            tile += gl.num_programs(0)
    if USE_CLC:  # tell the consumers there is no further tile
        slot = t % TILE_SLOTS
        mbarrier.wait(tile_empty.index(slot), ((t // TILE_SLOTS) & 1) ^ 1)
        layout2: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
        tiles_slot.index(slot).store(gl.full([32], -1, gl.int32, layout2))
        mbarrier.arrive(tile_ready.index(slot))


@gluonkit.jit
def _mma_warp(a_smem, b_smem, accs, ready, empty, acc_ready, acc_empty, tiles_slot, tile_ready, tile_empty,
              M, N, K, STAGES: gl.constexpr, USE_CLC: gl.constexpr, CLUSTER_M: gl.constexpr):
    """Issue the pair's MMAs (the even CTA; the odd CTA's copy of this code issues nothing).  With
    several pairs the stage's commit is multicast to every CTA that shares B with the pair."""
    BM: gl.constexpr = a_smem.shape[1]
    BK: gl.constexpr = a_smem.shape[2]
    BN: gl.constexpr = b_smem.shape[2]
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    t = 0
    tile = _tile_of(t, tiles_slot, tile_ready, tile_empty, USE_CLC, 2)
    while (tile >= 0) & (tile < tiles):
        buf = t % 2
        mbarrier.wait(acc_empty.index(buf), ((t // 2) & 1) ^ 1)
        acc = accs.index(buf)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            tcgen05_mma(a_smem.index(stage), b_smem.index(stage), acc, use_acc=k > 0,
                        mbarriers=[empty.index(stage)], multicast=CLUSTER_M > 1)
        tcgen05_commit(acc_ready.index(buf))
        t += 1
        tile = _tile_of(t, tiles_slot, tile_ready, tile_empty, USE_CLC, 2)


@gluonkit.jit
def _epilogue(accs, c_smem, c_desc, acc_ready, acc_empty, tiles_slot, tile_ready, tile_empty, M, N,
              GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr, ACTIVATION: gl.constexpr, USE_CLC: gl.constexpr):
    """Drain this CTA's rows of each tile: TMEM -> registers -> shared -> TMA store, slice by slice."""
    BM: gl.constexpr = accs.shape[1]
    BN: gl.constexpr = accs.shape[2]
    EPI_N: gl.constexpr = BN // EPILOGUE_SPLIT
    reg_layout: gl.constexpr = accs.index(0).slice(0, EPI_N).get_reg_layout()
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    t = 0
    tile = _tile_of(t, tiles_slot, tile_ready, tile_empty, USE_CLC, 2)
    while (tile >= 0) & (tile < num_pid_m * num_pid_n):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        buf = t % 2
        mbarrier.wait(acc_ready.index(buf), (t // 2) & 1)
        for j in gl.static_range(EPILOGUE_SPLIT):
            out = accs.index(buf).slice(j * EPI_N, EPI_N).load(reg_layout)
            if j == EPILOGUE_SPLIT - 1:
                gl.thread_barrier()  # every warp has read this CTA's rows: one of the pair's two arrivals
                mbarrier.arrive(acc_empty.index(buf))
            if ACTIVATION is not None:
                out = ACTIVATION(out)
            tma.store_wait(0)
            c_smem.store(out.to(c_desc.dtype))
            fence_async_shared()
            tma.async_store(c_desc, [pid_m * BM, pid_n * BN + j * EPI_N], c_smem)
        t += 1
        tile = _tile_of(t, tiles_slot, tile_ready, tile_empty, USE_CLC, 2)
    tma.store_wait(0)


@gluonkit.jit
def blackwell_ws_gemm_2cta_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                                  EPILOGUE_SPLIT: gl.constexpr, ACTIVATION: gl.constexpr, USE_CLC: gl.constexpr,
                                  CLUSTER_M: gl.constexpr = 1):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    gl.static_assert(BM == 256 * CLUSTER_M, "each CTA pair computes 256 rows of the tile (128 rows per CTA)")
    gl.static_assert(c_desc.block_type.shape[1] * EPILOGUE_SPLIT == BN,
                     "C's block must be BM x (BN // EPILOGUE_SPLIT)")
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)  # both CTAs' loads, in the even CTA
    empty = mbarrier.allocate_mbarrier(batch=STAGES)                 # each CTA's, from the pair's commit
    acc_ready = mbarrier.allocate_mbarrier(batch=2)                  # each CTA's, from the pair's commit
    acc_empty = mbarrier.allocate_mbarrier(batch=2, two_ctas=True)   # both epilogues, in the even CTA
    tile_ready = mbarrier.allocate_mbarrier(batch=TILE_SLOTS)        # CLC tile ids, loader -> consumers
    tile_empty = mbarrier.allocate_mbarrier(batch=TILE_SLOTS)
    clc_bar = mbarrier.allocate_mbarrier()
    ids_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    tiles_slot = gl.allocate_shared_memory(gl.int32, [TILE_SLOTS, 32], ids_layout)
    clc_result = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    # A stage is free once every MMA reading it is done: with B multicast, both pairs' (their commits reach
    # every CTA that shares B), so each CTA's empty barrier counts one commit per pair.
    empty_count: gl.constexpr = tcgen05_mma_barrier_count([a_smem, b_smem], CLUSTER_M > 1, True)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=empty_count)
    for b in gl.static_range(2):
        mbarrier.init(acc_ready.index(b), count=1)
        mbarrier.init(acc_empty.index(b), count=1)
    for s in gl.static_range(TILE_SLOTS):
        mbarrier.init(tile_ready.index(s), count=1)
        mbarrier.init(tile_empty.index(s), count=2)  # the MMA warp and the epilogue
    mbarrier.init(clc_bar, count=1)
    pairs: gl.constexpr = [[1, 0], [2, 0]] if CLUSTER_M == 2 else [[1, 0]]  # CTA bit 1: the second pair, below
    pair: gl.constexpr = TensorMemoryLayout([128, BN], col_stride=1, cga_layout=pairs, two_ctas=True)
    accs = allocate_tensor_memory(gl.float32, [2, BM, BN], pair)
    fence_async_shared()
    gl.barrier(cluster=True)  # every barrier of both CTAs is initialized before the other CTA arrives on it
    gl.warp_specialize([
        (_epilogue, (accs, c_smem, c_desc, acc_ready, acc_empty, tiles_slot, tile_ready, tile_empty, M, N, GROUP_M,
                     EPILOGUE_SPLIT, ACTIVATION, USE_CLC)),
        (_loader, (a_desc, b_desc, a_smem, b_smem, ready, empty, tiles_slot, tile_ready, tile_empty, clc_result,
                   clc_bar, M, N, K, GROUP_M, STAGES, USE_CLC, CLUSTER_M)),
        (_mma_warp, (a_smem, b_smem, accs, ready, empty, acc_ready, acc_empty, tiles_slot, tile_ready, tile_empty,
                     M, N, K, STAGES, USE_CLC, CLUSTER_M)),
    ], [1, 1], [24, 24])


def cluster_layouts(BN: int, BK: int, EPILOGUE_SPLIT: int, in_dtype, out_dtype, cluster_m: int = 1):
    """A's, B's and C's block shapes and shared layouts for a cluster of ``cluster_m`` pairs stacked
    along M: A and C split by rows over all CTAs, B by columns over each pair and (a zero basis)
    the same in every pair, which is what lets the loaders multicast it."""
    nvmma = gl.NVMMASharedLayout.get_default_for
    rows = [[1, 0], [2, 0]][:cluster_m]  # CTA bit 0: the pair's halves; bit 1: the second pair
    a_block, b_block, c_block = [256 * cluster_m, BK], [BK, BN], [256 * cluster_m, BN // EPILOGUE_SPLIT]
    return ((a_block, nvmma(a_block, in_dtype, cga_layout=rows)),
            (b_block, nvmma(b_block, in_dtype, cga_layout=[[0, 1], [0, 0]][:cluster_m])),
            (c_block, nvmma(c_block, out_dtype, cga_layout=rows)))


def prepare(a, b, c, BN: int = 256, BK: int = 64, STAGES: int = 3, GROUP_M: int = 16, EPILOGUE_SPLIT: int = 4,
            activation=None, num_programs: int = None, use_clc: bool = False, cluster_m: int = 1):
    """A function of no arguments that computes ``c = activation(a @ b)`` (one launch per call).

    ``num_programs`` counts clusters; with ``use_clc`` one cluster per tile is launched and running
    clusters take over the tiles of clusters that have not started.  ``cluster_m=2``: clusters of
    two pairs (``num_ctas=4``) computing ``512 x BN`` tiles, B multicast to both pairs."""
    M, K = a.shape
    N = b.shape[1]
    BM = 256 * cluster_m
    (a_block, a_layout), (b_block, b_layout), (c_block, c_layout) = cluster_layouts(
        BN, BK, EPILOGUE_SPLIT, element_dtype(a), element_dtype(c), cluster_m)
    a_desc = TensorDescriptor.from_tensor(a, a_block, a_layout)
    b_desc = TensorDescriptor.from_tensor(b, b_block, b_layout)
    c_desc = TensorDescriptor.from_tensor(c, c_block, c_layout)
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    num_ctas = 2 * cluster_m
    programs = tiles if use_clc else min(tiles, num_programs or max(1, default_num_programs() // num_ctas))
    launch = blackwell_ws_gemm_2cta_kernel[(programs,)]

    def run():
        launch(a_desc, b_desc, c_desc, M, N, K, STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT,
               ACTIVATION=activation, USE_CLC=use_clc, CLUSTER_M=cluster_m, num_warps=4, num_ctas=num_ctas)
        return c
    return run


def gemm(a, b, c, **config):
    """``c = activation(a @ b)``; ``config`` as for :func:`prepare`."""
    return prepare(a, b, c, **config)()


def main() -> None:
    os.environ["GLUONKIT_INTERPRET"] = "1"  # no Blackwell GPU to run on: the interpreter checks the protocol
    M, N, K = 300, 136, 96
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for use_clc, cluster_m in ((False, 1), (True, 1), (False, 2)):
        c = np.full((M, N), np.nan, np.float32)
        gemm(a, b, c, BN=64, BK=32, STAGES=3, EPILOGUE_SPLIT=2, num_programs=2, use_clc=use_clc, cluster_m=cluster_m)
        err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
        print(f"blackwell_ws_gemm_2cta (clc={use_clc}, {cluster_m} pair(s) per cluster): {M}x{N}x{K} fp16 -> fp32 "
              f"in the interpreter, relative error {err:.2e}")
        assert err < 1e-6, err


if __name__ == "__main__":
    main()
