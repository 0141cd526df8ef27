"""A persistent Hopper GEMM: one program per SM walks over output tiles, and the TMA/wgmma
pipeline runs across tile boundaries so it never drains.

``C = act(A @ B)`` with A ``M × K`` and B ``K × N`` (row-major, fp16 or bf16), fp32
accumulation, C in fp16, bf16 or fp32.  The grid is the number of SMs (or the number of
tiles, if smaller); program ``p`` takes tiles ``p, p + grid, p + 2·grid, …`` of a grouped
order: ``GROUP_M`` rows of tiles are walked column by column, so programs running at the
same time share A rows and B columns in L2.

The K-loop pipeline is *flat*: the program's work is the sequence of steps
``(tile, k-slice)``, and the loads for step ``s + STAGES - 1`` are issued while step ``s``
computes, even when they belong to the next tile.  So the loads of the next tile are in
flight during this tile's epilogue.  Each step waits for its stage's mbarrier, issues an
asynchronous ``warpgroup_mma`` and waits until only that MMA is in flight, which frees the
stage the previous MMA read for the next TMA load.

The epilogue applies the optional activation (a ``@gluonkit.jit`` function passed as a
constexpr), converts to C's dtype and writes the tile through shared memory with TMA stores,
in ``EPILOGUE_SPLIT`` column slices of one shared buffer ``BM × BN / EPILOGUE_SPLIT``: a
smaller buffer leaves shared memory for more pipeline stages.  The previous tile's TMA store
overlaps this tile's main loop; ``tma.store_wait`` only runs before the buffer is reused.
Ragged M, N and K are handled by TMA: loads zero-fill outside the tensors and stores clip.

Run: ``python examples/persistent_gemm/persistent_gemm.py`` (GPU if present, else the
interpreter at a small size).
"""

import functools
import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.nvidia.hopper import TensorDescriptor
from gluonkit.runtime.launch import bind


@gluonkit.jit
def grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """(pid_m, pid_n) of ``tile`` in the grouped order: ``GROUP_M`` tile rows, column by column."""
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile // tiles_per_group) * GROUP_M
    group_rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % tiles_per_group) % group_rows
    pid_n = (tile % tiles_per_group) // group_rows
    return pid_m, pid_n


