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

Ragged M, N and K are handled by TMA: loads zero-fill outside the tensors and stores clip.

Run: ``python examples/warp_specialized/ws_gemm.py`` (GPU if present, else the CPU
interpreter at a small ragged size, which also explores interleavings of the partitions).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.nvidia.hopper import TensorDescriptor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "persistent_gemm"))

from persistent_gemm import default_num_programs, element_dtype, gemm_layouts, grouped_tile, store_tile  # noqa: E402


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
def _producer(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, GROUP_M: gl.constexpr,
              STAGES: gl.constexpr, B_KMAJOR: gl.constexpr):
    """The TMA partition: fill the ring, slice after slice, as fast as the consumers free stages.

    B's blocks are ``[BK, BN]``, or ``[BN, BK]`` slices of an ``[N, K]`` B with ``B_KMAJOR``."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[0] if B_KMAJOR else b_desc.block_type.shape[1]
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(num_pid_m * num_pid_n - gl.program_id(0), gl.num_programs(0))
    for t in range(my_tiles):
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(empty.index(stage), ((step // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(stage), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_load(a_desc, [pid_m * BM, k * BK], ready.index(stage), a_smem.index(stage))
            if B_KMAJOR:
                tma.async_load(b_desc, [pid_n * BN, k * BK], ready.index(stage), b_smem.index(stage))
            else:
                tma.async_load(b_desc, [k * BK, pid_n * BN], ready.index(stage), b_smem.index(stage))


@gluonkit.jit
def _consumer(a_smem, b_smem, c_smem, ready, empty, c_desc, M, N, K, GROUP_M: gl.constexpr,
              STAGES: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr,
              B_KMAJOR: gl.constexpr, scale_a, scale_b):
    """The MMA partition: wgmma over the ring, hand each stage back once read, TMA-store each tile
    (times ``scale_a[0] * scale_b[0]`` unless the scale pointers are ``None``)."""
    scale = _load_scale(scale_a, scale_b)
    BM: gl.constexpr = a_smem.shape[1]
    BK: gl.constexpr = a_smem.shape[2]
    BN: gl.constexpr = c_desc.block_type.shape[1] * EPILOGUE_SPLIT
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(num_pid_m * num_pid_n - gl.program_id(0), gl.num_programs(0))
    for t in range(my_tiles):
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([BM, BN], gl.float32, acc_layout)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(stage), _b_operand(b_smem.index(stage), B_KMAJOR), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
            gl.thread_barrier()  # the previous step's MMA has retired in every consumer warpgroup
            mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES), pred=k > 0)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        gl.thread_barrier()
        mbarrier.arrive(empty.index((t * k_tiles + k_tiles - 1) % STAGES))
        store_tile(c_desc, c_smem, _scaled(acc, scale).to(c_desc.dtype), pid_m * BM, pid_n * BN, EPILOGUE_SPLIT)
    tma.store_wait(0)


@gluonkit.jit
def ws_gemm_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                   EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                   B_KMAJOR: gl.constexpr = False, scale_a=None, scale_b=None):
    """Cooperative: the kernel's 8 warps (two warpgroups) share each tile.  ``B_KMAJOR``: B is
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
    fence_async_shared()
    gl.warp_specialize([
        (_consumer, (a_smem, b_smem, c_smem, ready, empty, c_desc, M, N, K, GROUP_M, STAGES, EPILOGUE_SPLIT,
                     acc_layout, B_KMAJOR, scale_a, scale_b)),
        (_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, GROUP_M, STAGES, B_KMAJOR)),
    ], [1], [PRODUCER_REGS])
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


@gluonkit.jit
def _pingpong_consumer(a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, GROUP_M: gl.constexpr,
                       STAGES: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr,
                       WHICH: gl.constexpr, B_KMAJOR: gl.constexpr, scale_a, scale_b):
    """One ping-pong consumer warpgroup: the program's tiles ``WHICH, WHICH + 2, …``, MMAs in turns."""
    scale = _load_scale(scale_a, scale_b)
    BM: gl.constexpr = a_smem.shape[1]
    BK: gl.constexpr = a_smem.shape[2]
    BN: gl.constexpr = c_desc.block_type.shape[1] * EPILOGUE_SPLIT
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(num_pid_m * num_pid_n - gl.program_id(0), gl.num_programs(0))
    for j in range((my_tiles - WHICH + 1) // 2):
        t = 2 * j + WHICH
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        # Our turn: the other warpgroup has issued all MMAs of its tile (the previous one).
        mbarrier.wait(turn.index(WHICH), (j & 1) ^ (1 - WHICH))
        acc = gl.zeros([BM, BN], gl.float32, acc_layout)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(stage), _b_operand(b_smem.index(stage), B_KMAJOR), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
            gl.thread_barrier()  # thread 0 arrives for the warpgroup
            mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES), pred=k > 0)
        mbarrier.arrive(turn.index(1 - WHICH))  # the other warpgroup's MMAs may start under our epilogue
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        gl.thread_barrier()
        mbarrier.arrive(empty.index((t * k_tiles + k_tiles - 1) % STAGES))
        store_tile(c_desc, c_smem.index(WHICH), _scaled(acc, scale).to(c_desc.dtype), pid_m * BM, pid_n * BN,
                   EPILOGUE_SPLIT)
    tma.store_wait(0)


