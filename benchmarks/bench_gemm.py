"""GEMM TFLOP/s: gluonkit's persistent and pipelined Hopper GEMMs beside cuBLAS and Triton.

For every shape and dtype of the issue's list, one run measures gluonkit's persistent GEMM
(``examples/persistent_gemm/persistent_gemm.py``, the configuration ``choose_config``
picks, TMA descriptors built once with ``prepare``), the one-tile-per-program pipelined
GEMM (descriptors built on every call), cuBLAS (``torch.matmul``) and Triton's
``tl.dot`` matmul autotuned over the usual Hopper configurations (its best one is shown).
Every result is checked against torch (fp32 matmul of the same inputs) with the output
poisoned (NaN) first; columns are medians over calls that alternate between the kernels
call by call (``timing.alternating``).
After the table come the host time per call of each way to launch, and each kernel's
registers, spills and shared memory.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_gemm.py``
(``--shapes 8192x8192x8192,4096x4096x4096`` to pick shapes, ``--sweep`` to time every
persistent configuration of ``CONFIGS`` instead).
"""

import argparse
import os
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))
sys.path.insert(0, os.path.dirname(__file__))

import persistent_gemm  # noqa: E402
from timing import SAMPLES, alternating, percentile  # noqa: E402
import pipelined_gemm  # noqa: E402

import gluonkit.language as gl  # noqa: E402
from gluonkit.nvidia.hopper import TensorDescriptor  # noqa: E402

SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 512), (16384, 16384, 1024),
          (256, 8192, 8192), (8192, 256, 8192), (1024, 8192, 1024))
# Persistent-GEMM configurations: (BM, BN, BK, STAGES, EPILOGUE_SPLIT, num_warps).
CONFIGS = ((128, 256, 64, 3, 1, 8), (128, 256, 64, 4, 2, 8), (128, 128, 64, 4, 1, 8), (128, 128, 64, 5, 2, 8),
           (128, 128, 64, 4, 1, 4), (128, 256, 64, 3, 2, 8), (64, 256, 64, 4, 1, 4), (128, 128, 64, 6, 1, 4),
           (128, 128, 128, 3, 1, 8), (64, 128, 64, 6, 1, 4))


def choose_config(M, N, K, sm_count):
    """128 × 256 tiles, 4 stages, split epilogue; 128 × 128 tiles, 6 stages and one warpgroup
    when the big tiles would leave SMs idle (from ``--sweep`` on the H100, see
    docs/benchmarks.rst)."""
    big_tiles = triton.cdiv(M, 128) * triton.cdiv(N, 256)
    return CONFIGS[1] if big_tiles >= sm_count else CONFIGS[7]