@gluonkit.jit
def issue_loads(a_desc, b_desc, a_smem, b_smem, ready, stage, pid_m, pid_n, k, pred):
    """Start the TMA loads of A's and B's K-slice ``k`` for tile (pid_m, pid_n) into ``stage``."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    mbarrier.expect(ready.index(stage), a_desc.block_type.nbytes + b_desc.block_type.nbytes, pred=pred)
    tma.async_load(a_desc, [pid_m * BM, k * BK], ready.index(stage), a_smem.index(stage), pred=pred)
    tma.async_load(b_desc, [k * BK, pid_n * BN], ready.index(stage), b_smem.index(stage), pred=pred)


@gluonkit.jit
def next_load(k, tile, pid_m, pid_n, k_tiles, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """The producer's position after one K-slice: the next slice, or the next tile's first.

    Kept incrementally so that the main loop divides only once per tile.
    """
    k += 1
    if k == k_tiles:
        k = 0
        tile += gl.num_programs(0)
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
    return k, tile, pid_m, pid_n


@gluonkit.jit
def store_tile(c_desc, c_smem, out, off_m, off_n, EPILOGUE_SPLIT: gl.constexpr):
    """Write the ``BM × BN`` tile ``out`` to C at (off_m, off_n) through ``c_smem``, slice by slice."""
    EPI_N: gl.constexpr = c_desc.block_type.shape[1]
    if EPILOGUE_SPLIT == 1:
        tma.store_wait(0)
        c_smem.store(out)
        fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n], c_smem)
    else:
        BM: gl.constexpr = c_desc.block_type.shape[0]
        halves = out.reshape([BM, 2, EPI_N]).permute(0, 2, 1)
        left, right = halves.split()
        tma.store_wait(0)
        c_smem.store(left)
        fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n], c_smem)
        tma.store_wait(0)
        c_smem.store(right)
        fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n + EPI_N], c_smem)


@gluonkit.jit
def persistent_gemm_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                           EPILOGUE_SPLIT: gl.constexpr, acc_layout: gl.constexpr, ACTIVATION: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    gl.static_assert(EPILOGUE_SPLIT == 1 or EPILOGUE_SPLIT == 2, "EPILOGUE_SPLIT must be 1 or 2")
    gl.static_assert(c_desc.block_type.shape[1] * EPILOGUE_SPLIT == BN,
                     "C's block must be BM x (BN // EPILOGUE_SPLIT)")
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(num_pid_m * num_pid_n - gl.program_id(0), gl.num_programs(0))

    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)

    # The producer runs STAGES - 1 K-slices ahead of the MMAs, across tile boundaries.
    num_tiles = num_pid_m * num_pid_n
    load_tile = gl.program_id(0)
    load_m, load_n = grouped_tile(load_tile, num_pid_m, num_pid_n, GROUP_M)
    load_k = 0
    for s in gl.static_range(STAGES - 1):
        issue_loads(a_desc, b_desc, a_smem, b_smem, ready, s, load_m, load_n, load_k, load_tile < num_tiles)
        load_k, load_tile, load_m, load_n = next_load(load_k, load_tile, load_m, load_n, k_tiles, num_pid_m,
                                                      num_pid_n, GROUP_M)
    for t in range(my_tiles):
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        acc = gl.zeros([BM, BN], gl.float32, acc_layout)
        for k in range(k_tiles):
            step = t * k_tiles + k
            mbarrier.wait(ready.index(step % STAGES), (step // STAGES) & 1)
            acc = warpgroup_mma(a_smem.index(step % STAGES), b_smem.index(step % STAGES), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
            # The MMA of the previous step is done: refill its stage.
            issue_loads(a_desc, b_desc, a_smem, b_smem, ready, (step + STAGES - 1) % STAGES, load_m, load_n, load_k,
                        load_tile < num_tiles)
            load_k, load_tile, load_m, load_n = next_load(load_k, load_tile, load_m, load_n, k_tiles, num_pid_m,
                                                          num_pid_n, GROUP_M)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        if ACTIVATION is not None:
            acc = ACTIVATION(acc)
        store_tile(c_desc, c_smem, acc.to(c_desc.dtype), pid_m * BM, pid_n * BN, EPILOGUE_SPLIT)
    tma.store_wait(0)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))


@gluonkit.jit
def relu(x):
    """An activation for the epilogue hook: ``max(x, 0)``."""
    return gl.maximum(x, 0.0)


_GL_DTYPES = {"float16": gl.float16, "bfloat16": gl.bfloat16, "float32": gl.float32,
              "float8_e4m3fn": gl.float8e4nv, "float8_e5m2": gl.float8e5, "uint8": gl.uint8}


def element_dtype(array) -> gl.dtype:
    """The gluonkit dtype of a numpy array's or torch tensor's elements (fp16, bf16, fp32, fp8 or uint8)."""
    return _GL_DTYPES[str(array.dtype).replace("torch.", "")]


@functools.lru_cache(maxsize=None)
def _sm_count() -> int:
    from gluonkit.runtime.driver import device_properties
    return device_properties().sm_count


def default_num_programs() -> int:
    """The GPU's SM count, or 4 programs in the interpreter."""
    from gluonkit.runtime.driver import has_gpu
    if os.environ.get("GLUONKIT_INTERPRET") == "1" or not has_gpu():
        return 4
    return _sm_count()


@functools.lru_cache(maxsize=64)
def gemm_layouts(BM: int, BN: int, BK: int, in_dtype, out_dtype, split: int, num_warps: int,
                 b_kmajor: bool = False):
    """A's, B's and C's shared layouts, C's block and the accumulator's layout.

    B's block is ``[BK, BN]``, or ``[BN, BK]`` with ``b_kmajor`` (B given as ``[N, K]``, which
    fp8 wgmma needs).  The MMA instruction's K is 32 bytes of input: 16 elements of fp16/bf16,
    32 of fp8.  Cached: the host wrapper runs on every call, and building layouts costs microseconds.
    """
    nvmma = gl.NVMMASharedLayout.get_default_for
    c_block = [BM, BN // split]
    instr_k = 256 // in_dtype.primitive_bitwidth
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, instr_k])
    b_block = [BN, BK] if b_kmajor else [BK, BN]
    return nvmma([BM, BK], in_dtype), nvmma(b_block, in_dtype), nvmma(c_block, out_dtype), c_block, acc


