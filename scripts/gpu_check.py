"""Everything to run on a GPU machine, in one call: the GPU tests, the examples on the GPU,
and the benchmarks (memory-bound kernels, GEMMs, the warp-specialized GEMM, attention, the
launch path); ends with a table of what passed and failed.

Run from the repository root:
``PYTHONPATH=$PWD python scripts/gpu_check.py [--jobs N] [--no-bench | --only-gemm-bench | --only-memory-bench]``.

``--jobs N`` (default 8) runs the GPU test files in N pytest processes at once: most of a
GPU test's time is compiling kernels on the host, and one process ran past the device
tool's 10-minute limit; the processes only share the GPU for short correctness launches
(the benchmarks, which time kernels, run alone afterwards).
"""

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = ("vector_add", "fused_softmax", "transpose", "cross_entropy", "persistent_gemm/pipelined_gemm",
            "persistent_gemm/persistent_gemm", "warp_specialized/producer_consumer", "warp_specialized/ws_gemm",
            "warp_specialized/ws_gemm_fp8", "attention/flash_attention")
MEMORY_BENCHMARKS = ("benchmarks/bench_memory.py",)
GEMM_BENCHMARKS = ("benchmarks/bench_gemm.py", "benchmarks/bench_ws_gemm.py", "benchmarks/bench_attention.py",
                   "benchmarks/bench_launch.py")


def run(cmd, env=None) -> int:
    print(f"\n$ {' '.join(cmd)}", flush=True)
    return subprocess.call(cmd, env={**os.environ, **(env or {})})


def gpu_test_files() -> list:
    """The test files with a ``gpu``-marked test."""
    return sorted(str(p) for p in Path("tests").glob("test_*.py") if "mark.gpu" in p.read_text())


def run_tests_in_parallel(jobs: int) -> dict:
    """pytest -m gpu over the GPU test files in ``jobs`` processes; each group's exit code."""
    files = gpu_test_files()
    groups = [files[i::jobs] for i in range(jobs) if files[i::jobs]]
    procs = []
    for group in groups:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu", *group]
        procs.append((group, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    results = {}
    for group, proc in procs:
        out, _ = proc.communicate()
        summary = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))] + out.splitlines()[-1:]
        print(f"\n== {' '.join(Path(f).name for f in group)}\n" + "\n".join(summary), flush=True)
        results[f"GPU tests ({len(group)} files, from {Path(group[0]).name})"] = proc.returncode
    return results


def main() -> int:
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 8
    results = run_tests_in_parallel(jobs)
    for example in EXAMPLES:
        results[f"examples/{example}.py"] = run([sys.executable, f"examples/{example}.py"])
    benchmarks = []
    if "--no-bench" not in sys.argv and "--only-gemm-bench" not in sys.argv:
        benchmarks += MEMORY_BENCHMARKS
    if "--no-bench" not in sys.argv and "--only-memory-bench" not in sys.argv:
        benchmarks += GEMM_BENCHMARKS
    for bench in benchmarks:
        results[bench] = run([sys.executable, bench])
    print("\nstep" + " " * 66 + "result")
    for step, code in results.items():
        print(f"{step:<70}{'ok' if code == 0 else f'FAILED (exit {code})'}")
    failures = sum(code != 0 for code in results.values())
    print(f"\ngpu_check: {failures} step(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
