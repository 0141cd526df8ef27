"""Which kernels cuBLAS runs for ``torch.matmul`` on given GEMM shapes (bf16), from torch.profiler.

The names say the tile, cluster shape and stage count cuBLAS chose (e.g.
``nvjet_sm90_tst_320x128_64x3_1x2``: 320 × 128 tiles, K-slices of 64, 3 stages, a 1 × 2
cluster), which is what the WS GEMM's configurations are compared against.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/cublas_kernels.py --shapes 3000x5000x2000``.
"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile


def kernels(M: int, N: int, K: int, dtype=torch.bfloat16) -> list:
    """``(name, calls, mean µs)`` of the CUDA kernels of 5 calls of ``torch.matmul`` on the shape."""
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            torch.matmul(a, b)
        torch.cuda.synchronize()
    return [(e.key, e.count, e.device_time_total / e.count) for e in prof.key_averages() if e.device_time_total > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="8192x8192x8192,3000x5000x2000")
    args = parser.parse_args()
    for text in args.shapes.split(","):
        M, N, K = map(int, text.split("x"))
        for name, count, us in kernels(M, N, K):
            print(f"{M}x{N}x{K}: {name} x{count} {us:.1f} us ({2 * M * N * K / us / 1e6:.0f} TFLOP/s)")


if __name__ == "__main__":
    main()
