"""A warp-specialized persistent Hopper GEMM: one TMA producer warp feeds two consumer warpgroups.

``C = A @ B`` with A ``M × K`` and B ``K × N`` (row-major, fp16 or bf16), fp32 accumulation,
C in fp16, bf16 or fp32.  As in ``examples/persistent_gemm/persistent_gemm.py``, the grid is
the number of SMs and program ``p`` takes the tiles ``p, p + grid, …`` of the grouped raster
order; what differs is who does what inside a program.  ``gl.warp_specialize`` splits it:

* the **producer** (one worker warp, 24 registers per thread) walks the program's
  ``(tile, k-slice)`` steps and, for each, waits until its stage of the shared-memory ring is
  free (``empty[s]``), announces the bytes (``expect`` on ``ready[s]``) and issues the two TMA
  loads.  It never waits for an MMA, so it runs ``STAGES`` slices ahead, across tile
  boundaries: the next tile's first slices land while the consumers run this tile's epilogue;
* the **consumers** (the default partition: the kernel's 8 warps, two warpgroups, whose
  register budget ``setmaxnreg`` raises to what the producer gave up) cooperate on one
  ``BM × BN`` tile, each warpgroup on ``BM / 2`` rows.  Each step waits for ``ready[s]``, issues
  an asynchronous ``warpgroup_mma`` and waits until only that one is in flight; the previous
  step's MMA has then retired in both warpgroups (``gl.thread_barrier()``: a named barrier over
  the consumers' 256 threads), so its stage is handed back with one arrive on ``empty``.  After
  the last slice the tile goes out through shared memory and a TMA store, which runs while the
  next tile's MMAs start.

Phases: the steps are numbered ``0, 1, …`` across tiles in both partitions, step ``i`` uses stage
``i % STAGES`` in lap ``i // STAGES``; the consumers wait for parity ``lap & 1`` of ``ready``, the
producer for parity ``(lap & 1) ^ 1`` of ``empty`` (a fresh barrier's previous phase counts as
complete, so the first lap does not wait).

**Ping-pong** (``PINGPONG=True``, ``ws_gemm_pingpong_kernel``): the two consumer warpgroups
are separate partitions (the kernel's 4 warps and a 4-warp worker) on alternate tiles of the
program, 128 × 128 each, sharing the producer's ring.  Two ``turn`` mbarriers make their K
loops alternate (a consumer waits for its turn before its first MMA and hands it over after
its last), so one warpgroup's epilogue runs under the other's MMAs.  ``choose_config`` picks
the variant per shape.

**Split-K** (``SPLIT_K``, ``SPLIT_TILES``): the last tiles of the raster order can be split
along K into work units that fill a half-empty last wave; their fp32 partials go to a
workspace and ``splitk_reduce_kernel`` sums them into C.  Programs walk *work units* (a
whole tile or a K-range of one), numbered so that both partitions compute every unit's
first ring step without communicating (``work_unit``).

Ragged M, N and K are handled by TMA: loads zero-fill outside the tensors and stores clip.

Run: ``python examples/warp_specialized/ws_gemm.py`` (GPU if present, else the CPU
interpreter at a small ragged size, which also explores interleavings of the partitions).
"""

import json
import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import cluster, fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.ir import TensorDescType
from gluonkit.nvidia.arrays import address_of, element_strides
from gluonkit.nvidia.hopper import TensorDescriptor
from gluonkit.runtime.bench import do_bench
from gluonkit.runtime.cache import KernelCache, cache_key, toolchain_versions
from gluonkit.runtime.driver import device_properties
from gluonkit.runtime.launch import bind

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "persistent_gemm"))

from persistent_gemm import default_num_programs, element_dtype, gemm_layouts, grouped_tile, store_tile  # noqa: E402

with open(__file__, encoding="utf-8") as _file:
    _SOURCE = _file.read()  # part of tune()'s disk-cache key: an edited kernel is timed afresh


@gluonkit.jit
def work_unit(i, split_from, num_pid_m, num_pid_n, k_tiles, GROUP_M: gl.constexpr, SPLIT_K: gl.constexpr):
    """The program's ``i``-th work unit: ``(pid_m, pid_n, first k-slice, k-slices, first step, slot)``.

    Units ``0 … split_from - 1`` are whole tiles; each tile from ``split_from`` on is
    ``SPLIT_K`` units of ``cdiv(k_tiles, SPLIT_K)`` slices (slices past K load as zeros).  The
    program takes units ``program_id, program_id + grid, …``; ``first step`` numbers its ring
    steps across units (both partitions compute it alike) and ``slot`` is the unit's partial
    buffer in the workspace (negative for a whole tile).
    """
    u = gl.program_id(0) + i * gl.num_programs(0)
    if SPLIT_K == 1:
        tile = u
        k_first = 0
        k_count = k_tiles
        first_step = i * k_tiles
        slot = -1
    else:
        per_split = gl.cdiv(k_tiles, SPLIT_K)
        whole = gl.minimum(i, gl.cdiv(split_from - gl.program_id(0), gl.num_programs(0)))  # whole tiles before
        first_step = whole * k_tiles + (i - whole) * per_split
        slot = u - split_from
        if slot < 0:
            tile = u
            k_first = 0
            k_count = k_tiles
        else:
            tile = split_from + slot // SPLIT_K
            k_first = (slot % SPLIT_K) * per_split
            k_count = per_split
    pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
    return pid_m, pid_n, k_first, k_count, first_step, slot


