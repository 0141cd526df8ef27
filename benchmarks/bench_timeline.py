"""Measured timelines on the H100: what the instrumentation costs, per level, on the WS GEMMs.

For each case the plain kernel is timed (``timing.alternating``, L2 flushed, median of calls);
then the instrumented build of each level (:data:`gluonkit.lower.instrument.LEVELS`) runs under
:func:`gluonkit.runtime.timeline.measuring` a few times, and its span on its own clock (first
warp's start to last warp's end, ``%globaltimer``) is taken, median over the runs.  The span
leaves out the launch latency that the plain kernel's CUDA-event time includes, so the cost of
a level is given against the ``anchors`` build's span (a handful of records per warp: the same
clock, the same exclusions) and, for reference, against the plain time.  The result of every
instrumented run is checked against torch.  ``--out DIR`` writes each case's Chrome trace
(CTAs 0-1, the last level measured) and an SVG of CTA 0's first 8 µs.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_timeline.py [--out DIR] [--repeats N]
[--levels anchors,waits,all] [--only NAME] [--capacity N]``.
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.dirname(__file__))

import ws_gemm  # noqa: E402
from timing import alternating  # noqa: E402
from gluonkit.lower.instrument import LEVELS  # noqa: E402
from gluonkit.runtime.timeline import measuring  # noqa: E402

CASES = {  # name -> (M, N, K, prepare()'s configuration)
    "ws_gemm coop 8192^3": (8192, 8192, 8192, dict(BN=256, STAGES=4, EPILOGUE_SPLIT=2)),
    "ws_gemm pingpong 8192x8192x1024": (8192, 8192, 1024, dict(BN=128, STAGES=6, EPILOGUE_SPLIT=2, PINGPONG=True,
                                                              GROUP_M=8)),
}
CAPACITY = 24576  # entries per warp: enough for the coop case at level "all"


def measured_span(run, c, ref, name, events, repeats, capacity):
    """Median span (ms) of ``repeats`` instrumented runs at level ``events``, and the last timeline."""
    spans, timeline = [], None
    for _ in range(repeats):
        c.fill_(float("nan"))
        with measuring(capacity=capacity, events=events) as timelines:
            run()
        timeline = timelines[-1]
        spans.append((max(w.times[-1] for w in timeline.warps) - min(w.times[0] for w in timeline.warps)) / 1e6)
        err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
        assert err < 1e-2, (name, events, err)
    return statistics.median(spans), timeline


def run_case(name, M, N, K, config, out_dir, repeats, levels, capacity=CAPACITY):
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    ref = (a.float() @ b.float()).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    run = ws_gemm.prepare(a, b, c, **config)
    plain_ms = alternating({"plain": run}, samples=30)[0]["plain"]
    print(f"{name}: plain {plain_ms * 1e3:.1f} us (CUDA events)", flush=True)
    spans, timelines = {}, {}
    for level in levels:  # printed as measured, so that a run cut short keeps its first levels
        spans[level], timelines[level] = measured_span(run, c, ref, name, level, repeats, capacity)
        span, base, timeline = spans[level], spans[levels[0]], timelines[level]
        print(f"    {level:8} {span * 1e3:7.1f} us  {100 * (span / base - 1):+5.1f}% vs {levels[0]}  "
              f"{100 * (span / plain_ms - 1):+5.1f}% vs plain  {max(len(w.times) for w in timeline.warps)} ev/warp  "
              f"{timeline.clock_ghz:.2f} GHz{'  DROPPED' if timeline.dropped else ''}", flush=True)
    full = timelines[levels[-1]]
    for part, kinds in sorted(full.summary().items()):
        text = ", ".join(f"{k} {v / 1e3:.0f} us" for k, v in sorted(kinds.items()))
        print(f"    {levels[-1]}: {part:10} {text}")
    if out_dir:
        stem = os.path.join(out_dir, name.split()[0] + "_" + name.split()[1])
        full.save_chrome(stem + ".json", ctas=[0, 1])
        with open(stem + ".svg", "w") as f:  # CTA 0's first 8 microseconds: the pipeline filling up
            f.write(full.svg(ctas=[0], width=1400, end_ns=8000))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="directory for the traces and pictures")
    parser.add_argument("--repeats", type=int, default=3, help="instrumented runs per level (median span)")
    parser.add_argument("--only", default="", help="measure only the cases whose name contains this")
    parser.add_argument("--levels", default=",".join(LEVELS), help="levels to measure, 'anchors' first")
    parser.add_argument("--capacity", type=int, default=CAPACITY,
                        help="entries per warp (a smaller buffer decodes faster; DROPPED says when it was too small)")
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    print(f"device: {torch.cuda.get_device_name()}; cost = span / span of the 'anchors' build - 1")
    for name, (M, N, K, config) in CASES.items():
        if args.only not in name:
            continue
        run_case(name, M, N, K, config, args.out, args.repeats, args.levels.split(","), args.capacity)


if __name__ == "__main__":
    main()
