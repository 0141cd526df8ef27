"""Run every example under NVIDIA compute-sanitizer and print a table tool x example.

Each example runs on the GPU at its small (interpreter) size (``GLUONKIT_EXAMPLE_SMALL=1``),
once per tool: memcheck (out-of-bounds and misaligned accesses), racecheck (shared-memory
hazards), synccheck (barrier misuse) and initcheck (reads of uninitialised global memory).
A cell says ``clean`` or the error summary with the first reported lines.  Runs go in parallel
(one GPU, several processes) and each prints a line as it ends, so a run cut short by
``--budget`` still reports what finished; exits 1 when any cell is not clean.

Run from the repository root on a GPU machine:
``PYTHONPATH=$PWD python scripts/sanitize_examples.py [--tools memcheck,racecheck] [--examples vector_add,...]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
EXAMPLES = ("vector_add", "fused_softmax", "transpose", "cross_entropy", "persistent_gemm/pipelined_gemm",
            "persistent_gemm/persistent_gemm", "warp_specialized/producer_consumer", "warp_specialized/ws_gemm")
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: (\d+) hazard")
# cuda-python's driver bindings ask the driver for every entry point they know at import; the
# ones this driver lacks return CUDA_ERROR_INVALID_VALUE, which memcheck reports as API errors
# (34 of them with driver 580 and cuda-python 13, the same in every example).  They are not
# the examples' errors: a cuGetProcAddress error whose caller (the first host frame of its
# backtrace) is cuda-python's binding module is counted apart and shown in the cell, never as a
# finding; a failed lookup from anywhere else is a finding.
_LOOKUP = re.compile(r"^={9} Program hit CUDA_ERROR_\w+ .* on CUDA API call to cuGetProcAddress")
_CUDA_PYTHON_FRAME = re.compile(r"Host Frame:.*\bin (cy)?driver\.cpython|cuda/bindings/")


def is_cuda_python_lookup(block: str) -> bool:
    """Whether one memcheck report (a headline and its indented lines) is a failed entry-point
    lookup made by cuda-python itself: a ``cuGetProcAddress`` error called from its bindings
    (or with no backtrace, as older compute-sanitizers print)."""
    if not _LOOKUP.match(block):
        return False
    frames = [line for line in block.splitlines() if "Host Frame:" in line]
    return not frames or bool(_CUDA_PYTHON_FRAME.search(frames[0]))


def find_sanitizer() -> str:
    """Path of compute-sanitizer: ``PATH`` first, then the CUDA toolkit's usual places."""
    for candidate in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer",
                      "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("sanitize_examples: compute-sanitizer not found on PATH nor under /usr/local/cuda")


def run_one(sanitizer: str, tool: str, example: str, timeout: float) -> tuple[str, float, str]:
    """Run ``example`` under ``tool``; returns (verdict, seconds, first lines of findings)."""
    if timeout <= 0:
        return "not run", 0.0, "the --budget ran out before it started"
    cmd = [sanitizer, "--tool", tool, "--error-exitcode", "86"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "hazard"]
    cmd += [sys.executable, f"examples/{example}.py"]
    env = {**os.environ, "GLUONKIT_EXAMPLE_SMALL": "1"}
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start, f"no result within {timeout:.0f} s"
    seconds = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    # One report is a headline "========= X" and its indented "=========     ..." lines.
    marked = "\n".join(line for line in out.splitlines() if line.startswith("=" * 9))
    blocks = [b for b in re.split(r"\n(?=={9} \S)", marked)
              if b and not re.match(r"=+ (\w+ SUMMARY|COMPUTE-SANITIZER)", b)]
    lookups = sum(map(is_cuda_python_lookup, blocks))
    findings = [b for b in blocks if not is_cuda_python_lookup(b)]
    errors = sum(int(a or b) for a, b in _SUMMARY.findall(out)) - lookups
    noise = f" (+{lookups} cuda-python lookups)" if lookups else ""
    if "Traceback (most recent call last)" in out or proc.returncode not in (0, 86):
        tail = [line for line in out.splitlines() if line.strip() and not line.startswith("=========")][-4:]
        return f"failed (exit {proc.returncode})", seconds, "\n".join(tail)
    if errors > 0:
        return f"{errors} error(s){noise}", seconds, "\n".join("\n".join(findings).splitlines()[:6])
    return "clean" + noise, seconds, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--jobs", type=int, default=4, help="sanitizer processes at once")
    parser.add_argument("--timeout", type=float, default=100.0, help="seconds per run")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for everything")
    args = parser.parse_args()
    tools, examples = args.tools.split(","), args.examples.split(",")
    sanitizer = find_sanitizer()
    version = subprocess.run([sanitizer, "--version"], capture_output=True, text=True).stdout.split("\n")
    print(f"{sanitizer}: {' '.join(line for line in version if 'Version' in line).strip()}")
    jobs = [(tool, example) for tool in tools for example in examples]
    deadline = time.monotonic() + args.budget

    def job(tool: str, example: str):
        return run_one(sanitizer, tool, example, min(args.timeout, deadline - time.monotonic()))

    results = {}
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(job, *j): j for j in jobs}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            (tool, example), (verdict, seconds, _) = futures[future], future.result()
            print(f"  {tool:<10} {example:<36} {verdict} ({seconds:.0f} s)", flush=True)
    width = max(len(e) for e in examples)
    print(f"\n{'example':<{width}}  " + "  ".join(f"{t:<22}" for t in tools))
    for example in examples:
        cells = [f"{results[t, example][0]} {results[t, example][1]:.0f}s" for t in tools]
        print(f"{example:<{width}}  " + "  ".join(f"{c:<22}" for c in cells))
    dirty = [(job, r) for job, r in results.items() if not r[0].startswith("clean")]
    for (tool, example), (verdict, _, detail) in dirty:
        print(f"\n--- {tool} {example}: {verdict}\n{detail}")
    print(f"\nsanitize_examples: {len(jobs) - len(dirty)}/{len(jobs)} clean")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
