"""Cold compile of the warp-specialized GEMM: a fresh Python process with an empty
``GLUONKIT_CACHE_DIR`` imports gluonkit and ``ws_gemm`` and compiles the cooperative kernel to
a cubin for sm_90a (no GPU needed), timing each phase.

Run: ``PYTHONPATH=$PWD python benchmarks/ws_gemm_cold_compile.py`` (``--profile`` adds the
compile's cProfile, top functions by own time).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, "examples/warp_specialized")
import gluonkit.lower.compiler as compiler
import gluonkit.runtime.inspect_compile as inspect_compile
import ws_gemm
t1 = time.perf_counter()
phases = {"llvm": 0.0, "ptxas": 0.0, "sass": 0.0}
def timed(fn, phase):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[phase] += time.perf_counter() - start
    return wrapper
compiler.emit_ptx = timed(compiler.emit_ptx, "llvm")
compiler.assemble = timed(compiler.assemble, "ptxas")
inspect_compile.disassemble = timed(inspect_compile.disassemble, "sass")  # kernel.compile's SASS listing only
profile = sys.argv[1] == "1"
if profile:
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
t2 = time.perf_counter()
ws_gemm.compile_ahead("sm_90a")
t3 = time.perf_counter()
if profile:
    import pstats
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(45)
print(json.dumps(dict(imports=t1 - t0, compile=t3 - t2, **phases)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, GLUONKIT_CACHE_DIR=cache)
            out = subprocess.run([sys.executable, "-c", _CHILD, "1" if args.profile else "0"], env=env,
                                 check=True, capture_output=True, text=True)
        if args.profile:
            print(out.stderr)
        t = json.loads(out.stdout)
        total = t["compile"] - t["sass"]
        python = total - t["llvm"] - t["ptxas"]
        print(f"cold compile (cooperative 128x256, sm_90a) to a cubin: {1e3 * total:.0f} ms = python "
              f"{1e3 * python:.0f} + LLVM {1e3 * t['llvm']:.0f} + ptxas {1e3 * t['ptxas']:.0f} "
              f"(imports before it {1e3 * t['imports']:.0f} ms)", flush=True)


if __name__ == "__main__":
    main()
