"""Where the warps of the WS GEMM wait, by CTA rank in the cluster: one measured launch each of
the one-CTA cooperative kernel and its ``CLUSTER_M=2`` form (``gluonkit.runtime.timeline``,
``events="waits"``), each wait's total per warp by (partition, rank, source line), as a share
of the warps' span.  Written to see why the 2-CTA kernel measured 0.68× cuBLAS at 8192³
where the one-CTA one is at 1.0× (docs/ws_gemm.rst).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/cluster_waits.py [MxNxK]``.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import ws_gemm  # noqa: E402
from gluonkit.runtime.timeline import measuring  # noqa: E402

CONFIGS = {"coop 128x256": dict(BN=256, STAGES=4), "mc2 coop 2x128x256": dict(BN=256, STAGES=4, CLUSTER_M=2)}


def waits(timeline, ranks: int) -> dict:
    """``(partition, rank, kind, line) -> mean ns per warp`` and the mean span per (partition, rank)."""
    totals, spans, warps = {}, {}, {}
    for w in timeline.warps:
        group = (timeline.partition_of(w.warp), w.cta % ranks)
        warps[group] = warps.get(group, 0) + 1
        spans[group] = spans.get(group, 0.0) + float(w.times[-1] - w.times[0])
        for s in timeline.slices(w):
            key = group + (s.kind, s.info.get("line"))
            totals[key] = totals.get(key, 0.0) + s.end - s.start
    return ({k: v / warps[k[:2]] for k, v in totals.items()}, {g: spans[g] / warps[g] for g in spans})


def main() -> None:
    M, N, K = map(int, (sys.argv[1] if len(sys.argv) > 1 else "8192x8192x8192").split("x"))
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    for name, cfg in CONFIGS.items():
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        run = ws_gemm.prepare(a, b, c, **cfg)
        run()
        with measuring() as timelines:
            run()
        torch.cuda.synchronize()
        per_line, spans = waits(timelines[-1], cfg.get("CLUSTER_M", 1))
        print(f"{name} {M}x{N}x{K}:")
        for group, span in sorted(spans.items()):
            rows = sorted(((ns, k) for k, ns in per_line.items() if k[:2] == group), reverse=True)[:4]
            text = ", ".join(f"{kind} line {line} {100 * ns / span:.0f}%" for ns, (_, _, kind, line) in rows)
            print(f"  {group[0]:9} rank {group[1]}: span {span / 1e3:7.1f} us; {text}")


if __name__ == "__main__":
    main()
