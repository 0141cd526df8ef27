"""A warp-specialized persistent Blackwell GEMM: a TMA warp, an MMA warp and an epilogue
warpgroup, with a double-buffered tensor-memory accumulator.

``C = act(A @ B)`` as in ``examples/persistent_gemm/blackwell_gemm.py`` (fp16/bf16 in, fp32
accumulation in tensor memory), the same grouped tile order; ``gl.warp_specialize`` splits
each program into

* the **loader** (one worker warp): the Hopper example's producer (``ws_gemm._producer``),
  filling the ring of ``STAGES`` shared stages as fast as ``empty[s]`` frees them;
* the **MMA warp** (one worker warp): per tile, waits until the epilogue has emptied its
  accumulator buffer (``acc_empty[b]``, ``b = tile % 2``), then per K-slice waits for
  ``ready[s]`` and issues ``tcgen05_mma(..., mbarriers=[empty[s]])`` (the commit hands the
  stage back to the loader when the MMA has read it), and after the tile's last MMA commits
  to ``acc_ready[b]``;
* the **epilogue** (the default partition, 4 warps): waits for ``acc_ready[b]``, reads the
  accumulator in ``EPILOGUE_SPLIT`` column slices, hands the buffer back (``acc_empty[b]``)
  and stores the slices through shared memory with TMA.

Two accumulators (``2 × BN`` of the 512 TMEM columns) let the MMAs of tile ``i + 1`` run
while the epilogue of tile ``i`` drains its buffer.  Phases: tile ``t`` uses buffer ``t % 2``
in lap ``t // 2``; the MMA warp waits for parity ``lap & 1 ^ 1`` of ``acc_empty`` (a fresh
barrier's previous phase counts as complete), the epilogue for ``lap & 1`` of ``acc_ready``.

Run: ``python examples/warp_specialized/blackwell_ws_gemm.py`` (the interpreter: no Blackwell
GPU here; it also explores interleavings of the partitions).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, fence_async_shared,
                                                mbarrier, tcgen05_commit, tcgen05_mma, tma)
from gluonkit.nvidia.blackwell import TensorDescriptor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.join(_HERE, "..", "persistent_gemm")]

from persistent_gemm import default_num_programs, element_dtype, grouped_tile  # noqa: E402
from ws_gemm import _producer  # noqa: E402  (the loader is the Hopper example's producer)


@gluonkit.jit
def _mma_warp(a_smem, b_smem, accs, ready, empty, acc_ready, acc_empty, M, N, K, STAGES: gl.constexpr):
    """Issue the MMAs of the program's tiles into alternate accumulators (in turn, when there are two)."""
    BUFS: gl.constexpr = accs.shape[0]
    BM: gl.constexpr = a_smem.shape[1]
    BK: gl.constexpr = a_smem.shape[2]
    BN: gl.constexpr = b_smem.shape[2]
    k_tiles = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(gl.cdiv(M, BM) * gl.cdiv(N, BN) - gl.program_id(0), gl.num_programs(0))
    for t in range(my_tiles):
        buf = t % BUFS
        mbarrier.wait(acc_empty.index(buf), ((t // BUFS) & 1) ^ 1)
        acc = accs.index(buf)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            tcgen05_mma(a_smem.index(stage), b_smem.index(stage), acc, use_acc=k > 0,
                        mbarriers=[empty.index(stage)])
        tcgen05_commit(acc_ready.index(buf))


@gluonkit.jit
def _epilogue(accs, c_smem, c_desc, acc_ready, acc_empty, M, N, GROUP_M: gl.constexpr,
              EPILOGUE_SPLIT: gl.constexpr, ACTIVATION: gl.constexpr):
    """Drain each tile's accumulator: TMEM -> registers -> shared -> TMA store, slice by slice."""
    BUFS: gl.constexpr = accs.shape[0]
    BM: gl.constexpr = accs.shape[1]
    BN: gl.constexpr = accs.shape[2]
    EPI_N: gl.constexpr = BN // EPILOGUE_SPLIT
    reg_layout: gl.constexpr = accs.index(0).slice(0, EPI_N).get_reg_layout()
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    my_tiles = gl.cdiv(num_pid_m * num_pid_n - gl.program_id(0), gl.num_programs(0))
    for t in range(my_tiles):
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        buf = t % BUFS
        mbarrier.wait(acc_ready.index(buf), (t // BUFS) & 1)
        for j in gl.static_range(EPILOGUE_SPLIT):
            out = accs.index(buf).slice(j * EPI_N, EPI_N).load(reg_layout)
            if j == EPILOGUE_SPLIT - 1:
                gl.thread_barrier()  # every warp has read the buffer: the MMA warp may reuse it
                mbarrier.arrive(acc_empty.index(buf))
            if ACTIVATION is not None:
                out = ACTIVATION(out)
            tma.store_wait(0)
            c_smem.store(out.to(c_desc.dtype))
            fence_async_shared()
            tma.async_store(c_desc, [pid_m * BM, pid_n * BN + j * EPI_N], c_smem)
    tma.store_wait(0)


@gluonkit.jit
def blackwell_ws_gemm_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                             EPILOGUE_SPLIT: gl.constexpr, ACTIVATION: gl.constexpr, ACC_BUFFERS: gl.constexpr = 2):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    gl.static_assert(c_desc.block_type.shape[1] * EPILOGUE_SPLIT == BN,
                     "C's block must be BM x (BN // EPILOGUE_SPLIT)")
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_ready = gl.allocate_shared_memory(gl.int64, [ACC_BUFFERS, 1], mbarrier.MBarrierLayout())
    acc_empty = gl.allocate_shared_memory(gl.int64, [ACC_BUFFERS, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    for b in gl.static_range(ACC_BUFFERS):
        mbarrier.init(acc_ready.index(b), count=1)
        mbarrier.init(acc_empty.index(b), count=1)
    accs = allocate_tensor_memory(gl.float32, [ACC_BUFFERS, BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    fence_async_shared()
    gl.warp_specialize([
        (_epilogue, (accs, c_smem, c_desc, acc_ready, acc_empty, M, N, GROUP_M, EPILOGUE_SPLIT, ACTIVATION)),
        # no split-K (split_from 0, SPLIT_K 1), B as [K, N] (B_KMAJOR False)
        (_producer, (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, 0, GROUP_M, STAGES, 1, False)),
        (_mma_warp, (a_smem, b_smem, accs, ready, empty, acc_ready, acc_empty, M, N, K, STAGES)),
    ], [1, 1], [24, 24])
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    for b in gl.static_range(ACC_BUFFERS):
        mbarrier.invalidate(acc_ready.index(b))
        mbarrier.invalidate(acc_empty.index(b))


def prepare(a, b, c, BM: int = 128, BN: int = 256, BK: int = 64, STAGES: int = 3, GROUP_M: int = 16,
            EPILOGUE_SPLIT: int = 4, activation=None, num_programs: int = None, ACC_BUFFERS: int = 2):
    """A function of no arguments that computes ``c = activation(a @ b)`` (one launch per call).

    ``ACC_BUFFERS=1`` keeps one accumulator: the MMAs of a tile then wait until the epilogue
    has read the previous one (the variant the cost model compares, docs/blackwell_gemm.rst)."""
    M, K = a.shape
    N = b.shape[1]
    nvmma = gl.NVMMASharedLayout.get_default_for
    in_dtype, out_dtype = element_dtype(a), element_dtype(c)
    c_block = [BM, BN // EPILOGUE_SPLIT]
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], nvmma([BM, BK], in_dtype))
    b_desc = TensorDescriptor.from_tensor(b, [BK, BN], nvmma([BK, BN], in_dtype))
    c_desc = TensorDescriptor.from_tensor(c, c_block, nvmma(c_block, out_dtype))
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    launch = blackwell_ws_gemm_kernel[(min(tiles, num_programs or default_num_programs()),)]

    def run():
        launch(a_desc, b_desc, c_desc, M, N, K, STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT,
               ACTIVATION=activation, ACC_BUFFERS=ACC_BUFFERS, num_warps=4)
        return c
    return run


def gemm(a, b, c, **config):
    """``c = activation(a @ b)``; ``config`` as for :func:`prepare`."""
    return prepare(a, b, c, **config)()


def main() -> None:
    os.environ["GLUONKIT_INTERPRET"] = "1"  # no Blackwell GPU to run on: the interpreter checks the protocol
    M, N, K = 200, 136, 96
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    gemm(a, b, c, BM=128, BN=64, BK=32, STAGES=3, EPILOGUE_SPLIT=2, num_programs=2)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    print(f"blackwell_ws_gemm: {M}x{N}x{K} fp16 -> fp32 in the interpreter, relative error {err:.2e}")
    assert err < 1e-6, err


if __name__ == "__main__":
    main()