@gluonkit.jit
def unit_count(M, N, split_from, BM: gl.constexpr, BN: gl.constexpr, SPLIT_K: gl.constexpr):
    """How many work units this program takes (see :func:`work_unit`)."""
    tiles = gl.cdiv(M, BM) * gl.cdiv(N, BN)
    units = split_from + (tiles - split_from) * SPLIT_K
    return gl.cdiv(units - gl.program_id(0), gl.num_programs(0))


@gluonkit.jit
def finish_unit(acc, c_desc, c_smem, ws_ptr, slot, pid_m, pid_n, EPILOGUE_SPLIT: gl.constexpr,
                SPLIT_K: gl.constexpr):
    """The epilogue: a whole tile goes to C (TMA store), a split unit's fp32 partial to its workspace slot."""
    BM: gl.constexpr = acc.shape[0]
    BN: gl.constexpr = acc.shape[1]
    if SPLIT_K == 1:
        store_tile(c_desc, c_smem, acc.to(c_desc.dtype), pid_m * BM, pid_n * BN, EPILOGUE_SPLIT)
    else:
        if slot < 0:
            store_tile(c_desc, c_smem, acc.to(c_desc.dtype), pid_m * BM, pid_n * BN, EPILOGUE_SPLIT)
        else:
            rows = slot * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, acc.type.layout))
            cols = gl.arange(0, BN, layout=gl.SliceLayout(0, acc.type.layout))
            gl.store(ws_ptr + rows[:, None] * BN + cols[None, :], acc)


