"""GEMM TFLOP/s: the warp-specialized persistent GEMM beside cuBLAS and the persistent GEMM.

For every shape of issue 11's sweep, one run measures ``examples/warp_specialized/ws_gemm.py``
in both variants — cooperative (two warpgroups on one 128 × 256 tile) and ping-pong (one
warpgroup per 128 × 128 tile, two tiles at once) — descriptors built once with ``prepare``,
``examples/persistent_gemm/persistent_gemm.py`` (the configuration ``bench_gemm.choose_config``
picks) and cuBLAS (``torch.matmul``).  Every result is first checked against torch (fp32
matmul of the same random inputs) with the output poisoned (NaN); the columns are medians over
calls that alternate between the kernels call by call, each after an L2 flush
(``timing.alternating``, as in ``bench_gemm.py``).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_ws_gemm.py``
(``--shapes 8192x8192x8192`` to pick shapes, ``--dtypes bfloat16,float16``, ``--sweep`` to time
the WS configurations of ``SWEEP`` on each shape instead, ``--configs "[dict(SPLIT_K=2), …]"`` to
sweep those instead of ``SWEEP``).
"""

import argparse
import ast
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.dirname(__file__))

import ws_gemm  # noqa: E402
from bench_gemm import _checked, _persistent_call, choose_config as persistent_config  # noqa: E402
from timing import SAMPLES, alternating, percentile  # noqa: E402

SHAPES = ((8192, 8192, 8192), (6144, 6144, 6144), (4096, 4096, 4096), (8192, 8192, 512), (8192, 8192, 1024),
          (16384, 8192, 1024), (8192, 256, 8192), (256, 8192, 8192), (3000, 5000, 2000),
          (4999, 4104, 3000), (7000, 1000, 5000), (1500, 6000, 2504), (2000, 2000, 8000))  # N, K: rows of 16 B
# WS configurations tried by --sweep: prepare()'s keyword arguments.
COOPERATIVE = dict(BN=256, STAGES=4, EPILOGUE_SPLIT=2)
PINGPONG = dict(BN=128, STAGES=6, EPILOGUE_SPLIT=2, PINGPONG=True, GROUP_M=8)
SWEEP = (COOPERATIVE, dict(COOPERATIVE, GROUP_M=8), dict(BN=256, STAGES=3, EPILOGUE_SPLIT=1), PINGPONG,
         dict(PINGPONG, GROUP_M=16), dict(PINGPONG, GROUP_M=4), dict(PINGPONG, producer_regs=40, consumer_regs=232),
         dict(BM=64, BN=256, STAGES=4, EPILOGUE_SPLIT=2, PINGPONG=True))


def _config_name(cfg: dict) -> str:
    """``key=value,…`` of a configuration, for the sweep's lines."""
    return ",".join(f"{k}={v}" for k, v in cfg.items()) or "prepare() defaults"


def bench(M, N, K, dtype, sm_count):
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    c_co, c_pp, c_p = (torch.empty(M, N, device="cuda", dtype=dtype) for _ in range(3))
    fns = dict(coop=ws_gemm.prepare(a, b, c_co, **COOPERATIVE), pingpong=ws_gemm.prepare(a, b, c_pp, **PINGPONG),
               persistent=_persistent_call(a, b, c_p, persistent_config(M, N, K, sm_count)),
               cublas=lambda: torch.matmul(a, b))
    err = max(_checked(fns[name], c, ref, name) for name, c in (("coop", c_co), ("pingpong", c_pp),
                                                                ("persistent", c_p)))
    ms, rounds = alternating(fns)
    tf = {k: 2 * M * N * K / v / 1e9 for k, v in ms.items()}
    pick = "pingpong" if ws_gemm.choose_config(M, N, K, a.element_size(), sm_count)["PINGPONG"] else "coop"
    ratios = [cublas / ours for cublas, ours in zip(rounds["cublas"], rounds[pick])]
    print(f"{M:>5}x{N:<5}x{K:<5} {str(dtype)[6:]:8} {tf['coop']:6.0f} {tf['pingpong']:6.0f} {tf['persistent']:6.0f} "
          f"{tf['cublas']:6.0f}  {pick[:4]:4} {tf[pick] / tf['cublas']:6.3f} {tf[pick] / tf['persistent']:6.3f} "
          f"{tf['persistent'] / tf['cublas']:6.3f}  {percentile(ratios, 0.1):5.3f}-{percentile(ratios, 0.9):5.3f}  "
          f"{err:.1e}", flush=True)
    return tf[pick] / tf['cublas'], max(tf['coop'], tf['pingpong']) / tf['cublas']


def _parse_configs(text: str) -> list:
    """``[dict(…), …]`` or ``[{…}, …]`` from the command line, as a list of dicts."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.List):
        return [dict(ast.literal_eval(e)) if isinstance(e, ast.Dict)
                else {kw.arg: ast.literal_eval(kw.value) for kw in e.keywords} for e in node.elts]
    raise ValueError(f"--configs: expected a list of dicts, got {text!r}")


def sweep(shapes, dtype, configs=SWEEP):
    """Every WS configuration of ``configs`` on ``shapes``: TFLOP/s and the ratio to cuBLAS."""
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        fns = {}
        for cfg in configs:
            fns[_config_name(cfg)] = ws_gemm.prepare(a, b, c, **cfg)
            _checked(fns[_config_name(cfg)], c, ref, _config_name(cfg))
        fns["cublas"] = lambda: torch.matmul(a, b)
        ms, _ = alternating(fns)
        for name in fns:
            if name != "cublas":
                print(f"sweep {M}x{N}x{K} {name}: {2 * M * N * K / ms[name] / 1e9:6.0f} TFLOP/s  "
                      f"{ms['cublas'] / ms[name]:.3f} x cuBLAS", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated MxNxK (default: the issue's sweep)")
    parser.add_argument("--dtypes", default="bfloat16")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--configs", help="the configurations --sweep times (prepare()'s keyword arguments)")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    if args.sweep:
        configs = _parse_configs(args.configs) if args.configs else SWEEP
        for dtype in dtypes:
            sweep(shapes, dtype, configs)
        return
    print(f"TFLOP/s, median of {SAMPLES} calls per kernel, alternating call by call with an L2 flush "
          "(benchmarks/timing.py)")
    print("coop = cooperative 128x256 (4 stages, GROUP_M=16), pp = ping-pong 128x128 (6 stages, GROUP_M=8), "
          "pers = persistent GEMM; ws = the variant ws_gemm.choose_config picks")
    print("  M    x N    x K     dtype      coop     pp   pers cublas  ws    ws/cuB ws/per per/cuB  ws/cuB 10-90%  "
          "rel.err")
    ratios = [bench(*shape, dtype, sm_count) for shape in shapes for dtype in dtypes]
    for i, what in enumerate(("ws (picked)", "best of coop/pp")):
        values = [r[i] for r in ratios]
        print(f"geometric mean {what} / cuBLAS: {math.exp(sum(map(math.log, values)) / len(values)):.3f}")


if __name__ == "__main__":
    main()
