"""GEMM TFLOP/s: the warp-specialized persistent GEMM beside cuBLAS and the persistent GEMM.

For every shape of issue 11's sweep, one run measures ``examples/warp_specialized/ws_gemm.py``
in both variants — cooperative (two warpgroups on one 128 × 256 tile) and ping-pong (one
warpgroup per 128 × 128 tile, two tiles at once) — and in the configuration
``ws_gemm.choose_config`` picks (which may split K), descriptors built once with ``prepare``,
``examples/persistent_gemm/persistent_gemm.py`` (the configuration ``bench_gemm.choose_config``
picks), Triton (``bench_gemm``'s ``tl.dot`` kernel, autotuned over its standard configurations
on the first call) and cuBLAS (``torch.matmul``); ``--host`` measures host time per call instead.
Every result is first checked against torch (fp32
matmul of the same random inputs) with the output poisoned (NaN); the columns are medians over
calls that alternate between the kernels call by call, each after an L2 flush
(``timing.alternating``, as in ``bench_gemm.py``).

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_ws_gemm.py``
(``--shapes 8192x8192x8192`` to pick shapes, ``--dtypes bfloat16,float16``, ``--sweep`` to time
the WS configurations of ``SWEEP`` on each shape instead, ``--configs "[dict(SPLIT_K=2), …]"`` to
sweep those instead of ``SWEEP``, ``--pick`` to time ``choose_config``'s pick too).
"""

import argparse
import ast
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.dirname(__file__))

import ws_gemm  # noqa: E402
from bench_gemm import _checked, _persistent_call, _triton_call, choose_config as persistent_config  # noqa: E402
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


def _describe(cfg: dict) -> str:
    """A short name of a configuration: variant, tile width and split-K."""
    name = ("pp" if cfg.get("PINGPONG") else "co") + f"{cfg.get('BM', 128)}x{cfg.get('BN', 256)}"
    if cfg.get("CLUSTER_M", 1) > 1:  # a cluster of CTAs, each on a BM x BN tile: "mc2x128x256"
        name = f"mc{cfg['CLUSTER_M']}x" + name[2:]
    if cfg.get("SPLIT_K", 1) > 1:
        name += f"/k{cfg['SPLIT_K']}" + (f"t{cfg['SPLIT_TILES']}" if cfg.get("SPLIT_TILES") else "")
    return name


def bench(M, N, K, dtype, sm_count):
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    pick = ws_gemm.choose_config(M, N, K, a.element_size(), sm_count)
    outs = {name: torch.empty(M, N, device="cuda", dtype=dtype) for name in ("coop", "pp", "ws", "pers", "triton")}
    fns = dict(coop=ws_gemm.prepare(a, b, outs["coop"], **COOPERATIVE),
               pp=ws_gemm.prepare(a, b, outs["pp"], **PINGPONG),
               ws=ws_gemm.prepare(a, b, outs["ws"], **pick),
               pers=_persistent_call(a, b, outs["pers"], persistent_config(M, N, K, sm_count)),
               triton=lambda: _triton_call(a, b, outs["triton"]),
               cublas=lambda: torch.matmul(a, b))
    err = max(_checked(fns[name], c, ref, name) for name, c in outs.items())
    ms, rounds = alternating(fns)
    tf = {k: 2 * M * N * K / v / 1e9 for k, v in ms.items()}
    ratios = [cublas / ours for cublas, ours in zip(rounds["cublas"], rounds["ws"])]
    print(f"{M:>5}x{N:<5}x{K:<5} {str(dtype)[6:]:8} {tf['coop']:5.0f} {tf['pp']:5.0f} {tf['ws']:5.0f} "
          f"{_describe(pick):16} {tf['pers']:5.0f} {tf['cublas']:6.0f} {tf['triton']:6.0f}  "
          f"{tf['ws'] / tf['cublas']:6.3f} {tf['ws'] / tf['triton']:6.3f}  "
          f"{percentile(ratios, 0.1):5.3f}-{percentile(ratios, 0.9):5.3f}  {err:.1e}", flush=True)
    return tf["ws"] / tf["cublas"], max(tf["coop"], tf["pp"], tf["ws"]) / tf["cublas"]


