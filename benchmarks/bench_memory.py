"""Memory-bound kernels beside torch and Triton, measured in one run on one GPU.

Prints GB/s (bytes read + written, each once, over the median time of calls that
alternate between the kernels call by call, see ``timing.py``) for vector add, fused softmax (4096 rows × 256…16384
columns, float32 and bfloat16) and a layout transpose, each beside torch, Triton and a
device-to-device copy; then cold compile times and host launch overheads beside Triton's.
Every gluonkit result is checked against torch on fresh random inputs, with the output
poisoned (NaN) before the run.

Run on a GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_memory.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))

import gluonkit  # noqa: E402
from fused_softmax import softmax as gk_softmax, softmax_config, softmax_kernel  # noqa: E402
from transpose import transpose as gk_transpose  # noqa: E402
from timing import SAMPLES, alternating, percentile  # noqa: E402
from vector_add import add as gk_add  # noqa: E402


# ------------------------------------------------------------------ Triton references
@triton.jit
def triton_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def triton_softmax(out_ptr, in_ptr, n_cols, in_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def triton_transpose(out_ptr, in_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    tile = tl.load(in_ptr + rm[:, None] * N + rn[None, :])
    tl.store(out_ptr + rn[None, :] * M + rm[:, None], tile)


def _gbps(nbytes: int, ms: float) -> float:
    return nbytes / ms / 1e6


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any():
        return float("nan")
    return ((out - ref).norm() / ref.norm()).item()


ROWS = []
ROUNDS = 5  # rounds of the host launch-overhead measurement


def row(name: str, nbytes: int, variants: dict, err: float) -> None:
    """Time ``variants`` (gluonkit, torch, triton, copy: callables) call by call
    (:func:`timing.alternating`); each column is the median over the calls."""
    medians, times = alternating(variants)
    gk, th, tr, cp = (_gbps(nbytes, medians[k]) for k in ("gluonkit", "torch", "triton", "copy"))
    spread = percentile(times["gluonkit"], 0.9) / percentile(times["gluonkit"], 0.1) - 1
    ROWS.append((name, gk, th, tr, cp, gk / cp, gk / tr, spread, err))


def copy_fn(nbytes: int):
    """A device-to-device copy moving ``nbytes`` (half read, half written)."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def bench_add(n: int = 1 << 26) -> None:
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    gk_add(x, y, out)
    err = _rel_error(out, x + y)
    o2 = torch.empty_like(x)
    nbytes = 3 * n * 4
    row(f"add {n}", nbytes, dict(
        gluonkit=lambda: gk_add(x, y, out),
        torch=lambda: torch.add(x, y, out=o2),
        triton=lambda: triton_add[(triton.cdiv(n, 4096),)](x, y, o2, n, BLOCK=4096),
        copy=copy_fn(nbytes)), err)


def bench_softmax(cols: int, dtype: torch.dtype, rows: int = 4096) -> None:
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    out = torch.full_like(x, float("nan"))
    gk_softmax(x, out)
    err = _rel_error(out, torch.softmax(x.double(), dim=1))
    o2 = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    gk_rows, layout, gk_warps = softmax_config(block, x.element_size())
    nbytes = 2 * x.numel() * x.element_size()
    row(f"softmax {rows}x{cols} {str(dtype)[6:]}", nbytes, dict(
        gluonkit=lambda: softmax_kernel[(triton.cdiv(rows, gk_rows),)](
            out, x, rows, cols, x.stride(0), out.stride(0), ROWS=gk_rows, BLOCK=block, layout=layout,
            num_warps=gk_warps),
        torch=lambda: torch.softmax(x, dim=1),
        triton=lambda: triton_softmax[(rows,)](o2, x, cols, x.stride(0), o2.stride(0), BLOCK=block,
                                              num_warps=warps),
        copy=copy_fn(nbytes)), err)


