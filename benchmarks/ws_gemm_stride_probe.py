"""Row strides that are an odd multiple of 16 bytes (not of 32) slow the TMA GEMMs down: which
operand suffers, and which B-side fix helps.

Part 1 (``--which``): A, B or C gets such a stride, one at a time, on an otherwise aligned
3072 × 5120 × 2048 bf16 product (each operand is a column slice of a tensor 8 elements wider,
so only its row stride changes).  Part 2 (``--fixes``): with B's stride odd, the candidate
fixes beside the cooperative kernel and cuBLAS: B's block issued as narrower TMA boxes
(``B_SWIZZLE`` 64 or 32 bytes), 256 × 128 tiles (half the B bytes per K-slice), a padded
copy of B to a 32-byte-multiple stride made on every call (timed with the GEMM), and the
tensor maps' L2 promotion (``gluonkit.runtime.tma.L2_PROMOTION``; 128 bytes by default).  Timing as
in ``bench_ws_gemm.py`` (alternating calls, L2 flush, medians).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/ws_gemm_stride_probe.py [--which] [--fixes]``
(both parts by default; ``--shape MxNxK`` for part 2's product, ragged N by default).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.dirname(__file__))

import ws_gemm  # noqa: E402
from gluonkit.runtime import tma  # noqa: E402
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


def _report(label: str, flops: float, ms: dict) -> None:
    for name, t in ms.items():
        if name != "cublas":
            print(f"  {label:10} {name:18}: {flops / t / 1e9:6.0f} TFLOP/s  ws/cuB {ms['cublas'] / t:.3f}", flush=True)
    print(f"  {label:10} {'cublas':18}: {flops / ms['cublas'] / 1e9:6.0f} TFLOP/s", flush=True)


def which_operand(M: int = 3072, N: int = 5120, K: int = 2048) -> None:
    print(f"{M}x{N}x{K} bf16, one operand's row stride + {PAD} elements (cooperative)")
    for which in ("none", "A", "B", "C"):
        a = _matrix(M, K, which == "A", True)
        b = _matrix(K, N, which == "B", True)
        c = _matrix(M, N, which == "C", False)
        ref = a.float() @ b.float()
        fns = dict(ws=ws_gemm.prepare(a, b, c, **COOPERATIVE), cublas=lambda: torch.matmul(a, b))
        _checked(fns["ws"], c, ref, "ws")
        _report(f"padded {which}", 2 * M * N * K, alternating(fns)[0])


def fixes(M: int, N: int, K: int, pad_b: bool) -> None:
    a = _matrix(M, K, False, True)
    b = _matrix(K, N, pad_b, True)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    print(f"{M}x{N}x{K} bf16, B's row stride {b.stride(0) * 2} bytes ({b.stride(0) * 2 % 32} mod 32)")
    ref = a.float() @ b.float()
    fns = {"coop": ws_gemm.prepare(a, b, c, **COOPERATIVE),
           "coop B_SWIZZLE=64": ws_gemm.prepare(a, b, c, **COOPERATIVE, B_SWIZZLE=64),
           "coop B_SWIZZLE=32": ws_gemm.prepare(a, b, c, **COOPERATIVE, B_SWIZZLE=32),
           "coop 256x128": ws_gemm.prepare(a, b, c, BM=256, BN=128, STAGES=4, GROUP_M=8),
           "coop PAD_B": ws_gemm.prepare(a, b, c, **COOPERATIVE, PAD_B=True)}
    for promotion in ("L2_256B", "L2_64B", "NONE"):  # encoded at the first call, which _checked makes
        tma.L2_PROMOTION = promotion
        fns[f"coop {promotion}"] = ws_gemm.prepare(a, b, c, **COOPERATIVE)
        _checked(fns[f"coop {promotion}"], c, ref, promotion)
    tma.L2_PROMOTION = "L2_128B"
    for name, fn in fns.items():
        _checked(fn, c, ref, name)
    fns["cublas"] = lambda: torch.matmul(a, b)
    _report("fix", 2 * M * N * K, alternating(fns)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--which", action="store_true", help="part 1 only")
    parser.add_argument("--fixes", action="store_true", help="part 2 only")
    parser.add_argument("--shape", default="3000x5000x2000", help="part 2's product (its own strides)")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}")
    if args.which or not args.fixes:
        which_operand()
    if args.fixes or not args.which:
        fixes(3072, 5120, 2048, True)
        fixes(*map(int, args.shape.split("x")), False)


if __name__ == "__main__":
    main()