def host_times(calls: int = 2000) -> None:
    """Host microseconds per call, back to back, of ``ws_gemm.gemm`` (its prepared launch kept
    per arrays) beside ``torch.matmul``, on a tiny product (GPU time ~ a few µs) and on a
    split-K one (two launches)."""
    for M, N, K, config in ((128, 256, 64, {}), (128, 256, 1024, dict(SPLIT_K=2))):
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ways = {"ws_gemm.gemm": lambda: ws_gemm.gemm(a, b, c, **config),
                "prepared": ws_gemm.prepare(a, b, c, **config), "torch.matmul": lambda: torch.matmul(a, b, out=c)}
        rounds = {name: [] for name in ways}
        for _ in range(5):
            for name, fn in ways.items():
                for _ in range(50):
                    fn()
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                rounds[name].append(1e6 * (time.perf_counter() - start) / calls)
                torch.cuda.synchronize()
        print(f"host us per call, {M}x{N}x{K} {config or ''} (median of 5 rounds of {calls}): " +
              ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in rounds.items()), flush=True)


def _parse_configs(text: str) -> list:
    """``[dict(…), …]`` or ``[{…}, …]`` from the command line, as a list of dicts."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.List):
        return [dict(ast.literal_eval(e)) if isinstance(e, ast.Dict)
                else {kw.arg: ast.literal_eval(kw.value) for kw in e.keywords} for e in node.elts]
    raise ValueError(f"--configs: expected a list of dicts, got {text!r}")


def sweep(shapes, dtype, configs=SWEEP, pick=False):
    """Every WS configuration of ``configs`` on ``shapes`` (and ``choose_config``'s pick, named
    ``pick:…``, with ``pick``): TFLOP/s and the ratio to cuBLAS; a geometric mean per configuration."""
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    ratios = {}
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        fns = {}
        chosen = [ws_gemm.choose_config(M, N, K, a.element_size(), sm_count)] if pick else []
        for i, cfg in enumerate(chosen + list(configs)):
            name = f"pick:{_describe(cfg)}" if i < len(chosen) else _config_name(cfg)
            fns[name] = ws_gemm.prepare(a, b, c, **cfg)
            _checked(fns[name], c, ref, name)
        fns["cublas"] = lambda: torch.matmul(a, b)
        ms, _ = alternating(fns)
        for name in fns:
            if name != "cublas":
                print(f"sweep {M}x{N}x{K} {name}: {2 * M * N * K / ms[name] / 1e9:6.0f} TFLOP/s  "
                      f"{ms['cublas'] / ms[name]:.3f} x cuBLAS", flush=True)
                ratios.setdefault(name.split(":")[0], []).append(ms["cublas"] / ms[name])
    if len(shapes) > 1:
        for name, values in ratios.items():
            print(f"sweep geometric mean {name}: {math.exp(sum(map(math.log, values)) / len(values)):.3f} x cuBLAS")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated MxNxK (default: the issue's sweep)")
    parser.add_argument("--dtypes", default="bfloat16")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--configs", help="the configurations --sweep times (prepare()'s keyword arguments)")
    parser.add_argument("--pick", action="store_true", help="--sweep also times choose_config's pick")
    parser.add_argument("--host", action="store_true", help="host time per call only")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    if args.sweep:
        configs = _parse_configs(args.configs) if args.configs else ([] if args.pick else SWEEP)
        for dtype in dtypes:
            sweep(shapes, dtype, configs, args.pick)
        return
    if args.host:
        host_times()
        return
    print(f"TFLOP/s, median of {SAMPLES} calls per kernel, alternating call by call with an L2 flush "
          "(benchmarks/timing.py)")
    print("coop = cooperative 128x256 (4 stages, GROUP_M=16), pp = ping-pong 128x128 (6 stages, GROUP_M=8), "
          "ws = ws_gemm.choose_config's pick (co/pp, tile, /kS[tT]: split-K in S for the last T tiles), "
          "pers = persistent GEMM, triton = bench_gemm's autotuned tl.dot kernel")
    print("  M    x N    x K     dtype     coop    pp    ws pick              pers cublas triton  ws/cuB ws/tri  "
          "ws/cuB 10-90%  rel.err")
    ratios = [bench(*shape, dtype, sm_count) for shape in shapes for dtype in dtypes]
    for i, what in enumerate(("ws (picked)", "best of coop/pp/ws")):
        values = [r[i] for r in ratios]
        print(f"geometric mean {what} / cuBLAS: {math.exp(sum(map(math.log, values)) / len(values)):.3f}")


if __name__ == "__main__":
    main()
