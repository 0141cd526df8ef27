"""Does LLVM's IR pass pipeline change the WS GEMM's speed?  A/B of pipelines on the GPU.

Each round runs one fresh process per IR pipeline (``--pipelines O3,light``: LLVM's O3, and
instcombine + simplifycfg; code generation is O3 either way; see ``gluonkit.lower.backend.nvptx``), each with its own empty ``GLUONKIT_CACHE_DIR``; a process compiles
the cooperative and the ping-pong kernel with that pipeline, prints ptxas's registers and the SASS
size, checks C against torch and times every shape with ``do_bench`` (TFLOP/s).  Rounds alternate
the pipelines, so a drift of the GPU's clock hits both alike.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/ws_gemm_llvm_pipeline_ab.py``
(``--shapes 8192x8192x8192,3000x5000x2000``, ``--rounds 2``).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import functools, json, sys
sys.path.insert(0, "examples/warp_specialized")
import torch
import gluonkit.lower.compiler as compiler
from gluonkit.lower.backend import nvptx
from gluonkit.runtime.bench import do_bench
import ws_gemm
pipeline, shapes = sys.argv[1], json.loads(sys.argv[2])
compiler.emit_ptx = functools.partial(nvptx.emit_ptx, pipeline=pipeline)
kernels = {}
for kind, cfg in (("co", dict(BN=256, STAGES=4, EPILOGUE_SPLIT=2)),
                  ("pp", dict(BN=128, STAGES=6, EPILOGUE_SPLIT=2, PINGPONG=True, GROUP_M=8))):
    k = ws_gemm.compile_ahead("sm_90a", BN=cfg["BN"], STAGES=cfg["STAGES"], PINGPONG=cfg.get("PINGPONG", False))
    sass = sum(1 for line in k.asm.get("sass", "").splitlines() if line.strip().startswith("/*") and "NOP" not in line)
    kernels[kind] = dict(regs=k.metadata["registers"], spill=k.metadata["spill_stores"], sass=sass)
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        fn = ws_gemm.prepare(a, b, c, **cfg)
        fn()
        torch.cuda.synchronize()
        err = ((c.float() - a.float() @ b.float()).abs().max() / (a.float() @ b.float()).abs().max()).item()
        ms = do_bench(fn)
        kernels[kind][f"{M}x{N}x{K}"] = dict(tflops=2 * M * N * K / ms / 1e9, rel_err=err)
print(json.dumps(kernels))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", default="O3,light")
    parser.add_argument("--shapes", default="8192x8192x8192,3000x5000x2000")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    shapes = [[int(x) for x in s.split("x")] for s in args.shapes.split(",")]
    for r in range(args.rounds):
        for pipeline in args.pipelines.split(","):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, GLUONKIT_CACHE_DIR=cache)
                out = subprocess.run([sys.executable, "-c", _CHILD, pipeline, json.dumps(shapes)], env=env,
                                     capture_output=True, text=True)
            if out.returncode:
                print(f"round {r} {pipeline}: failed\n{out.stderr[-2000:]}", flush=True)
                continue
            for kind, res in json.loads(out.stdout).items():
                cells = "  ".join(f"{k} {v['tflops']:6.1f} TFLOP/s (err {v['rel_err']:.1e})"
                                  for k, v in res.items() if isinstance(v, dict))
                print(f"round {r} LLVM {pipeline} {kind}: regs {res['regs']} spill {res['spill']} sass {res['sass']}  "
                      f"{cells}", flush=True)


if __name__ == "__main__":
    main()
