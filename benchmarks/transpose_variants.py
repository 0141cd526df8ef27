"""Transpose tile and warp variants beside Triton (a tuning aid; prints GB/s).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/transpose_variants.py``.
"""

import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))

from bench_memory import triton_transpose  # noqa: E402
from transpose import transpose  # noqa: E402

M = N = 8192
x = torch.randn(M, N, device="cuda")
out = torch.empty(N, M, device="cuda")
nbytes = 2 * M * N * 4
for bm, bn, warps, lanes in ((64, 64, 4, 4), (64, 64, 4, 16), (64, 64, 8, 16), (32, 32, 4, 8), (64, 64, 4, 8),
                             (128, 64, 8, 16), (64, 128, 8, 16), (32, 64, 4, 16)):
    out.fill_(float("nan"))
    transpose(x, out, BM=bm, BN=bn, num_warps=warps, lanes_along_rows=lanes)
    ok = torch.equal(out, x.t())
    ms = do_bench(lambda: transpose(x, out, BM=bm, BN=bn, num_warps=warps, lanes_along_rows=lanes),
                  return_mode="median")
    tr = do_bench(lambda: triton_transpose[(M // bm, N // bn)](out, x, M, N, BM=bm, BN=bn, num_warps=warps),
                  return_mode="median")
    print(f"tile {bm}x{bn} warps {warps} lanes along rows {lanes:2}: gluonkit {nbytes / ms / 1e6:6.0f} GB/s, "
          f"triton {nbytes / tr / 1e6:6.0f} GB/s, correct={ok}")