def bench_transpose(m: int = 8192, n: int = 8192) -> None:
    x = torch.randn(m, n, device="cuda")
    out = torch.full((n, m), float("nan"), device="cuda")
    gk_transpose(x, out)
    err = _rel_error(out, x.t())
    o2 = torch.empty(n, m, device="cuda")
    nbytes = 2 * m * n * 4
    row(f"transpose {m}x{n} f32", nbytes, dict(
        gluonkit=lambda: gk_transpose(x, out),
        torch=lambda: o2.copy_(x.t()),
        triton=lambda: triton_transpose[(m // 64, n // 64)](o2, x, m, n, BM=64, BN=64),
        copy=copy_fn(nbytes)), err)


def print_bandwidth_table() -> None:
    print(f"\n{'kernel':34} {'gluonkit':>9} {'torch':>9} {'triton':>9} {'copy':>9} {'gk/copy':>8} {'gk/triton':>9} "
          f"{'gk.spread':>9} {'rel.err':>9}")
    for name, gk, th, tr, cp, r_copy, r_triton, spread, err in ROWS:
        print(f"{name:34} {gk:9.0f} {th:9.0f} {tr:9.0f} {cp:9.0f} {r_copy:8.3f} {r_triton:9.3f} {spread:9.1%} {err:9.2e}")
    print(f"(GB/s; median of {SAMPLES} calls per kernel, the kernels alternating call by call, each after an "
          "L2 flush; gk.spread = 90th / 10th percentile of gluonkit's calls - 1)")


def _cold_seconds(launch) -> float:
    t0 = time.perf_counter()
    launch()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def cold_compile_times() -> None:
    """First-launch wall time of each kernel with empty in-memory and on-disk caches."""
    from transpose import layouts as transpose_layouts, transpose_kernel
    from vector_add import add_kernel, vector_add_layout

    n = 4096
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    s_in = torch.randn(64, 1024, device="cuda")
    s_out = torch.empty_like(s_in)
    t_in = torch.randn(256, 256, device="cuda")
    t_out = torch.empty_like(t_in)
    rows, layout, warps = softmax_config(1024, 4)
    load, store = transpose_layouts(4)
    cases = [
        ("vector add",
         lambda k: k[(1,)](x, y, out, n, BLOCK=4096, layout=vector_add_layout(4), num_warps=4), add_kernel,
         lambda k: k[(1,)](x, y, out, n, BLOCK=4096), triton_add),
        ("fused softmax",
         lambda k: k[(16,)](s_out, s_in, 64, 1024, 1024, 1024, ROWS=rows, BLOCK=1024, layout=layout,
                            num_warps=warps), softmax_kernel,
         lambda k: k[(64,)](s_out, s_in, 1024, 1024, 1024, BLOCK=1024, num_warps=4), triton_softmax),
        ("transpose",
         lambda k: k[(4, 4)](t_out, t_in, 256, 256, BM=64, BN=64, load_layout=load, store_layout=store,
                             num_warps=4), transpose_kernel,
         lambda k: k[(4, 4)](t_out, t_in, 256, 256, BM=64, BN=64), triton_transpose),
    ]
    print()
    for name, gk_launch, gk_kernel, tr_launch, tr_kernel in cases:
        with tempfile.TemporaryDirectory() as gk_cache, tempfile.TemporaryDirectory() as tr_cache:
            os.environ["GLUONKIT_CACHE_DIR"] = gk_cache
            os.environ["TRITON_CACHE_DIR"] = tr_cache
            # Fresh JIT objects: empty in-memory caches, as in a new process.
            gk = _cold_seconds(lambda: gk_launch(gluonkit.jit(gk_kernel.fn)))
            tr = _cold_seconds(lambda: tr_launch(triton.jit(tr_kernel.fn)))
        print(f"cold compile ({name}): gluonkit {gk * 1e3:.0f} ms, triton {tr * 1e3:.0f} ms")


def launch_overhead() -> None:
    """Host time per launch of a one-block vector add, gluonkit beside Triton."""
    from vector_add import add_kernel, vector_add_layout

    n = 4096
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    layout = vector_add_layout(4)
    launches = 2000

    def per_launch(fn) -> float:
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(launches):
            fn()
        elapsed = time.perf_counter() - t0
        torch.cuda.synchronize()
        return elapsed / launches * 1e6

    gk_rounds, tr_rounds = [], []
    for _ in range(ROUNDS):  # interleaved, like the bandwidth rows
        gk_rounds.append(per_launch(lambda: add_kernel[(1,)](x, y, out, n, BLOCK=4096, layout=layout, num_warps=4)))
        tr_rounds.append(per_launch(lambda: triton_add[(1,)](x, y, out, n, BLOCK=4096)))
    print(f"host launch overhead (median of {ROUNDS} rounds): gluonkit {statistics.median(gk_rounds):.1f} us "
          f"(rounds {min(gk_rounds):.1f}-{max(gk_rounds):.1f}), triton {statistics.median(tr_rounds):.1f} us "
          f"(rounds {min(tr_rounds):.1f}-{max(tr_rounds):.1f})")


def main() -> None:
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"gluonkit {gluonkit.__version__}")
    bench_add()
    for dtype in (torch.float32, torch.bfloat16):
        for cols in (256, 1024, 4096, 16384):
            bench_softmax(cols, dtype)
    bench_transpose()
    cold_compile_times()
    launch_overhead()
    print_bandwidth_table()


if __name__ == "__main__":
    main()
