"""A pipelined Hopper GEMM: TMA loads into a ring of shared-memory stages, mbarriers, wgmma.

``C = A @ B`` with A ``M × K`` and B ``K × N`` (row-major, fp16 or bf16), fp32 accumulation.
Each program computes one ``BM × BN`` tile.  ``STAGES`` shared-memory buffers hold the
next K-slices of A and B: TMA copies them in ahead of use, each completing on its stage's
mbarrier with the expected byte count, and an asynchronous ``warpgroup_mma`` consumes the
stage whose barrier has flipped while the previous MMA finishes; the stage that previous
MMA read is then refilled with the slice ``STAGES - 1`` ahead.  Ragged M, N and K are handled by TMA's zero fill; the epilogue stores with masks.

Run: ``python examples/persistent_gemm/pipelined_gemm.py`` (GPU if present, else the
interpreter at a small size).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.nvidia.hopper import TensorDescriptor
from gluonkit.runtime.launch import bind


@gluonkit.jit
def pipelined_gemm_kernel(a_desc, b_desc, c_ptr, M, N, K, stride_cm,
                          STAGES: gl.constexpr, acc_layout: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
    tile_bytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    k_tiles = gl.cdiv(K, BK)
    # Prologue: fill STAGES - 1 stages.
    for s in gl.static_range(STAGES - 1):
        issue = s < k_tiles
        mbarrier.expect(ready.index(s), tile_bytes, pred=issue)
        tma.async_load(a_desc, [off_m, s * BK], ready.index(s), a_smem.index(s), pred=issue)
        tma.async_load(b_desc, [s * BK, off_n], ready.index(s), b_smem.index(s), pred=issue)
    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    for k in range(k_tiles):
        stage = k % STAGES
        mbarrier.wait(ready.index(stage), (k // STAGES) & 1)
        # Issue this step's MMA and let it run while we wait for the previous one: after
        # the wait, at most one MMA (this one) is in flight, so the stage consumed one step
        # ago is free to refill with the slice STAGES - 1 ahead.
        acc = warpgroup_mma(a_smem.index(stage), b_smem.index(stage), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
        ahead = k + STAGES - 1
        refill = ahead % STAGES
        issue = ahead < k_tiles
        mbarrier.expect(ready.index(refill), tile_bytes, pred=issue)
        tma.async_load(a_desc, [off_m, ahead * BK], ready.index(refill), a_smem.index(refill),
                                        pred=issue)
        tma.async_load(b_desc, [ahead * BK, off_n], ready.index(refill), b_smem.index(refill),
                                        pred=issue)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
    rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    gl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def gemm(a, b, c, **config):
    """``c = a @ b`` (arrays or tensors, fp16/bf16 inputs); ``config`` as for :func:`prepare`."""
    return prepare(a, b, c, **config)()


def prepare(a, b, c, BM: int = 128, BN: int = 128, BK: int = 64, STAGES: int = 4, num_warps: int = 8):
    """A function of no arguments that computes ``c = a @ b``: descriptors, layouts and grid are
    built here once, and each call is one bound launch (:func:`gluonkit.runtime.launch.bind`).
    Time this, not :func:`gemm`, which also builds the descriptors and goes through the general
    launch path on every call: host time that a timing with CUDA events includes whenever it is
    longer than the GPU work queued before the launch."""
    M, K = a.shape
    N = b.shape[1]
    dtype = {"float16": gl.float16, "bfloat16": gl.bfloat16}[str(a.dtype).replace("torch.", "")]
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], gl.NVMMASharedLayout.get_default_for([BM, BK], dtype))
    b_desc = TensorDescriptor.from_tensor(b, [BK, BN], gl.NVMMASharedLayout.get_default_for([BK, BN], dtype))
    acc_layout = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, 16])
    stride = c.stride(0) if hasattr(c, "element_size") else c.strides[0] // c.itemsize
    grid = (gluonkit.cdiv(M, BM), gluonkit.cdiv(N, BN))
    launch = bind(pipelined_gemm_kernel, grid, (a_desc, b_desc, c, M, N, K, stride),
                  dict(STAGES=STAGES, acc_layout=acc_layout, num_warps=num_warps))

    def run():
        launch()
        return c
    return run


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from _device import arrays_for_device, full_size, to_numpy

    big = full_size()
    M, N, K = (4096, 4096, 4096) if big else (100, 72, 80)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((M, K)).astype(np.float16)
    b_np = rng.standard_normal((K, N)).astype(np.float16)
    a, b, c = arrays_for_device(a_np, b_np, np.full((M, N), np.nan, np.float32))
    if big:
        gemm(a, b, c)
    else:
        gemm(a, b, c, BM=64, BN=64, BK=32, STAGES=3, num_warps=4)
    ref = a_np.astype(np.float64) @ b_np.astype(np.float64)
    err = np.linalg.norm(to_numpy(c) - ref) / np.linalg.norm(ref)
    print(f"pipelined_gemm: {M}x{N}x{K} fp16, relative error {err:.2e}")
    assert err < 1e-3, err


if __name__ == "__main__":
    main()