@gluonkit.jit
def ws_gemm_pingpong_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                            EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr, PRODUCER_REGS: gl.constexpr,
                            CONSUMER_REGS: gl.constexpr, B_KMAJOR: gl.constexpr = False, scale_a=None, scale_b=None):
    """Ping-pong: two one-warpgroup consumers (the kernel's 4 warps and a 4-warp worker) on
    alternate tiles; ``turn`` mbarriers make their main loops take turns, so one's epilogue
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
    fence_async_shared()
    gl.warp_specialize([
        (_pingpong_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, GROUP_M, STAGES,
                              EPILOGUE_SPLIT, acc_layout, 0, B_KMAJOR, scale_a, scale_b)),
        (_pingpong_consumer, (a_smem, b_smem, c_smem, ready, empty, turn, c_desc, M, N, K, GROUP_M, STAGES,
                              EPILOGUE_SPLIT, acc_layout, 1, B_KMAJOR, scale_a, scale_b)),
        (_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, GROUP_M, STAGES, B_KMAJOR)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    mbarrier.invalidate(turn.index(0))
    mbarrier.invalidate(turn.index(1))


def choose_config(M: int, N: int, K: int, out_bytes: int, sm_count: int) -> dict:
    """Cooperative or ping-pong, tile shape, ring depth and raster group for a shape (from
    ``bench_ws_gemm.py`` on the H100, see docs/benchmarks.rst).

    Ping-pong (128 × 128 per warpgroup, ``GROUP_M=8``) when the K loop is shallow (K ≤ 1024:
    the epilogue is a large share, and ping-pong hides one warpgroup's epilogue under the
    other's MMAs) or when 128 × 256 tiles would leave half the SMs idle; otherwise
    cooperative 128 × 256 (``GROUP_M=16``).  As many stages as fit in 227 KB beside C's
    half-tile buffer(s).
    """
    big_tiles = gluonkit.cdiv(M, 128) * gluonkit.cdiv(N, 256)
    pingpong = K <= 1024 or 2 * big_tiles <= sm_count
    BN = 128 if pingpong else 256
    stage_bytes = (128 * 64 + 64 * BN) * 2
    c_bytes = (2 if pingpong else 1) * 128 * (BN // 2) * out_bytes
    stages = min(6, (232448 - 1024 - c_bytes) // stage_bytes)
    return dict(BM=128, BN=BN, BK=64, STAGES=stages, EPILOGUE_SPLIT=2, PINGPONG=pingpong,
                GROUP_M=8 if pingpong else 16)


DEFAULT_GROUP_M = 16


def prepare(a, b, c, BM: int = 128, BN: int = 256, BK: int = 64, STAGES: int = 4, GROUP_M: int = DEFAULT_GROUP_M,
            EPILOGUE_SPLIT: int = 2, PINGPONG: bool = False, producer_regs: int = 24, consumer_regs: int = 240,
            num_programs: int = None, b_kmajor: bool = False, scales=()):
    """A function of no arguments that computes ``c = a @ b`` with the warp-specialized kernel.

    Cooperative (default): the kernel's 8 warps, two warpgroups, share each ``BM × BN`` tile.
    ``PINGPONG=True``: two one-warpgroup consumers take alternate tiles (the kernel's 4 warps
    and a 4-warp worker at ``consumer_regs``).  The producer's warp comes on top, so the CTA
    has 12 warps either way.  Descriptors, layouts and grid are built once here.
    ``b_kmajor``: B is given as ``[N, K]``; ``scales``: ``(scale_a, scale_b)``, one-element
    fp32 arrays whose product multiplies C (``ws_gemm_fp8.prepare`` checks them).
    """
    num_warps = 4 if PINGPONG else 8
    M, K = a.shape
    N = b.shape[0] if b_kmajor else b.shape[1]
    a_layout, b_layout, c_layout, c_block, acc_layout = gemm_layouts(
        BM, BN, BK, element_dtype(a), element_dtype(c), EPILOGUE_SPLIT, num_warps, b_kmajor)
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BN, BK] if b_kmajor else [BK, BN], b_layout)
    c_desc = TensorDescriptor.from_tensor(c, c_block, c_layout)
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    grid = (min(tiles, num_programs or default_num_programs()),)
    if PINGPONG:
        launch, extra = ws_gemm_pingpong_kernel[grid], dict(CONSUMER_REGS=consumer_regs)
    else:
        launch, extra = ws_gemm_kernel[grid], {}
    if b_kmajor:
        extra["B_KMAJOR"] = True
    if scales:
        extra["scale_a"], extra["scale_b"] = scales

    def run():
        launch(a_desc, b_desc, c_desc, M, N, K, STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT,
               acc_layout=acc_layout, PRODUCER_REGS=producer_regs, num_warps=num_warps, **extra)
        return c
    return run


def gemm(a, b, c, **config):
    """``c = a @ b`` (arrays or tensors; a, b fp16/bf16; c fp16/bf16/fp32).  Without ``config``,
    :func:`choose_config` picks the tiles for the shape."""
    if not config:
        config = choose_config(a.shape[0], b.shape[1], a.shape[1], element_dtype(c).itemsize, default_num_programs())
    return prepare(a, b, c, **config)()


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from _device import arrays_for_device, gpu_available, to_numpy

    on_gpu = gpu_available()
    if on_gpu:
        import torch
        if torch.cuda.get_device_capability() != (9, 0):
            print(f"ws_gemm: {torch.cuda.get_device_name()} is not a Hopper (sm_90) GPU: running in the interpreter")
            os.environ["GLUONKIT_INTERPRET"] = "1"
            on_gpu = False
    M, N, K = (4096, 4096, 4096) if on_gpu else (200, 136, 96)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((M, K)).astype(np.float16)
    b_np = rng.standard_normal((K, N)).astype(np.float16)
    a, b, c = arrays_for_device(a_np, b_np, np.full((M, N), np.nan, np.float32))
    if on_gpu:
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
