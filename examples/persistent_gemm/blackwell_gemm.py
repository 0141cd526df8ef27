"""A persistent Blackwell GEMM: TMA loads into a ring of shared stages, ``tcgen05_mma`` into a
tensor-memory accumulator, and an epilogue from tensor memory through registers and shared
memory to a TMA store.

``C = act(A @ B)`` with A ``M × K`` and B ``K × N`` (row-major, fp16 or bf16), fp32
accumulation in tensor memory, C in fp16, bf16 or fp32.  One program per SM walks over the
output tiles in the grouped order of :mod:`persistent_gemm` (whose helpers it reuses), and
the loads run ``STAGES - 1`` K-slices ahead across tile boundaries.

The barrier protocol (docs/blackwell_gemm.rst draws it):

* ``ready[s]``: the TMA loads of stage ``s`` landed (``expect`` + two loads; one phase per use);
* ``empty[s]``: the MMA that read stage ``s`` completed — each MMA commits to its stage's
  barrier (``mbarriers=[empty[s]]``), and the producer waits on it before refilling the stage;
* ``acc_bar``: every MMA of the tile completed (a ``tcgen05_commit`` after the tile's last MMA);
  the epilogue waits on it before reading the accumulator, in ``EPILOGUE_SPLIT`` column slices
  (each through one ``BM × BN / EPILOGUE_SPLIT`` shared buffer and a TMA store), so a slice's
  registers are all it holds at once.  The next tile's first MMA (``use_acc=False``) overwrites
  the accumulator only after every warp has read it: the lowering orders each MMA after a CTA
  barrier.

The MMAs are issued back to back: step ``s`` waits only for its stage's data and, before
refilling the stage of step ``s - 1``, for that MMA — by then MMA ``s`` is already queued
behind it, so the tensor cores never idle on the issuing thread.  The accumulator takes
``BN`` of tensor memory's 512 columns (fp32: one column per element).

Run: ``python examples/persistent_gemm/blackwell_gemm.py`` (there is no Blackwell GPU
here: it runs in the interpreter at a small size).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, fence_async_shared,
                                                mbarrier, tcgen05_commit, tcgen05_mma, tma)
from gluonkit.nvidia.blackwell import TensorDescriptor

sys.path.insert(0, os.path.dirname(__file__))
from persistent_gemm import (  # noqa: E402  (the grouped order and the loads are Hopper's)
    default_num_programs, element_dtype, grouped_tile, issue_loads, next_load)


@gluonkit.jit
def blackwell_gemm_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                          EPILOGUE_SPLIT: gl.constexpr, ACTIVATION: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    gl.static_assert(c_desc.block_type.shape[1] * EPILOGUE_SPLIT == BN,
                     "C's block must be BM x (BN // EPILOGUE_SPLIT)")
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    my_tiles = gl.cdiv(num_tiles - gl.program_id(0), gl.num_programs(0))

    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    mbarrier.init(acc_bar, count=1)
    acc_layout: gl.constexpr = TensorMemoryLayout([BM, BN], col_stride=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], acc_layout)
    EPI_N: gl.constexpr = BN // EPILOGUE_SPLIT
    reg_layout: gl.constexpr = acc.slice(0, EPI_N).get_reg_layout()

    load_tile = gl.program_id(0)
    load_m, load_n = grouped_tile(load_tile, num_pid_m, num_pid_n, GROUP_M)
    load_k = 0
    for s in gl.static_range(STAGES - 1):
        issue_loads(a_desc, b_desc, a_smem, b_smem, ready, s, load_m, load_n, load_k, load_tile < num_tiles)
        load_k, load_tile, load_m, load_n = next_load(load_k, load_tile, load_m, load_n, k_tiles, num_pid_m,
                                                      num_pid_n, GROUP_M)
    for t in range(my_tiles):
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            tcgen05_mma(a_smem.index(stage), b_smem.index(stage), acc, use_acc=k > 0,
                        mbarriers=[empty.index(stage)])
            # Refill the stage of step - 1 once its MMA has read it (MMA `step` is already queued).
            prev = step + STAGES - 1
            mbarrier.wait(empty.index(prev % STAGES), ((step - 1) // STAGES) & 1, pred=step > 0)
            issue_loads(a_desc, b_desc, a_smem, b_smem, ready, prev % STAGES, load_m, load_n, load_k,
                        load_tile < num_tiles)
            load_k, load_tile, load_m, load_n = next_load(load_k, load_tile, load_m, load_n, k_tiles, num_pid_m,
                                                          num_pid_n, GROUP_M)
        tcgen05_commit(acc_bar)
        mbarrier.wait(acc_bar, t & 1)
        for j in gl.static_range(EPILOGUE_SPLIT):  # column slices of the accumulator: fewer live registers
            out = acc.slice(j * EPI_N, EPI_N).load(reg_layout)
            if ACTIVATION is not None:
                out = ACTIVATION(out)
            tma.store_wait(0)  # the previous slice's store has read c_smem
            c_smem.store(out.to(c_desc.dtype))
            fence_async_shared()
            tma.async_store(c_desc, [pid_m * BM, pid_n * BN + j * EPI_N], c_smem)
    tma.store_wait(0)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    mbarrier.invalidate(acc_bar)


def prepare(a, b, c, BM: int = 128, BN: int = 256, BK: int = 64, STAGES: int = 3, GROUP_M: int = 16,
            EPILOGUE_SPLIT: int = 4, num_warps: int = 4, activation=None, num_programs: int = None):
    """A function of no arguments that computes ``c = activation(a @ b)`` (one kernel launch per call).

    ``BM`` is 128 (the MMA's rows, one TMEM lane each); ``BN`` ≤ 256 columns of tensor memory.
    """
    M, K = a.shape
    N = b.shape[1]
    nvmma = gl.NVMMASharedLayout.get_default_for
    in_dtype, out_dtype = element_dtype(a), element_dtype(c)
    c_block = [BM, BN // EPILOGUE_SPLIT]
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], nvmma([BM, BK], in_dtype))
    b_desc = TensorDescriptor.from_tensor(b, [BK, BN], nvmma([BK, BN], in_dtype))
    c_desc = TensorDescriptor.from_tensor(c, c_block, nvmma(c_block, out_dtype))
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    launch = blackwell_gemm_kernel[(min(tiles, num_programs or default_num_programs()),)]

    def run():
        launch(a_desc, b_desc, c_desc, M, N, K, STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT,
               ACTIVATION=activation, num_warps=num_warps)
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
    gemm(a, b, c, BM=128, BN=64, BK=32, STAGES=3, EPILOGUE_SPLIT=1)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    print(f"blackwell_gemm: {M}x{N}x{K} fp16 -> fp32 in the interpreter, relative error {err:.2e}")
    assert err < 1e-6, err


if __name__ == "__main__":
    main()
