"""fp8 GEMM TFLOP/s: ``ws_gemm_fp8`` beside ``torch._scaled_mm`` (cuBLASLt) and Triton's fp8 ``tl.dot``.

``C = (A @ B^T) * scale_a * scale_b`` with A ``[M, K]``, B ``[N, K]`` row-major e4m3, fp32
per-tensor scales, bf16 C.  For each shape: our kernel as ``ws_gemm_fp8.choose_config`` configures
it (``ws``) and in its two fixed variants (cooperative 128 × 256, ping-pong 128 × 128),
``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)`` and a plain Triton
fp8 matmul (the best of ``TRITON_CONFIGS`` on that shape, chosen with a short timing first).
Every result is first checked against an fp32 matmul of the same inputs with C poisoned (NaN);
the columns are medians of calls alternating kernel by kernel after an L2 flush
(``timing.alternating``).

Run on a Hopper GPU: ``PYTHONPATH=$PWD python benchmarks/bench_ws_gemm_fp8.py``
(``--shapes 8192x8192x8192`` to pick shapes, ``--dtype float8_e5m2``, ``--sweep`` to time
each configuration of ``SWEEP`` instead).
"""

import argparse
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.dirname(__file__))

import ws_gemm_fp8  # noqa: E402
from timing import alternating, percentile  # noqa: E402

# The ragged shape's N and K are multiples of 16, as torch._scaled_mm requires.
SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024), (16384, 8192, 1024), (4999, 4112, 3008))
COOPERATIVE = dict(BN=256, STAGES=4, EPILOGUE_SPLIT=2, GROUP_M=8)
PINGPONG = dict(BN=128, STAGES=6, EPILOGUE_SPLIT=2, PINGPONG=True, GROUP_M=8)
SWEEP = (COOPERATIVE, dict(COOPERATIVE, GROUP_M=16), dict(COOPERATIVE, EPILOGUE_SPLIT=1, STAGES=3),
         dict(BM=256, BN=128, STAGES=4, EPILOGUE_SPLIT=2, GROUP_M=8), dict(BM=256, BN=128, STAGES=4, GROUP_M=16),
         PINGPONG, dict(PINGPONG, STAGES=5))
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_stages, num_warps) of the Triton baseline.
TRITON_CONFIGS = ((128, 256, 128, 8, 3, 8), (128, 256, 128, 8, 4, 8), (128, 128, 128, 8, 4, 8),
                  (128, 128, 128, 8, 5, 4))