@triton.autotune(configs=[
    triton.Config({"BM": 128, "BN": 256, "BK": 64}, num_stages=3, num_warps=8),
    triton.Config({"BM": 256, "BN": 128, "BK": 64}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=4, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 128}, num_stages=3, num_warps=8),
    triton.Config({"BM": 128, "BN": 128, "BK": 64}, num_stages=4, num_warps=4),
    triton.Config({"BM": 64, "BN": 128, "BK": 64}, num_stages=4, num_warps=4),
], key=["M", "N", "K"])
@triton.jit
def triton_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The tutorial matmul: grouped tile order, masked loads, tl.dot."""
    pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = 8 * num_pid_n
    first_m = (pid // group) * 8
    rows = min(num_pid_m - first_m, 8)
    pid_m = first_m + (pid % group) % rows
    pid_n = (pid % group) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def _triton_call(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    return triton_matmul[lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)](a, b, c, M, N, K)


def _persistent_call(a, b, c, config):
    """The persistent GEMM with its descriptors built once (``persistent_gemm.prepare``)."""
    BM, BN, BK, stages, split, warps = config
    return persistent_gemm.prepare(a, b, c, BM=BM, BN=BN, BK=BK, STAGES=stages, EPILOGUE_SPLIT=split,
                                   num_warps=warps)


def host_times(calls=300):
    """Host microseconds per call of each way to launch a tiny GEMM (GPU work ~ a few us)."""
    a = torch.randn(128, 64, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(128, 256, device="cuda", dtype=torch.bfloat16)
    ways = {"gluonkit gemm() incl. 3 descriptors": lambda: persistent_gemm.gemm(a, b, c),
            "gluonkit prepared launch": persistent_gemm.prepare(a, b, c),
            "triton launch": lambda: _triton_call(a, b, c), "torch.matmul": lambda: torch.matmul(a, b)}
    out = {}
    for name, fn in ways.items():
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        out[name] = 1e6 * (time.perf_counter() - start) / calls
        torch.cuda.synchronize()
    return out


def _rel_err(c, ref):
    return ((c.float() - ref).norm() / ref.norm()).item()


def _checked(fn, c, ref, name):
    """Run ``fn`` once into a poisoned ``c`` and return its relative error (raises when wrong)."""
    c.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    err = _rel_err(c, ref)
    if not err < 1e-2:
        raise AssertionError(f"{name}: relative error {err}")
    return err


def bench(M, N, K, dtype, sm_count, resources):
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    c_gk, c_pipe, c_tr = (torch.empty(M, N, device="cuda", dtype=dtype) for _ in range(3))
    config = choose_config(M, N, K, sm_count)
    fns = dict(persistent=_persistent_call(a, b, c_gk, config), pipelined=lambda: pipelined_gemm.gemm(a, b, c_pipe),
               cublas=lambda: torch.matmul(a, b), triton=lambda: _triton_call(a, b, c_tr))
    errs = {name: _checked(fns[name], c, ref, name) for name, c in
            (("persistent", c_gk), ("pipelined", c_pipe), ("triton", c_tr))}
    ms, rounds = alternating(fns)
    tf = {k: 2 * M * N * K / v / 1e9 for k, v in ms.items()}
    ratios = [cublas / ours for cublas, ours in zip(rounds["cublas"], rounds["persistent"])]  # adjacent calls
    best = triton_matmul.best_config
    triton_cfg = f"{best.kwargs['BM']}x{best.kwargs['BN']}x{best.kwargs['BK']}s{best.num_stages}w{best.num_warps}"
    ours = "{}x{}x{}s{}e{}w{}".format(*config)
    print(f"{M:>5}x{N:<5}x{K:<5} {str(dtype)[6:]:8} {tf['persistent']:6.0f} {tf['pipelined']:6.0f} "
          f"{tf['cublas']:6.0f} {tf['triton']:6.0f}  {tf['persistent'] / tf['cublas']:5.3f} "
          f"{tf['persistent'] / tf['triton']:5.3f}  {percentile(ratios, 0.1):5.3f}-{percentile(ratios, 0.9):5.3f}  "
          f"{ours:15} {triton_cfg:15} "
          f"{max(errs.values()):.1e}", flush=True)
    name = str(dtype)[6:]
    resources.setdefault(("persistent " + ours, name), _gluonkit_resources(a, b, c_gk, config))
    resources.setdefault(("pipelined 128x128x64s4w8", name), _pipelined_resources(a, b, c_pipe))
    resources.setdefault(("triton " + triton_cfg, name), _triton_resources(a, b, c_tr))
    return tf


def _gluonkit_resources(a, b, c, config):
    """(registers, spills, shared bytes) of the persistent kernel compiled for these arguments."""
    BM, BN, BK, stages, split, warps = config
    a_layout, b_layout, c_layout, c_block, acc = persistent_gemm.gemm_layouts(
        BM, BN, BK, persistent_gemm.element_dtype(a), persistent_gemm.element_dtype(c), split, warps)
    meta = persistent_gemm.persistent_gemm_kernel.compile(
        TensorDescriptor.from_tensor(a, [BM, BK], a_layout), TensorDescriptor.from_tensor(b, [BK, BN], b_layout),
        TensorDescriptor.from_tensor(c, c_block, c_layout), *c.shape, a.shape[1], STAGES=stages,
        GROUP_M=persistent_gemm.DEFAULT_GROUP_M, EPILOGUE_SPLIT=split, acc_layout=acc, ACTIVATION=None,
        num_warps=warps).metadata
    return meta["registers"], meta["spill_stores"], meta["shared"]


def _pipelined_resources(a, b, c, BM=128, BN=128, BK=64, stages=4, warps=8):
    """The same for the pipelined GEMM with the configuration its ``gemm`` uses by default."""
    dt = persistent_gemm.element_dtype(a)
    nvmma = gl.NVMMASharedLayout.get_default_for
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, BN, 16])
    meta = pipelined_gemm.pipelined_gemm_kernel.compile(
        TensorDescriptor.from_tensor(a, [BM, BK], nvmma([BM, BK], dt)),
        TensorDescriptor.from_tensor(b, [BK, BN], nvmma([BK, BN], dt)), c, *c.shape, a.shape[1], c.stride(0),
        STAGES=stages, acc_layout=acc, num_warps=warps).metadata
    return meta["registers"], meta["spill_stores"], meta["shared"]


def _triton_resources(a, b, c):
    """(registers, spills, shared bytes) of Triton's best configuration for this shape."""
    best = triton_matmul.best_config
    M, K = a.shape
    kernel = triton_matmul.fn.warmup(a, b, c, M, b.shape[1], K, grid=(1,), num_warps=best.num_warps,
                                     num_stages=best.num_stages, **best.kwargs)
    kernel._init_handles()  # loads the module, which fills in n_regs and n_spills
    return kernel.n_regs, kernel.n_spills, kernel.metadata.shared


