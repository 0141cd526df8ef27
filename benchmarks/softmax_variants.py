"""Fused softmax over long rows (4096 × 16384) with 4–32 warps beside Triton's softmax with
8–32 warps and a device copy: GB/s, medians of calls alternating between the variants
(``timing.alternating``).

Shows where the chosen configuration (``softmax_config``: 16 warps for these rows) stands
against every warp count of both compilers when both run at the memory system's limit.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/softmax_variants.py``.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))

import gluonkit.language as gl  # noqa: E402
from bench_memory import triton_softmax  # noqa: E402
from fused_softmax import softmax_kernel  # noqa: E402
from timing import alternating  # noqa: E402

ROWS, COLS = 4096, 16384


def variants(x, out, out_triton):
    vec = 16 // x.element_size()
    fns = {}
    for warps in (4, 8, 16, 32):
        layout = gl.BlockedLayout([1, vec], [1, 32], [1, warps], [1, 0])
        fns[f"gluonkit w{warps}"] = lambda layout=layout, warps=warps: softmax_kernel[(ROWS,)](
            out, x, ROWS, COLS, COLS, COLS, ROWS=1, BLOCK=COLS, layout=layout, num_warps=warps)
    for warps in (8, 16, 32):
        fns[f"triton w{warps}"] = lambda warps=warps: triton_softmax[(ROWS,)](
            out_triton, x, COLS, COLS, COLS, BLOCK=COLS, num_warps=warps)
    fns["copy"] = lambda: out.copy_(x)
    return fns


def main():
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(ROWS, COLS, device="cuda", dtype=dtype)
        out, out_triton = torch.empty_like(x), torch.empty_like(x)
        fns = variants(x, out, out_triton)
        ref = torch.softmax(x.double(), dim=1)
        for name, fn in fns.items():
            if name.startswith("gluonkit"):
                out.fill_(float("nan"))
                fn()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                assert err < 1e-2, (name, err)
        medians, _ = alternating(fns)
        nbytes = 2 * x.numel() * x.element_size()
        print(str(dtype)[6:], " ".join(f"{k}: {nbytes / ms / 1e6:.0f}" for k, ms in medians.items()),
              flush=True)


if __name__ == "__main__":
    main()
