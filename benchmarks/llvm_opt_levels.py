"""Does LLVM's IR pass pipeline change the WS GEMM's speed?  (Evidence for the compile-time choice.)

For each IR pipeline of :func:`gluonkit.lower.backend.nvptx.emit_ptx` (``--pipelines``, default
``O3,light``: LLVM's O3, the default, and instcombine + simplifycfg; ``O1``, ``O2``, ``none``
too) and each shape (``--shapes``), a fresh process with an empty ``GLUONKIT_CACHE_DIR``
compiles the warp-specialized GEMM through the ordinary launch path with that pipeline, checks
the result against torch, and times it with ``gluonkit.runtime.bench.do_bench``.  ``--rounds``
repeats the pipelines in turn, so that a drift of the GPU's clock hits each alike.  Printed per
pipeline and kernel: registers, spills, the LLVM stage's time and TFLOP/s.

Run on the H100: ``PYTHONPATH=$PWD python benchmarks/llvm_opt_levels.py``.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import functools, json, sys, time
sys.path.insert(0, "examples/warp_specialized")
pipeline, shape = sys.argv[1], [int(x) for x in sys.argv[2].split("x")]
kinds = [(k, k) for k in sys.argv[3].split(",")]
import torch
import gluonkit.lower.compiler as compiler
from gluonkit.lower.backend import nvptx
spent = [0.0]
def emit(module, target):
    start = time.perf_counter()
    try:
        return nvptx.emit_ptx(module, target, pipeline)
    finally:
        spent[0] += time.perf_counter() - start
compiler.emit_ptx = emit
import ws_gemm
from gluonkit.runtime import bench, gpu
M, N, K = shape
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
out = {}
for name, kind in kinds:
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    run = ws_gemm.prepare(a, b, c, **ws_gemm._variant(kind, 2))
    run()
    torch.cuda.synchronize()
    rows = slice(0, 256)  # the check: a band of rows against a float32 reference
    reference = a[rows].float() @ b.float()
    error = ((c[rows].float() - reference).abs().max() / reference.abs().max()).item()
    ms = bench.do_bench(run, warmup=10, rep=40)
    entry = [e for launches in gpu._launches.values() for e in launches.values()][-1]
    out[name] = dict(tflops=2 * M * N * K / ms / 1e9, error=error, regs=entry.compiled.metadata["registers"],
                     spills=entry.compiled.metadata["spill_stores"], llvm_ms=spent[0] * 1e3)
    spent[0] = 0.0
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", default="O3,light")
    parser.add_argument("--shapes", default="8192x8192x8192", help="comma-separated MxNxK")
    parser.add_argument("--kernels", default="coop,pingpong", help="ws_gemm._variant kinds")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print("WS GEMM bf16 per LLVM IR pipeline (fresh process and cache each)")
    print(f"{'pipeline':>8s} {'shape':16s} {'kernel':10s} {'regs':>5s} {'spill':>5s} {'LLVM ms':>8s} {'TFLOP/s':>8s} "
          f"{'rel err':>8s}")
    for _ in range(args.rounds):
        for shape in args.shapes.split(","):
            for pipeline in args.pipelines.split(","):
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, GLUONKIT_CACHE_DIR=cache)
                    proc = subprocess.run([sys.executable, "-c", _CHILD, pipeline, shape, args.kernels], env=env,
                                          capture_output=True, text=True)
                if proc.returncode != 0:
                    print(f"{pipeline} {shape}: failed\n{proc.stderr[-2000:]}")
                    continue
                for name, r in json.loads(proc.stdout.splitlines()[-1]).items():
                    print(f"{pipeline:>8s} {shape:16s} {name:10s} {r['regs']:5d} {r['spills']:5d} {r['llvm_ms']:8.0f} "
                          f"{r['tflops']:8.1f} {r['error']:8.1e}", flush=True)

if __name__ == "__main__":
    main()