def sweep(shapes, dtype, sm_count):
    """Every persistent configuration on ``shapes``: TFLOP/s and the ratio to cuBLAS."""
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        fns = {cfg: _persistent_call(a, b, c, cfg) for cfg in CONFIGS}
        for cfg, fn in fns.items():
            _checked(fn, c, ref, str(cfg))
        fns["cublas"] = lambda: torch.matmul(a, b)
        ms, _ = alternating(fns)
        for cfg in CONFIGS:
            tf = 2 * M * N * K / ms[cfg] / 1e9
            print(f"sweep {M}x{N}x{K} {cfg}: {tf:6.0f} TFLOP/s  {ms['cublas'] / ms[cfg]:.3f} x cuBLAS", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated MxNxK (default: the issue's list)")
    parser.add_argument("--dtypes", default="bfloat16,float16")
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")] if args.shapes else SHAPES
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}")
    if args.sweep:
        for dtype in dtypes:
            sweep(shapes, dtype, sm_count)
        return
    print(f"TFLOP/s, median of {SAMPLES} calls per kernel, alternating call by call (benchmarks/timing.py); gk = persistent; configs "
          "BMxBNxBK s=stages "
          "e=epilogue split w=warps")
    print("gk/cuB 10-90%: the 10th and 90th percentiles of the ratio between adjacent calls")
    print("  M    x N    x K     dtype    persist  pipel cublas triton  gk/cuB gk/tr  gk/cuB 10-90%  "
          "gluonkit cfg    triton cfg      rel.err")
    resources = {}
    for shape in shapes:
        for dtype in dtypes:
            bench(*shape, dtype, sm_count, resources)
    print("host time per call (us): " + ", ".join(f"{k} {v:.1f}" for k, v in host_times().items()))
    print("kernel resources (registers, spill stores, shared bytes):")
    for (name, dtype), (regs, spills, smem) in resources.items():
        print(f"  {name} {dtype}: {regs} registers, {spills} spills, {smem} B shared")


if __name__ == "__main__":
    main()