@gluonkit.jit
def splitk_reduce_kernel(ws_ptr, c_ptr, M, N, stride_cm, split_from, GROUP_M: gl.constexpr,
                         SPLIT_K: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, ROWS: gl.constexpr,
                         layout: gl.constexpr):
    """C for the split tiles: program ``(i, r)`` sums the ``SPLIT_K`` fp32 partials of rows
    ``r·ROWS …`` of split tile ``i`` and writes them to C in its dtype (masked at ragged edges)."""
    i = gl.program_id(0)
    pid_m, pid_n = grouped_tile(split_from + i, gl.cdiv(M, BM), gl.cdiv(N, BN), GROUP_M)
    rows = gl.program_id(1) * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    acc = gl.zeros([ROWS, BN], gl.float32, layout)
    for s in gl.static_range(SPLIT_K):
        acc += gl.load(ws_ptr + ((i * SPLIT_K + s) * BM + rows)[:, None] * BN + cols[None, :])
    m = pid_m * BM + rows
    n = pid_n * BN + cols
    mask = (m < M)[:, None] & (n < N)[None, :]
    gl.store(c_ptr + m[:, None] * stride_cm + n[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


@gluonkit.jit
def _b_operand(b_stage, B_KMAJOR: gl.constexpr):
    """B's ``[BK, BN]`` wgmma operand: the stage itself, or its ``[BN, BK]`` (K-major) block transposed."""
    if B_KMAJOR:
        return b_stage.permute((1, 0))
    return b_stage


@gluonkit.jit
def _load_scale(scale_a, scale_b):
    """The epilogue's factor ``scale_a[0] * scale_b[0]`` (fp32 device scalars), or ``None`` without scales."""
    if scale_a is None:
        return None
    return gl.load(scale_a) * gl.load(scale_b)


@gluonkit.jit
def _scaled(acc, scale):
    """``acc * scale``, or ``acc`` when there is no scale."""
    if scale is None:
        return acc
    return acc * scale


@gluonkit.jit
def _producer(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, split_from, GROUP_M: gl.constexpr,
              STAGES: gl.constexpr, SPLIT_K: gl.constexpr, B_KMAJOR: gl.constexpr, released=None):
    """The TMA partition: fill the ring, slice after slice, as fast as the consumers free stages.

    B's blocks are ``[BK, BN]``, or ``[BN, BK]`` slices of an ``[N, K]`` B with ``B_KMAJOR``.
    In a 2-CTA cluster (``released``: pair barriers) each CTA loads its rows of A's block and
    CTA 0 multicasts B's block to both, once both CTAs' consumers released the stage."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0] if B_KMAJOR else b_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    for i in range(unit_count(M, N, split_from, BM, BN, SPLIT_K)):
        pid_m, pid_n, k_first, k_count, first_step, slot = work_unit(i, split_from, num_pid_m, num_pid_n, k_tiles,
                                                                     GROUP_M, SPLIT_K)
        for k in range(k_count):
            step = first_step + k
            stage = step % STAGES
            mbarrier.wait(empty.index(stage), ((step // STAGES) & 1) ^ 1)
            if released is not None:  # the other CTA's consumers too (only CTA 0 waits: it multicasts B)
                mbarrier.wait(released.index(stage), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
            tma.async_load(a_desc, [pid_m * BM, (k_first + k) * BK], ready.index(stage), a_smem.index(stage))
            if B_KMAJOR:
                tma.async_load(b_desc, [pid_n * BN, (k_first + k) * BK], ready.index(stage), b_smem.index(stage),
                               multicast=released is not None)
            else:
                tma.async_load(b_desc, [(k_first + k) * BK, pid_n * BN], ready.index(stage), b_smem.index(stage),
                               multicast=released is not None)


@gluonkit.jit
def _mma_unit(a_smem, b_smem, ready, empty, first_step, k_count, STAGES: gl.constexpr, acc_layout: gl.constexpr,
              B_KMAJOR: gl.constexpr, released=None):
    """One work unit's K loop in the consumers: wgmma over the ring, each stage handed back once read."""
    BM: gl.constexpr = a_smem.shape[1]
    BN: gl.constexpr = b_smem.shape[1] if B_KMAJOR else b_smem.shape[2]
    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    for k in range(k_count):
        step = first_step + k
        stage = step % STAGES
        mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
        acc = warpgroup_mma(a_smem.index(stage), _b_operand(b_smem.index(stage), B_KMAJOR), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
        gl.thread_barrier()  # the previous step's MMA has retired in every consumer warpgroup
        _release(empty, released, (step + STAGES - 1) % STAGES, k > 0)
    return acc


@gluonkit.jit
def _release(empty, released, stage, pred=True):
    """Hand ``stage`` back to this CTA's producer and, in a 2-CTA cluster, to CTA 0's
    (``released``: a pair barrier in CTA 0 that both CTAs' consumers arrive on)."""
    mbarrier.arrive(empty.index(stage), pred=pred)
    if released is not None:
        mbarrier.arrive(released.index(stage), pred=pred)


@gluonkit.jit
def _consumer(a_smem, b_smem, c_smem, ready, empty, c_desc, ws_ptr, M, N, K, split_from, GROUP_M: gl.constexpr,
              STAGES: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr, SPLIT_K: gl.constexpr,
              B_KMAJOR: gl.constexpr, scale_a, scale_b, released=None):
    """The MMA partition: wgmma over the ring, hand each stage back once read, TMA-store each tile
    (times ``scale_a[0] * scale_b[0]`` unless the scale pointers are ``None``)."""
    scale = _load_scale(scale_a, scale_b)
    BM: gl.constexpr = a_smem.shape[1]
    BK: gl.constexpr = a_smem.shape[2]
    BN: gl.constexpr = c_desc.block_type.shape[1] * EPILOGUE_SPLIT
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    for i in range(unit_count(M, N, split_from, BM, BN, SPLIT_K)):
        pid_m, pid_n, k_first, k_count, first_step, slot = work_unit(i, split_from, num_pid_m, num_pid_n, k_tiles,
                                                                     GROUP_M, SPLIT_K)
        acc = _mma_unit(a_smem, b_smem, ready, empty, first_step, k_count, STAGES, acc_layout, B_KMAJOR, released)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        gl.thread_barrier()
        _release(empty, released, (first_step + k_count - 1) % STAGES)
        finish_unit(_scaled(acc, scale), c_desc, c_smem, ws_ptr, slot, pid_m, pid_n, EPILOGUE_SPLIT, SPLIT_K)
    tma.store_wait(0)


@gluonkit.jit
def ws_gemm_kernel(a_desc, b_desc, c_desc, ws_ptr, M, N, K, split_from, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                   EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                   SPLIT_K: gl.constexpr = 1, B_KMAJOR: gl.constexpr = False, scale_a=None, scale_b=None):
    """Cooperative: the kernel's 8 warps (two warpgroups) share each unit.  ``B_KMAJOR``: B is
    ``[N, K]`` (fp8); ``scale_a``/``scale_b``: fp32 scalars that multiply C (see ws_gemm_fp8.py)."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0] if B_KMAJOR else b_desc.block_type.shape[1]
    gl.static_assert(EPILOGUE_SPLIT == 1 or EPILOGUE_SPLIT == 2, "EPILOGUE_SPLIT must be 1 or 2")
    gl.static_assert(c_desc.block_type.shape[1] * EPILOGUE_SPLIT == BN,
                     "C's block must be BM x (BN // EPILOGUE_SPLIT)")
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, b_desc.block_type.shape[0], b_desc.block_type.shape[1]],
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    released = _pair_barriers(STAGES)
    fence_async_shared()
    _cluster_start(released)
    gl.warp_specialize([
        (_consumer, (a_smem, b_smem, c_smem, ready, empty, c_desc, ws_ptr, M, N, K, split_from, GROUP_M, STAGES,
                     EPILOGUE_SPLIT, acc_layout, SPLIT_K, B_KMAJOR, scale_a, scale_b, released)),
        (_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, split_from, GROUP_M, STAGES, SPLIT_K,
                     B_KMAJOR, released)),
    ], [1], [PRODUCER_REGS])
    _cluster_end(released, STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


@gluonkit.jit
def _pair_barriers(STAGES: gl.constexpr):
    """In a 2-CTA cluster, ``STAGES`` initialized pair barriers (in CTA 0, arrived on by both
    CTAs' consumers: CTA 0 multicasts B into both CTAs' stage); ``None`` with one CTA."""
    if gl.num_ctas() == 1:
        return None
    gl.static_assert(gl.num_ctas() == 2, "the multicast WS GEMM runs on clusters of 2 CTAs")
    released = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)
    for s in gl.static_range(STAGES):
        mbarrier.init(released.index(s), count=1)
    return released


@gluonkit.jit
def _cluster_start(released):
    """In a cluster: every CTA's barriers are initialized (and fenced) before the other CTA
    arrives on them or CTA 0 multicasts onto them."""
    if released is not None:
        cluster.barrier()


@gluonkit.jit
def _cluster_end(released, STAGES: gl.constexpr):
    """In a cluster: the other CTA's last arrivals on our barriers have landed; then the pair
    barriers go."""
    if released is not None:
        cluster.barrier()
        for s in gl.static_range(STAGES):
            mbarrier.invalidate(released.index(s))


@gluonkit.jit
def _pingpong_consumer(a_smem, b_smem, c_smem, ready, empty, turn, c_desc, ws_ptr, M, N, K, split_from,
                       GROUP_M: gl.constexpr, STAGES: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr,
                       acc_layout: gl.constexpr, WHICH: gl.constexpr, SPLIT_K: gl.constexpr, B_KMAJOR: gl.constexpr,
                       scale_a, scale_b, released=None):
    """One ping-pong consumer warpgroup: the program's units ``WHICH, WHICH + 2, …``, MMAs in turns."""
    scale = _load_scale(scale_a, scale_b)
    BM: gl.constexpr = a_smem.shape[1]
    BK: gl.constexpr = a_smem.shape[2]
    BN: gl.constexpr = c_desc.block_type.shape[1] * EPILOGUE_SPLIT
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    for j in range((unit_count(M, N, split_from, BM, BN, SPLIT_K) - WHICH + 1) // 2):
        pid_m, pid_n, k_first, k_count, first_step, slot = work_unit(2 * j + WHICH, split_from, num_pid_m, num_pid_n,
                                                                     k_tiles, GROUP_M, SPLIT_K)
        # Our turn: the other warpgroup has issued all MMAs of its unit (the previous one).
        mbarrier.wait(turn.index(WHICH), (j & 1) ^ (1 - WHICH))
        acc = _mma_unit(a_smem, b_smem, ready, empty, first_step, k_count, STAGES, acc_layout, B_KMAJOR, released)
        mbarrier.arrive(turn.index(1 - WHICH))  # the other warpgroup's MMAs may start under our epilogue
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        gl.thread_barrier()
        _release(empty, released, (first_step + k_count - 1) % STAGES)
        finish_unit(_scaled(acc, scale), c_desc, c_smem.index(WHICH), ws_ptr, slot, pid_m, pid_n, EPILOGUE_SPLIT,
                    SPLIT_K)
    tma.store_wait(0)


@gluonkit.jit
def ws_gemm_pingpong_kernel(a_desc, b_desc, c_desc, ws_ptr, M, N, K, split_from, STAGES: gl.constexpr,
                            GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr,
                            PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, SPLIT_K: gl.constexpr = 1,
                            B_KMAJOR: gl.constexpr = False, scale_a=None, scale_b=None):
    """Ping-pong: two one-warpgroup consumers (the kernel's 4 warps and a 4-warp worker) on
    alternate units; ``turn`` mbarriers make their main loops take turns, so one's epilogue
    runs under the other's MMAs."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0] if B_KMAJOR else b_desc.block_type.shape[1]
    gl.static_assert(EPILOGUE_SPLIT == 1 or EPILOGUE_SPLIT == 2, "EPILOGUE_SPLIT must be 1 or 2")
    gl.static_assert(c_desc.block_type.shape[1] * EPILOGUE_SPLIT == BN,
                     "C's block must be BM x (BN // EPILOGUE_SPLIT)")
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, b_desc.block_type.shape[0], b_desc.block_type.shape[1]],
                                       b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [2, BM, c_desc.block_type.shape[1]], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    released = _pair_barriers(STAGES)
    fence_async_shared()
    _cluster_start(released)
    gl.warp_specialize([
        (_pingpong_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, ws_ptr, M, N, K, split_from,
                              GROUP_M, STAGES, EPILOGUE_SPLIT, acc_layout, 0, SPLIT_K, B_KMAJOR, scale_a, scale_b,
                              released)),
        (_pingpong_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, ws_ptr, M, N, K, split_from,
                              GROUP_M, STAGES, EPILOGUE_SPLIT, acc_layout, 1, SPLIT_K, B_KMAJOR, scale_a, scale_b,
                              released)),
        (_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, split_from, GROUP_M, STAGES, SPLIT_K,
                     B_KMAJOR, released)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    _cluster_end(released, STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    mbarrier.invalidate(turn.index(0))
    mbarrier.invalidate(turn.index(1))


MIN_SLICES_PER_SPLIT = 4  # K-slices a split unit runs at least: fewer leave its ring fill and epilogue exposed
PINGPONG_WAVES = 24  # waves of 128 x 128 tiles from which ping-pong beats cooperative at deep K


def _split_for(tiles: int, programs: int, k_tiles: int):
    """``(SPLIT_K, SPLIT_TILES)`` that fill the GPU's last wave of tiles, or ``(1, None)``.

    After at least one full wave, a last wave at most half full has its tiles split along K
    so that the split units fill the programs; every split keeps at least
    ``MIN_SLICES_PER_SPLIT`` K-slices and the splits of a tile are at most 8.  (Splitting a
    single, narrow wave measured slower than ping-pong on the H100: the partials' round
    trip and the reduction launch cost more than the idle SMs.)
    """
    tail = tiles % programs
    if tiles < programs or tail == 0 or tail > programs // 2:
        return 1, None
    split = min(programs // tail, 8, k_tiles // MIN_SLICES_PER_SPLIT)
    if split < 2:
        return 1, None
    return split, tail


def _variant(kind: str, out_bytes: int) -> dict:
    """``"pingpong"`` 128 × 128 (``GROUP_M=8``), ``"coop"`` 128 × 256 (``GROUP_M=16``) or
    ``"tall"`` 256 × 128 cooperative (``GROUP_M=4``: 2–7% faster than 16 on the H100 on the
    odd-stride shapes it serves), with as many stages (at most 6) as fit in 227 KB beside C's
    half-tile buffer(s)."""
    pingpong = kind == "pingpong"
    BM, BN = {"pingpong": (128, 128), "coop": (128, 256), "tall": (256, 128)}[kind]
    stage_bytes = (BM * 64 + 64 * BN) * 2
    c_bytes = (2 if pingpong else 1) * BM * (BN // 2) * out_bytes
    stages = min(6, (232448 - 1024 - c_bytes) // stage_bytes)
    return dict(BM=BM, BN=BN, BK=64, STAGES=stages, EPILOGUE_SPLIT=2, PINGPONG=pingpong,
                GROUP_M={"pingpong": 8, "coop": 16, "tall": 4}[kind])


def _with_tail_split(config: dict, M: int, N: int, K: int, sm_count: int) -> dict:
    """``config`` with its last wave split along K where :func:`_split_for` says so."""
    tiles = gluonkit.cdiv(M, config["BM"]) * gluonkit.cdiv(N, config["BN"])
    split, split_tiles = _split_for(tiles, sm_count, gluonkit.cdiv(K, config["BK"]))
    return dict(config, SPLIT_K=split, SPLIT_TILES=split_tiles) if split > 1 else config


def shallow_or_narrow(M: int, N: int, K: int, sm_count: int) -> bool:
    """Whether ping-pong wins whatever the element type: a shallow K loop (K ≤ 1024, where the
    epilogue it hides is a large share) or 128 × 256 tiles that would fill at most half the SMs
    (measured for bf16 and fp8; :func:`choose_config` and ``ws_gemm_fp8.choose_config``)."""
    return K <= 1024 or 2 * gluonkit.cdiv(M, 128) * gluonkit.cdiv(N, 256) <= sm_count


def choose_config(M: int, N: int, K: int, out_bytes: int, sm_count: int, b_row_bytes: int = None) -> dict:
    """Cooperative or ping-pong, tile shape, ring depth, raster group and split-K for a shape
    (the heuristic of the first call, from ``bench_ws_gemm.py`` on the H100, see docs/ws_gemm.rst).

    Ping-pong when the K loop is shallow (K ≤ 1024: the epilogue is a large share, and
    ping-pong hides one warpgroup's epilogue under the other's MMAs), when 128 × 256 tiles
    would fill at most half the SMs (8192 × 256 × 8192), or when its 128 × 128 tiles make
    ``PINGPONG_WAVES`` waves or more (8192³: 1–2% ahead of cooperative in three runs, behind
    it at 6144³ and 4096³).  Otherwise cooperative: 256 × 128
    tiles when B's row stride ``b_row_bytes`` (default ``2 N``) is not a multiple of 32 bytes
    (B's TMA loads then cost far more L2 requests; taller tiles load half the B bytes per
    FLOP), else 128 × 256; and a last wave at most half full is split along K
    (:func:`_split_for`).
    """
    b_row_bytes = 2 * N if b_row_bytes is None else b_row_bytes
    if (shallow_or_narrow(M, N, K, sm_count)
            or gluonkit.cdiv(M, 128) * gluonkit.cdiv(N, 128) >= PINGPONG_WAVES * sm_count):
        return _variant("pingpong", out_bytes)
    return _with_tail_split(_variant("tall" if b_row_bytes % 32 else "coop", out_bytes), M, N, K, sm_count)


def candidate_configs(M: int, N: int, K: int, out_bytes: int, sm_count: int, b_row_bytes: int = None) -> list:
    """The small space :func:`tune` times: the heuristic's pick, then ping-pong and both
    cooperative tile shapes, each cooperative one with and without its last wave split."""
    space = [choose_config(M, N, K, out_bytes, sm_count, b_row_bytes), _variant("pingpong", out_bytes)]
    for kind in ("coop", "tall"):
        plain = _variant(kind, out_bytes)
        space += [plain, _with_tail_split(plain, M, N, K, sm_count)]
    return [c for i, c in enumerate(space) if c not in space[:i]]


DEFAULT_GROUP_M = 16
REDUCE_ROWS = 32  # rows of a split tile one program of splitk_reduce_kernel sums


def _aligned_copy(b):
    """``(view, refresh)``: an uninitialized ``K × N`` view whose row stride is a multiple of 32
    bytes, where ``b`` lives, and a function that copies ``b`` into it."""
    K, N = b.shape
    padded = gluonkit.cdiv(N * element_dtype(b).itemsize, 32) * 32 // element_dtype(b).itemsize
    if hasattr(b, "new_empty"):
        view = b.new_empty((K, padded))[:, :N]
        return view, lambda: view.copy_(b)
    view = np.empty((K, padded), b.dtype)[:, :N]
    return view, lambda: np.copyto(view, b)


def _cluster_layouts(BM: int, BK: int, in_dtype, out_dtype, c_block, acc_layout):
    """A's, C's shared layouts, C's block and the accumulator's layout for a 2-CTA cluster on a
    ``2 BM``-row tile: A's block, C's block and the accumulator split by rows (``cga_layout
    [[1, 0]]``: CTA 1 holds the lower ``BM`` rows); B's block stays whole in both CTAs."""
    rows = [[1, 0]]
    nvmma = gl.NVMMASharedLayout.get_default_for
    c_block = [2 * BM, c_block[1]]
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=acc_layout.warps_per_cta,
                                    instr_shape=acc_layout.instr_shape, cga_layout=rows)
    return (nvmma([2 * BM, BK], in_dtype, cga_layout=rows), nvmma(c_block, out_dtype, cga_layout=rows), c_block,
            acc)


def _workspace(like, rows: int, cols: int):
    """An fp32 ``rows × cols`` array where ``like`` lives (a torch tensor's device, else numpy)."""
    if hasattr(like, "new_empty"):
        import torch
        return like.new_empty((rows, cols), dtype=torch.float32)
    return np.empty((rows, cols), np.float32)


def prepare(a, b, c, BM: int = 128, BN: int = 256, BK: int = 64, STAGES: int = 4, GROUP_M: int = DEFAULT_GROUP_M,
            EPILOGUE_SPLIT: int = 2, PINGPONG: bool = False, producer_regs: int = 24, consumer_regs: int = 240,
            num_programs: int = None, SPLIT_K: int = 1, SPLIT_TILES: int = None, B_SWIZZLE: int = None,
            PAD_B: bool = False, b_kmajor: bool = False, scales=(), CLUSTER_M: int = 1):
    """A function of no arguments that computes ``c = a @ b`` with the warp-specialized kernel.

    Cooperative (default): the kernel's 8 warps, two warpgroups, share each ``BM × BN`` tile.
    ``PINGPONG=True``: two one-warpgroup consumers take alternate tiles (the kernel's 4 warps
    and a 4-warp worker at ``consumer_regs``).  The producer's warp comes on top, so the CTA
    has 12 warps either way.  Descriptors, layouts, grid and workspace are built once here.

    ``SPLIT_K > 1`` splits the last ``SPLIT_TILES`` tiles of the raster order (all of them by
    default) along K into ``SPLIT_K`` units each: the GEMM kernel writes their fp32 partials to
    a workspace and ``splitk_reduce_kernel`` sums them into C.  ``B_SWIZZLE`` overrides B's
    shared-memory swizzle width in bytes (128, 64 or 32; the block is then issued as narrower
    TMA boxes).  ``PAD_B`` copies B on every call into a buffer whose row stride is a
    multiple of 32 bytes (allocated here) and multiplies that copy.  ``CLUSTER_M=2`` (no split-K):
    each program is a cluster of 2 CTAs on ``2 BM × BN`` tiles, CTA ``r`` on rows ``r BM …``
    (with ping-pong: each consumer warpgroup's tiles); both multiply the same B block, which
    CTA 0 loads once and multicasts (half of B's L2 reads); the grid is ``num_programs // 2``
    clusters (``num_programs`` counts CTAs, default: the SMs).  ``b_kmajor``: B is given as
    ``[N, K]``; ``scales``: ``(scale_a, scale_b)``, one-element fp32 arrays whose product
    multiplies C (``ws_gemm_fp8.prepare`` checks them).
    """
    num_warps = 4 if PINGPONG else 8
    M, K = a.shape
    N = b.shape[0] if b_kmajor else b.shape[1]
    refresh_b = None
    if PAD_B:
        b, refresh_b = _aligned_copy(b)
    a_layout, b_layout, c_layout, c_block, acc_layout = gemm_layouts(
        BM, BN, BK, element_dtype(a), element_dtype(c), EPILOGUE_SPLIT, num_warps, b_kmajor)
    if CLUSTER_M != 1:
        if CLUSTER_M != 2 or SPLIT_K > 1:
            raise ValueError(f"ws_gemm.prepare: CLUSTER_M={CLUSTER_M} with SPLIT_K={SPLIT_K}: clusters are built "
                             "for CLUSTER_M=2 without split-K")
        a_layout, c_layout, c_block, acc_layout = _cluster_layouts(BM, BK, element_dtype(a), element_dtype(c), c_block,
                                                                   acc_layout)
        BM *= 2  # the cluster's tile
    if B_SWIZZLE is not None:
        b_layout = gl.NVMMASharedLayout(B_SWIZZLE, element_dtype(b).primitive_bitwidth, rank=2)
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BN, BK] if b_kmajor else [BK, BN], b_layout)
    c_desc = TensorDescriptor.from_tensor(c, c_block, c_layout)
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    split_tiles = (tiles if SPLIT_TILES is None else SPLIT_TILES) if SPLIT_K > 1 else 0
    k_tiles = gluonkit.cdiv(K, BK)
    if split_tiles and not (0 < split_tiles <= tiles and (SPLIT_K - 1) * gluonkit.cdiv(k_tiles, SPLIT_K) < k_tiles):
        raise ValueError(f"ws_gemm.prepare: SPLIT_K={SPLIT_K}, SPLIT_TILES={SPLIT_TILES} do not fit {tiles} tiles "
                         f"of {k_tiles} K-slices (every split needs at least one slice)")
    split_from = tiles - split_tiles
    units = split_from + split_tiles * SPLIT_K
    grid = (min(units, max(1, (num_programs or default_num_programs()) // CLUSTER_M)),)  # clusters
    ws = _workspace(c, split_tiles * SPLIT_K * BM, BN) if split_tiles else c
    kernel, extra = (ws_gemm_pingpong_kernel, dict(CONSUMER_REGS=consumer_regs)) if PINGPONG else (ws_gemm_kernel, {})
    if split_tiles:
        extra["SPLIT_K"] = SPLIT_K
    if b_kmajor:
        extra["B_KMAJOR"] = True
    if scales:
        extra["scale_a"], extra["scale_b"] = scales
    # bind: the arguments never change, so later calls skip the launch's per-call work.
    launch = bind(kernel, grid, (a_desc, b_desc, c_desc, ws, M, N, K, split_from),
                  dict(STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT, acc_layout=acc_layout,
                       PRODUCER_REGS=producer_regs, num_warps=num_warps, num_ctas=CLUSTER_M, **extra))
    reduce = None
    if split_tiles:
        reduce = bind(splitk_reduce_kernel, (split_tiles, BM // REDUCE_ROWS),
                      (ws, c, M, N, _row_stride(c), split_from),
                      dict(GROUP_M=GROUP_M, SPLIT_K=SPLIT_K, BM=BM, BN=BN, ROWS=REDUCE_ROWS,
                           layout=gl.BlockedLayout([1, 4], [1, 32], [4, 1], [1, 0]), num_warps=4))

    def run():
        if refresh_b is not None:
            refresh_b()
        launch()
        if reduce is not None:
            reduce()
        return c
    return run


def compile_ahead(target: str, BN: int = 256, STAGES: int = 4, EPILOGUE_SPLIT: int = 2, PINGPONG: bool = False,
                  SPLIT_K: int = 1, in_dtype=gl.bfloat16, out_dtype=gl.bfloat16, BM: int = 128, CLUSTER_M: int = 1):
    """Compile the kernel of a configuration for ``target`` ("sm_90a") without arrays or a GPU
    (BM × BN × 64 tiles per CTA, ``GROUP_M=16``): the compiled kernel, with its PTX, cubin and metadata."""
    BK = 64
    warps = 4 if PINGPONG else 8
    a_layout, b_layout, c_layout, c_block, acc = gemm_layouts(BM, BN, BK, in_dtype, out_dtype, EPILOGUE_SPLIT, warps)
    if CLUSTER_M == 2:
        a_layout, c_layout, c_block, acc = _cluster_layouts(BM, BK, in_dtype, out_dtype, c_block, acc)
    kernel, extra = ((ws_gemm_pingpong_kernel, dict(CONSUMER_REGS=240)) if PINGPONG else (ws_gemm_kernel, {}))
    return kernel.compile(
        TensorDescType((BM * CLUSTER_M, BK), in_dtype, a_layout), TensorDescType((BK, BN), in_dtype, b_layout),
        TensorDescType(tuple(c_block), out_dtype, c_layout), "*fp32", "i32", "i32", "i32", "i32",
        STAGES=STAGES, GROUP_M=16, EPILOGUE_SPLIT=EPILOGUE_SPLIT, acc_layout=acc, PRODUCER_REGS=24,
        num_warps=warps, num_ctas=CLUSTER_M, target=target, SPLIT_K=SPLIT_K, scale_a=None, scale_b=None,
        **extra)  # no scales: the 16-bit GEMM


_RUNNERS: dict = {}  # (arrays, configuration) -> prepare()'s function, for gemm()
_RUNNERS_LIMIT = 64
_TUNED: dict = {}  # tuning key -> configuration, for tune()


def _row_stride(array) -> int:
    """The row stride of a 2-D array, in elements."""
    return element_strides(array, element_dtype(array).itemsize)[0]


def _identity(array) -> tuple:
    """What a prepared launch depends on: address, shape, strides and dtype of an array (torch's
    own hashable objects when it is a tensor: the look-up runs on every call)."""
    if hasattr(array, "data_ptr"):
        return array.data_ptr(), array.shape, array.stride(), array.dtype
    return address_of(array)[0], array.shape, array.strides, array.dtype


def tune(a, b, c) -> dict:
    """The fastest of :func:`candidate_configs` for these arrays' shape, dtypes and stride
    alignment, timed with ``gluonkit.runtime.bench.do_bench`` once per process and kept in
    gluonkit's on-disk cache (``GLUONKIT_CACHE_DIR``) beside ``@autotune``'s results, keyed
    by the key, the candidates, this file's source, the GPU and the toolchain.  In the
    interpreter nothing is timed: the heuristic's pick."""
    M, K = a.shape
    N = b.shape[1]
    out_bytes = element_dtype(c).itemsize
    space = candidate_configs(M, N, K, out_bytes, default_num_programs(), _row_stride(b) * element_dtype(b).itemsize)
    if os.environ.get("GLUONKIT_INTERPRET") == "1" or len(space) == 1:
        return space[0]
    aligned = tuple(_row_stride(x) * element_dtype(x).itemsize % 32 == 0 for x in (a, b, c))
    key = (M, N, K, str(a.dtype), str(b.dtype), str(c.dtype), aligned)
    if key not in _TUNED:
        disk_key = cache_key(kind="ws_gemm.tune", key=repr(key), configs=repr(space), source=_SOURCE,
                             device=f"{device_properties().name} {device_properties().arch}",
                             toolchain=toolchain_versions())
        files = KernelCache().get(disk_key)
        if files is None:
            times = [do_bench(prepare(a, b, c, **cfg)) for cfg in space]
            KernelCache().put(disk_key, {"tune.json": json.dumps(times)})
        else:
            times = json.loads(files["tune.json"])
        _TUNED[key] = space[min(range(len(space)), key=times.__getitem__)]
    return _TUNED[key]


def gemm(a, b, c, autotune: bool = False, **config):
    """``c = a @ b`` (arrays or tensors; a, b fp16/bf16; c fp16/bf16/fp32).

    Without ``config``, :func:`choose_config` picks the configuration for the shape, or with
    ``autotune=True`` :func:`tune` times the candidates (first call per shape; cached on disk).
    The prepared launch (descriptors, grid, workspace) is kept per arrays and configuration,
    so a repeated call costs a dictionary look-up and the launch.
    """
    key = (_identity(a), _identity(b), _identity(c), autotune, tuple(config.items()))
    run = _RUNNERS.get(key)
    if run is None:
        if not config:
            config = tune(a, b, c) if autotune else choose_config(
                a.shape[0], b.shape[1], a.shape[1], element_dtype(c).itemsize, default_num_programs(),
                _row_stride(b) * element_dtype(b).itemsize)
        if len(_RUNNERS) >= _RUNNERS_LIMIT:
            _RUNNERS.clear()
        run = _RUNNERS[key] = prepare(a, b, c, **config)
    return run()


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from _device import arrays_for_device, full_size, gpu_available, to_numpy

    on_gpu = gpu_available()
    if on_gpu:
        import torch
        if torch.cuda.get_device_capability() != (9, 0):
            print(f"ws_gemm: {torch.cuda.get_device_name()} is not a Hopper (sm_90) GPU: running in the interpreter")
            os.environ["GLUONKIT_INTERPRET"] = "1"
            on_gpu = False
    big = on_gpu and full_size()
    M, N, K = (4096, 4096, 4096) if big else (200, 136, 96)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((M, K)).astype(np.float16)
    b_np = rng.standard_normal((K, N)).astype(np.float16)
    a, b, c = arrays_for_device(a_np, b_np, np.full((M, N), np.nan, np.float32))
    if big:
        gemm(a, b, c)
    else:
        gemm(a, b, c, BM=128, BN=64, BK=32, STAGES=3, num_programs=2)
    ref = a_np.astype(np.float64) @ b_np.astype(np.float64)
    err = np.linalg.norm(to_numpy(c) - ref) / np.linalg.norm(ref)
    where = "on the GPU" if on_gpu else "in the interpreter"
    print(f"ws_gemm: {M}x{N}x{K} fp16 -> fp32 {where}, relative error {err:.2e}")
    assert err < 1e-3, err


if __name__ == "__main__":
    main()