DEFAULT_GROUP_M = 16


def prepare(a, b, c, BM: int = 128, BN: int = 256, BK: int = 64, STAGES: int = 3, GROUP_M: int = DEFAULT_GROUP_M,
            EPILOGUE_SPLIT: int = 1, num_warps: int = 8, activation=None, num_programs: int = None):
    """A function of no arguments that computes ``c = activation(a @ b)``.

    ``GROUP_M=16`` with 128 × 256 tiles makes the ~132 tiles in flight about 16 rows by 8
    columns, which loads the fewest A and B bytes per K-step across the GPU (16 × 16 KB of
    A + 8 × 32 KB of B); it measured 2–3% faster than 8 at 8192³ on the H100.

    The TMA descriptors, layouts and grid are built here, once; each call of the result is
    one kernel launch.  Build it once when the same tensors are multiplied repeatedly.
    """
    M, K = a.shape
    N = b.shape[1]
    a_layout, b_layout, c_layout, c_block, acc_layout = gemm_layouts(
        BM, BN, BK, element_dtype(a), element_dtype(c), EPILOGUE_SPLIT, num_warps)
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], a_layout)
    b_desc = TensorDescriptor.from_tensor(b, [BK, BN], b_layout)
    c_desc = TensorDescriptor.from_tensor(c, c_block, c_layout)
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    # bind: the arguments never change, so later calls skip the launch's per-call work.
    launch = bind(persistent_gemm_kernel, (min(tiles, num_programs or default_num_programs()),),
                  (a_desc, b_desc, c_desc, M, N, K),
                  dict(STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT, acc_layout=acc_layout,
                       ACTIVATION=activation, num_warps=num_warps))

    def run():
        launch()
        return c
    return run


def gemm(a, b, c, **config):
    """``c = activation(a @ b)`` (arrays or tensors; a, b fp16/bf16; c fp16/bf16/fp32); ``config``
    as for :func:`prepare`."""
    return prepare(a, b, c, **config)()


def _hopper_available(gpu_available) -> bool:
    """True on an sm_90 GPU; on another GPU, say why the example falls back to the interpreter."""
    if not gpu_available():
        return False
    import torch
    if torch.cuda.get_device_capability() == (9, 0):
        return True
    print(f"persistent_gemm: {torch.cuda.get_device_name()} is not a Hopper (sm_90) GPU: running in the interpreter")
    os.environ["GLUONKIT_INTERPRET"] = "1"
    return False


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from _device import arrays_for_device, full_size, gpu_available, to_numpy

    on_gpu = _hopper_available(gpu_available)
    big = on_gpu and full_size()
    M, N, K = (4096, 4096, 4096) if big else (200, 136, 96)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((M, K)).astype(np.float16)
    b_np = rng.standard_normal((K, N)).astype(np.float16)
    a, b, c = arrays_for_device(a_np, b_np, np.full((M, N), np.nan, np.float32))
    if big:  # fp32 C: a half-tile C buffer, so 3 x 48 KB of stages + 64 KB fit (+ 128 KB would not)
        gemm(a, b, c, EPILOGUE_SPLIT=2)
    else:
        gemm(a, b, c, BM=64, BN=64, BK=32, STAGES=3, num_warps=4, EPILOGUE_SPLIT=2)
    ref = a_np.astype(np.float64) @ b_np.astype(np.float64)
    err = np.linalg.norm(to_numpy(c) - ref) / np.linalg.norm(ref)
    where = "on the GPU" if on_gpu else "in the interpreter"
    print(f"persistent_gemm: {M}x{N}x{K} fp16 -> fp32 {where}, relative error {err:.2e}")
    assert err < 1e-3, err


if __name__ == "__main__":
    main()
