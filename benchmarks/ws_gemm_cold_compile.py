"""Cold compile of the warp-specialized GEMM: a fresh Python process with an empty
``GLUONKIT_CACHE_DIR`` imports gluonkit and ``ws_gemm`` and compiles the cooperative kernel to
a cubin for sm_90a (no GPU needed), timing each phase in wall-clock time and in CPU time (this
process's, and ptxas's as a finished child: on a shared machine CPU time moves less than
wall-clock time); the last line gives the medians over the runs.

Run: ``PYTHONPATH=$PWD python benchmarks/ws_gemm_cold_compile.py`` (``--profile`` adds the
compile's cProfile, top functions by own time).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, resource, sys, time
def cpu():  # this process's CPU seconds and its finished children's (ptxas)
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime
t0, c0 = time.perf_counter(), cpu()
sys.path.insert(0, "examples/warp_specialized")
import gluonkit.lower.compiler as compiler
import gluonkit.runtime.inspect_compile as inspect_compile
import ws_gemm
t1, c1 = time.perf_counter(), cpu()
phases = {"llvm": 0.0, "ptxas": 0.0, "sass": 0.0}
cpu_phases = {"llvm": 0.0, "ptxas": 0.0, "sass": 0.0}
def timed(fn, phase, child):
    def wrapper(*args, **kwargs):
        start, cstart = time.perf_counter(), cpu()[child]
        try:
            return fn(*args, **kwargs)
        finally:
            phases[phase] += time.perf_counter() - start
            cpu_phases[phase] += cpu()[child] - cstart
    return wrapper
compiler.emit_ptx = timed(compiler.emit_ptx, "llvm", 0)
compiler.assemble = timed(compiler.assemble, "ptxas", 1)
inspect_compile.disassemble = timed(inspect_compile.disassemble, "sass", 1)  # kernel.compile's SASS listing only
profile = sys.argv[1] == "1"
if profile:
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
t2, c2 = time.perf_counter(), cpu()
ws_gemm.compile_ahead("sm_90a")
t3, c3 = time.perf_counter(), cpu()
if profile:
    import pstats
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(45)
print(json.dumps(dict(wall=dict(imports=t1 - t0, compile=t3 - t2, **phases),
                      cpu=dict(imports=c1[0] - c0[0], compile=(c3[0] - c2[0]) + (c3[1] - c2[1]), **cpu_phases))))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, GLUONKIT_CACHE_DIR=cache)
            out = subprocess.run([sys.executable, "-c", _CHILD, "1" if args.profile else "0"], env=env,
                                 check=True, capture_output=True, text=True)
        if args.profile:
            print(out.stderr)
        runs.append(json.loads(out.stdout))
        print("cold compile (cooperative 128x256, sm_90a) to a cubin: " + _summary(runs[-1]), flush=True)
    if len(runs) > 1:
        medians = {clock: {k: statistics.median(r[clock][k] for r in runs) for k in runs[0][clock]}
                   for clock in ("wall", "cpu")}
        print(f"median of {len(runs)}: " + _summary(medians), flush=True)


def _summary(times: dict) -> str:
    """One run's (or the medians') phases in ms, wall-clock and CPU."""
    parts = []
    for clock in ("wall", "cpu"):
        t = times[clock]
        total = t["compile"] - t["sass"]
        python = total - t["llvm"] - t["ptxas"]
        parts.append(f"{clock} {1e3 * total:.0f} ms = python {1e3 * python:.0f} + LLVM {1e3 * t['llvm']:.0f} + "
                     f"ptxas {1e3 * t['ptxas']:.0f} (imports before it {1e3 * t['imports']:.0f} ms)")
    return "; ".join(parts)


if __name__ == "__main__":
    main()
