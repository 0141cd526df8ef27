"""Which operand's row stride slows the TMA GEMMs down: A, B or C given a row stride that is an
odd multiple of 16 bytes (not of 32), one at a time, on an otherwise aligned 3072 × 5120 × 2048
bf16 product.

Each operand is a column slice of a wider tensor (8 extra elements per row), so only its row
stride changes; the warp-specialized GEMM (cooperative) and cuBLAS get the same views.  Timing
as in ``bench_ws_gemm.py`` (alternating calls, L2 flush, medians).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/ws_gemm_stride_probe.py``.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.dirname(__file__))

import ws_gemm  # noqa: E402
from bench_gemm import _checked  # noqa: E402
from bench_ws_gemm import COOPERATIVE  # noqa: E402
from timing import alternating  # noqa: E402

PAD = 8  # elements: 16 bytes of bf16, so the padded row stride is 16 mod 32 bytes


def _matrix(rows: int, cols: int, padded: bool, fill: bool) -> torch.Tensor:
    """A ``rows × cols`` bf16 matrix; with ``padded``, a slice of a ``rows × (cols + PAD)`` one."""
    full = torch.empty(rows, cols + (PAD if padded else 0), device="cuda", dtype=torch.bfloat16)
    if fill:
        full.normal_()
    return full[:, :cols]


def main(M: int = 3072, N: int = 5120, K: int = 2048) -> None:
    print(f"device: {torch.cuda.get_device_name()}; {M}x{N}x{K} bf16, one operand's row stride + {PAD} elements")
    for which in ("none", "A", "B", "C"):
        a = _matrix(M, K, which == "A", True)
        b = _matrix(K, N, which == "B", True)
        c = _matrix(M, N, which == "C", False)
        ref = a.float() @ b.float()
        fns = dict(ws=ws_gemm.prepare(a, b, c, **COOPERATIVE), cublas=lambda: torch.matmul(a, b))
        _checked(fns["ws"], c, ref, "ws")
        ms, _ = alternating(fns)
        tf = {k: 2 * M * N * K / v / 1e9 for k, v in ms.items()}
        print(f"  padded {which:4}: ws {tf['ws']:6.0f}  cublas {tf['cublas']:6.0f} TFLOP/s  "
              f"ws/cuB {tf['ws'] / tf['cublas']:.3f}", flush=True)


if __name__ == "__main__":
    main()