@triton.jit
def _triton_fp8_matmul(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = (A @ B^T) * sa * sb, A [M, K] and B [N, K] row-major: the textbook tiled ``tl.dot``."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_pid_n
    first_m = (pid // group) * GROUP_M
    rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % rows
    pid_n = (pid % group) // rows
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :] * K + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        mask = offs_k < K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=mask[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _triton_call(a, b, c, sa, sb, cfg):
    BM, BN, BK, GM, stages, warps = cfg
    M, K = a.shape
    N = b.shape[0]
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)

    def run():
        _triton_fp8_matmul[grid](a, b, c, sa, sb, M, N, K, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=GM,
                                 num_stages=stages, num_warps=warps)
        return c
    return run


def _checked(fn, c, ref, name):
    """Run ``fn`` (which returns its result) once with ``c`` poisoned; its relative error (raises when wrong)."""
    c.fill_(float("nan"))
    out = fn()
    torch.cuda.synchronize()
    err = ((out.float() - ref).norm() / ref.norm()).item()
    if not err < 1e-2:
        raise AssertionError(f"{name}: relative error {err}")
    return err


def _inputs(M, N, K, dtype):
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(N, K, device="cuda").to(dtype)
    sa = torch.tensor(0.75, device="cuda")
    sb = torch.tensor(1.25, device="cuda")
    ref = (a.float() @ b.float().t()) * (0.75 * 1.25)
    return a, b, sa, sb, ref


def _best_triton(a, b, sa, sb, ref):
    """The fastest of ``TRITON_CONFIGS`` on this shape (checked, then timed briefly)."""
    c = torch.empty(a.shape[0], b.shape[0], device="cuda", dtype=torch.bfloat16)
    fns = {}
    for cfg in TRITON_CONFIGS:
        try:
            fns[cfg] = _triton_call(a, b, c, sa, sb, cfg)
            _checked(fns[cfg], c, ref, f"triton {cfg}")
        except (triton.OutOfResources, triton.CompilationError):
            fns.pop(cfg)
    ms, _ = alternating(fns, samples=10)
    return min(ms, key=ms.get)


def bench(M, N, K, dtype, sm_count):
    a, b, sa, sb, ref = _inputs(M, N, K, dtype)
    cs = {name: torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for name in ("ws", "coop", "pp", "triton")}
    tcfg = _best_triton(a, b, sa, sb, ref)
    fns = dict(ws=ws_gemm_fp8.prepare(a, b, cs["ws"], sa, sb),
               coop=ws_gemm_fp8.prepare(a, b, cs["coop"], sa, sb, **COOPERATIVE),
               pp=ws_gemm_fp8.prepare(a, b, cs["pp"], sa, sb, **PINGPONG),
               scaled_mm=lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
               fast=lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                             use_fast_accum=True),
               triton=_triton_call(a, b, cs["triton"], sa, sb, tcfg))
    err = {name: _checked(fns[name], cs[name], ref, name) for name in ("ws", "coop", "pp", "triton")}
    err.update({name: _checked(fns[name], cs["coop"], ref, name) for name in ("scaled_mm", "fast")})
    ms, rounds = alternating(fns)
    tf = {k: 2 * M * N * K / v / 1e9 for k, v in ms.items()}
    cfg = ws_gemm_fp8.choose_config(M, N, K, 2, sm_count)
    pick = "pp" if cfg["PINGPONG"] else f"{cfg['BM']}x{cfg['BN']}"
    ratios = [ref_ms / ours for ref_ms, ours in zip(rounds["scaled_mm"], rounds["ws"])]
    print(f"{M:>5}x{N:<5}x{K:<5} {tf['ws']:6.0f} {tf['coop']:6.0f} {tf['pp']:6.0f} {tf['scaled_mm']:6.0f} "
          f"{tf['fast']:6.0f} {tf['triton']:6.0f}  {pick:7} {tf['ws'] / tf['scaled_mm']:6.3f} "
          f"{tf['ws'] / tf['fast']:6.3f} {tf['ws'] / tf['triton']:6.3f}  "
          f"{percentile(ratios, 0.1):5.3f}-{percentile(ratios, 0.9):5.3f}  "
          f"{err['ws']:.1e} {err['scaled_mm']:.1e} {err['fast']:.1e}  triton {tcfg}", flush=True)


def sweep(shapes, dtype):
    """Every configuration of ``SWEEP`` on ``shapes``: TFLOP/s and the ratio to ``torch._scaled_mm``."""
    for M, N, K in shapes:
        a, b, sa, sb, ref = _inputs(M, N, K, dtype)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        fns = {}
        for cfg in SWEEP:
            name = ",".join(f"{k}={v}" for k, v in cfg.items())
            fns[name] = ws_gemm_fp8.prepare(a, b, c, sa, sb, **cfg)
            _checked(fns[name], c, ref, name)
        fns["scaled_mm"] = lambda: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        ms, _ = alternating(fns, samples=30)
        for name in fns:
            if name != "scaled_mm":
                print(f"sweep {M}x{N}x{K} {name}: {2 * M * N * K / ms[name] / 1e9:6.0f} TFLOP/s  "
                      f"{ms['scaled_mm'] / ms[name]:.3f} x _scaled_mm", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated MxNxK (default: SHAPES)")
    parser.add_argument("--dtype", default="float8_e4m3fn")
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    dtype = getattr(torch, args.dtype)
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}; "
          f"{args.dtype} inputs, bf16 output")
    if args.sweep:
        sweep(shapes, dtype)
        return
    print("TFLOP/s, medians of calls alternating kernel by kernel after an L2 flush (benchmarks/timing.py); "
          "ws = choose_config's pick (named in 'pick'), coop = cooperative 128x256, pp = ping-pong 128x128")
    print("smm = torch._scaled_mm (default: use_fast_accum=False), fast = its use_fast_accum=True")
    print("  M    x N    x K         ws   coop     pp    smm   fast triton  pick    ws/smm ws/fst ws/tri  "
          "ws/smm 10-90%  rel.err: ws smm fast")
    for shape in shapes:
        bench(*shape, dtype, sm_count)


if __name__ == "__main__":
    main()
