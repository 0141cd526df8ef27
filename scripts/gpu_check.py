"""Everything to run on a GPU machine, in one call: the GPU tests, the examples on the GPU,
and the benchmarks (memory-bound kernels, then GEMMs); ends with the benchmark tables.

Run from the repository root:
``PYTHONPATH=$PWD python scripts/gpu_check.py [--no-bench | --only-gemm-bench | --only-memory-bench]``.
"""

import os
import subprocess
import sys


def run(cmd, env=None) -> int:
    print(f"\n$ {' '.join(cmd)}", flush=True)
    return subprocess.call(cmd, env={**os.environ, **(env or {})})


def main() -> int:
    failures = 0
    failures += run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", "tests"]) != 0
    for example in ("vector_add", "fused_softmax", "transpose", "cross_entropy", "persistent_gemm/pipelined_gemm",
                    "persistent_gemm/persistent_gemm", "warp_specialized/producer_consumer",
                    "warp_specialized/ws_gemm"):
        failures += run([sys.executable, f"examples/{example}.py"]) != 0
    if "--no-bench" not in sys.argv and "--only-gemm-bench" not in sys.argv:
        failures += run([sys.executable, "benchmarks/bench_memory.py"]) != 0
    if "--no-bench" not in sys.argv and "--only-memory-bench" not in sys.argv:
        failures += run([sys.executable, "benchmarks/bench_gemm.py"]) != 0
    print(f"\ngpu_check: {failures} step(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
