"""GEMM TFLOP/s: gluonkit's pipelined Hopper GEMM beside cuBLAS (torch.matmul) and Triton.

Each gluonkit result is checked against torch in float64-free fp32 (relative error) with the
output poisoned first.  Columns are medians over interleaved rounds of do_bench medians.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_gemm.py``.
"""

import os
import statistics
import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))

from pipelined_gemm import gemm  # noqa: E402

ROUNDS = 3


@triton.jit
def triton_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def bench(M, N, K, dtype):
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda")
    gemm(a, b, c)
    ref = (a.float() @ b.float())
    err = ((c - ref).norm() / ref.norm()).item()
    c2 = torch.empty(M, N, device="cuda")
    fns = dict(
        gluonkit=lambda: gemm(a, b, c),
        cublas=lambda: torch.matmul(a, b),
        triton=lambda: triton_matmul[(triton.cdiv(M, 128), triton.cdiv(N, 128))](a, b, c2, M, N, K, BM=128, BN=128,
                                                                                 BK=64, num_warps=8, num_stages=4),
    )
    times = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for k, fn in fns.items():
            times[k].append(do_bench(fn, return_mode="median"))
    flops = 2 * M * N * K
    tf = {k: flops / statistics.median(v) / 1e9 for k, v in times.items()}
    print(f"{M}x{N}x{K} {str(dtype)[6:]:9} gluonkit {tf['gluonkit']:6.0f}  cublas {tf['cublas']:6.0f}  "
          f"triton {tf['triton']:6.0f}  gk/cublas {tf['gluonkit'] / tf['cublas']:.3f}  gk/triton "
          f"{tf['gluonkit'] / tf['triton']:.3f}  rel.err {err:.1e}")


def main():
    print(f"device: {torch.cuda.get_device_name()}; TFLOP/s, median of {ROUNDS} interleaved rounds")
    for shape in ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 512), (4000, 3000, 1000)):
        for dtype in (torch.float16, torch.bfloat16):
            bench(*shape, dtype)


if __name__ == "__main__":
    main()
