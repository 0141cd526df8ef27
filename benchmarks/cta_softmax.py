"""Row softmax with each row split over a cluster of CTAs (Gluon tutorial 14's shapes and
configurations: 4 warps, 2-16 CTAs; and the same with 8 warps) beside ``torch.softmax`` and a
device copy: GB/s (bytes read + written), medians of calls alternating between the variants
(``timing.alternating``).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/cta_softmax.py [samples]``.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
sys.path.insert(0, os.path.dirname(__file__))

from cta_reduce_kernels import row_softmax, split_1d  # noqa: E402
from timing import alternating  # noqa: E402

# (rows, columns, CTAs per row): tutorial 14's benchmark from the first multi-CTA shape on, and one row per CTA
SHAPES = [(2**15, 2**14, 1), (2**15, 2**15, 2), (2**15, 2**16, 4), (2**14, 2**17, 8), (2**13, 2**18, 16)]


def main(samples: int = 20):
    print(f"{'shape':>16} CTAs  gluonkit GB/s  8 warps  torch GB/s  copy GB/s  max |err|")
    for rows, cols, ctas in SHAPES:
        x = torch.empty((rows, cols), device="cuda").uniform_(-1, 1)
        out, out_torch = torch.empty_like(x), torch.empty_like(x)  # out_torch: the copy's destination
        layout, layout8 = split_1d(ctas), split_1d(ctas, num_warps=8)
        fns = {
            "gluonkit": lambda: row_softmax[(rows,)](x, out, cols, layout, num_ctas=ctas),
            "8 warps": lambda: row_softmax[(rows,)](x, out, cols, layout8, num_ctas=ctas, num_warps=8),
            "torch": lambda: torch.softmax(x, dim=1),
            "copy": lambda: out_torch.copy_(x),
        }
        out.fill_(float("nan"))
        fns["gluonkit"]()
        err = (out - torch.softmax(x, dim=1)).abs().max().item()
        medians, _ = alternating(fns, samples)
        nbytes = 2 * x.numel() * x.element_size()
        rates = [nbytes / medians[name] / 1e6 for name in ("gluonkit", "8 warps", "torch", "copy")]
        print(f"{rows:>6} x {cols:<7} {ctas:>4}  {rates[0]:>13.0f}  {rates[1]:>7.0f}  {rates[2]:>10.0f}  "
              f"{rates[3]:>9.0f}  {err:.1e}", flush=True)
        del x, out, out_torch


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
