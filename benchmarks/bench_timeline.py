"""Measured timelines on the H100: what the instrumentation costs, and a picture of the WS GEMM.

For each case the plain kernel is timed (``timing.alternating``, L2 flushed, median of calls);
then the instrumented build runs under :func:`gluonkit.runtime.timeline.measure` a few times and
the kernel's span on its own clock (first warp's start to last warp's end, ``%globaltimer``) is
compared with the plain median.  The result of every instrumented run is checked against torch.
``--out DIR`` writes each case's Chrome trace (CTAs 0-1) and an SVG of CTA 0's first 8 µs.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_timeline.py [--out DIR]``.
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
from gluonkit.runtime.timeline import measuring  # noqa: E402

CASES = {  # name -> (M, N, K, prepare()'s configuration)
    "ws_gemm coop 8192^3": (8192, 8192, 8192, dict(BN=256, STAGES=4, EPILOGUE_SPLIT=2)),
    "ws_gemm pingpong 8192x8192x1024": (8192, 8192, 1024, dict(BN=128, STAGES=6, EPILOGUE_SPLIT=2, PINGPONG=True,
                                                              GROUP_M=8)),
}


def run_case(name, M, N, K, config, out_dir, repeats=5):
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    ref = (a.float() @ b.float()).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    run = ws_gemm.prepare(a, b, c, **config)
    plain_ms = alternating({"plain": run})[0]["plain"]
    spans, timeline = [], None
    for _ in range(repeats):
        c.fill_(float("nan"))
        with measuring(capacity=24576) as timelines:
            ws_gemm.prepare(a, b, c, **config)()
        timeline = timelines[-1]
        starts = [w.times[0] for w in timeline.warps]
        ends = [w.times[-1] for w in timeline.warps]
        spans.append((max(ends) - min(starts)) / 1e6)
        err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
        assert err < 1e-2, (name, err)
    span = statistics.median(spans)
    events = max(len(w.times) for w in timeline.warps)
    if out_dir:
        stem = os.path.join(out_dir, name.split()[0] + "_" + name.split()[1])
        timeline.save_chrome(stem + ".json", ctas=[0, 1])
        with open(stem + ".svg", "w") as f:  # CTA 0's first 8 microseconds: the pipeline filling up
            f.write(timeline.svg(ctas=[0], width=1400, end_ns=8000))
    waits = timeline.summary()
    print(f"{name:34} {plain_ms * 1e3:9.1f} {span * 1e3:9.1f} {100 * (span / plain_ms - 1):+7.1f}% "
          f"{events:7d} {'yes' if timeline.dropped else 'no':>7} {timeline.clock_ghz:5.2f}", flush=True)
    for part, kinds in sorted(waits.items()):
        text = ", ".join(f"{k} {v / 1e3:.0f} us" for k, v in sorted(kinds.items()))
        print(f"    {part:10} {text}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="directory for the traces and pictures")
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    print(f"device: {torch.cuda.get_device_name()}")
    print(f"{'case':34} {'plain us':>9} {'instr us':>9} {'cost':>8} {'ev/warp':>7} {'dropped':>7} {'GHz':>5}")
    for name, (M, N, K, config) in CASES.items():
        run_case(name, M, N, K, config, args.out)


if __name__ == "__main__":
    main()
