"""Gluon 3.9's scan, histogram, gather and map_elementwise builtins, end to end.

Each kernel runs in the CPU interpreter on fresh random inputs over several layouts
(1-D and 2-D, scans along each axis, within a thread, across lanes and across warps) and is
compared with a numpy float64 reference; the same kernels lower and ptxas accepts them for
sm_90a and sm_100a.  ``gpu``-marked tests compare the GPU with the interpreter.
"""

from __future__ import annotations


import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.lang import ArgumentError, CompilationError, ShapeMismatchError
from gluonkit.runtime.driver import has_gpu
from interpreting import interpreter_on
from kernel_checks import have_ptxas, line_containing, needs_ptxas

P32, PI32 = "*fp32:16", "*i32:16"
I32P = gl.pointer_type(gl.int32)

# 2-D layouts for 32 x 64 tensors with 4 warps: registers, lanes and warps along each axis.
LAYOUTS_2D = {
    "regs_lanes_warps_both": gl.BlockedLayout([2, 2], [4, 8], [2, 2], [1, 0]),
    "warps_along_rows": gl.BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0]),
    "column_major": gl.BlockedLayout([4, 1], [8, 4], [1, 4], [0, 1]),
    "replicated_lanes": gl.BlockedLayout([2, 1], [32, 1], [1, 4], [1, 0]),  # covers 64 rows: lanes repeat
}
LAYOUTS_1D = {
    "one_per_thread": gl.BlockedLayout([1], [32], [4], [0]),  # 128 < 256: registers repeat
    "two_per_thread": gl.BlockedLayout([2], [32], [4], [0]),
    "replicated_warps": gl.BlockedLayout([4], [32], [4], [0]),  # 512 > 256: warps 2, 3 copy 0, 1
}


def _rng(seed):
    return np.random.default_rng(seed)


def _numpy_scan(x, axis, reverse, fn):
    x = np.flip(x, axis) if reverse else x
    out = fn(x, axis=axis)
    return np.flip(out, axis) if reverse else out


# ------------------------------------------------------------------------------- kernels
@gluonkit.jit
def _add(a, b):
    return a + b


@gluonkit.jit
def _affine(a1, b1, a2, b2):
    """Composition of x -> a*x + b maps, earlier first: associative, not commutative."""
    return a1 * a2, b1 * a2 + b2


@gluonkit.jit
def scan_2d_kernel(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, AXIS: gl.constexpr, REVERSE: gl.constexpr,
                   layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * N + cols[None, :]
    x = gl.load(x_ptr + offs)
    gl.store(y_ptr + offs, gl.associative_scan(x, AXIS, _add, reverse=REVERSE))


@gluonkit.jit
def cum_1d_kernel(x_ptr, s_ptr, p_ptr, N: gl.constexpr, REVERSE: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    gl.store(s_ptr + offs, gl.cumsum(x, 0, reverse=REVERSE))
    gl.store(p_ptr + offs, gl.cumprod(x, reverse=REVERSE))


@gluonkit.jit
def affine_scan_kernel(a_ptr, b_ptr, out_ptr, N: gl.constexpr, REVERSE: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    a, b = gl.associative_scan((gl.load(a_ptr + offs), gl.load(b_ptr + offs)), 0, _affine, reverse=REVERSE)
    gl.store(out_ptr + offs, a * 0.5 + b)


@gluonkit.jit
def cumsum_int8_kernel(x_ptr, y_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    s = gl.cumsum(gl.load(x_ptr + offs).to(gl.int8))
    gl.static_assert(s.dtype == gl.int32)
    gl.store(y_ptr + offs, s)


@gluonkit.jit
def histogram_kernel(x_ptr, h_ptr, N: gl.constexpr, BINS: gl.constexpr, layout: gl.constexpr,
                     out_layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    h = gl.histogram(x, BINS, mask=offs % 3 != 0, layout=out_layout)
    gl.store(h_ptr + gl.arange(0, BINS, layout=out_layout), h)


@gluonkit.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr, AXIS: gl.constexpr,
                  src_layout: gl.constexpr, idx_layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, src_layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, src_layout))
    src = gl.load(src_ptr + rows[:, None] * N + cols[None, :])
    IM: gl.constexpr = K if AXIS == 0 else M
    IN: gl.constexpr = N if AXIS == 0 else K
    irows = gl.arange(0, IM, layout=gl.SliceLayout(1, idx_layout))
    icols = gl.arange(0, IN, layout=gl.SliceLayout(0, idx_layout))
    ioffs = irows[:, None] * IN + icols[None, :]
    out = gl.gather(src, gl.load(idx_ptr + ioffs), AXIS)
    gl.store(out_ptr + ioffs, out)


@gluonkit.jit
def _selu_scalar(x, alpha):
    y = x
    if x <= 0:
        y = alpha * (gl.exp(x) - 1.0)
    return y


@gluonkit.jit
def _swap_minmax(a0, a1, b0, b1):
    return gl.minimum(a0, b0), gl.maximum(a1, b1), a0 + a1, b0 + b1


@gluonkit.jit
def map_kernel(x_ptr, y_ptr, lo_ptr, hi_ptr, s_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    y = gl.load(y_ptr + offs)
    gl.store(x_ptr + offs, gl.map_elementwise(_selu_scalar, x, 1.5))
    lo, hi, s = gl.map_elementwise(_pair_fn, x, y)
    gl.store(lo_ptr + offs, lo)
    gl.store(hi_ptr + offs, hi)
    gl.store(s_ptr + offs, s)


@gluonkit.jit
def _pair_fn(x, y):
    return gl.minimum(x, y), gl.maximum(x, y), x + y


@gluonkit.jit
def map_pack_kernel(x_ptr, y_ptr, r_ptr, s_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    r, s = gl.map_elementwise(_swap_minmax, gl.load(x_ptr + offs), gl.load(y_ptr + offs), pack=2)
    gl.store(r_ptr + offs, r)
    gl.store(s_ptr + offs, s)


# ---------------------------------------------------------------------- interpreter runs
def _interpret(kernel, *args, num_warps=4, **constexprs):
    with interpreter_on():
        kernel[(1,)](*args, num_warps=num_warps, **constexprs)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name", sorted(LAYOUTS_2D))
def test_associative_scan_2d_matches_numpy(name, axis, reverse):
    x = _rng(hash((name, axis, reverse)) % 2**32).standard_normal((32, 64)).astype(np.float32)
    y = np.full_like(x, np.nan)
    _interpret(scan_2d_kernel, x, y, M=32, N=64, AXIS=axis, REVERSE=reverse, layout=LAYOUTS_2D[name])
    ref = _numpy_scan(x.astype(np.float64), axis, reverse, np.cumsum)
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-4)


def test_scan_result_is_the_same_bits_in_every_layout():
    """The combine tree depends only on positions, never on the layout."""
    x = _rng(7).standard_normal((32, 64)).astype(np.float32)
    results = []
    for layout in LAYOUTS_2D.values():
        y = np.empty_like(x)
        _interpret(scan_2d_kernel, x, y, M=32, N=64, AXIS=1, REVERSE=False, layout=layout)
        results.append(y)
    for y in results[1:]:
        assert np.array_equal(y, results[0])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(LAYOUTS_1D))
def test_cumsum_and_cumprod_1d_match_numpy(name, reverse):
    n = 256
    x = (1.0 + 0.01 * _rng(n).standard_normal(n)).astype(np.float32)
    s, p = np.full_like(x, np.nan), np.full_like(x, np.nan)
    _interpret(cum_1d_kernel, x, s, p, N=n, REVERSE=reverse, layout=LAYOUTS_1D[name])
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(s, _numpy_scan(x64, 0, reverse, np.cumsum), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(p, _numpy_scan(x64, 0, reverse, np.cumprod), rtol=1e-4)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(LAYOUTS_1D))
def test_tuple_scan_with_non_commutative_combine_keeps_the_order(name, reverse):
    n = 256
    rng = _rng(n + reverse)
    a = rng.uniform(0.9, 1.1, n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    out = np.full_like(a, np.nan)
    _interpret(affine_scan_kernel, a, b, out, N=n, REVERSE=reverse, layout=LAYOUTS_1D[name])
    # Sequential reference: compose the maps in scan order, then apply to x = 0.5.
    order = range(n - 1, -1, -1) if reverse else range(n)
    ref = np.empty(n)
    acc_a, acc_b = 1.0, 0.0
    for i in order:
        acc_a, acc_b = acc_a * a[i], acc_b * a[i] + b[i]
        ref[i] = acc_a * 0.5 + acc_b
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_cumsum_of_int8_accumulates_in_int32():
    n = 512
    x = _rng(3).integers(-128, 128, n).astype(np.int32)
    y = np.zeros(n, np.int32)
    _interpret(cumsum_int8_kernel, x, y, N=n, layout=gl.BlockedLayout([4], [32], [4], [0]))
    assert np.array_equal(y, np.cumsum(x))
    assert np.abs(y).max() > 127  # the sum left int8's range


@pytest.mark.parametrize("bins,out_layout", [
    (64, gl.BlockedLayout([1], [32], [4], [0])),  # fewer bins than threads, replicated counts
    (512, gl.BlockedLayout([2], [32], [4], [0])),
])
@pytest.mark.parametrize("name", sorted(LAYOUTS_1D))
def test_histogram_matches_numpy(name, bins, out_layout):
    n = 1024
    x = _rng(bins).integers(-8, bins + 8, n).astype(np.int32)  # some values fall outside the bins
    h = np.full(bins, -1, np.int32)
    _interpret(histogram_kernel, x, h, N=n, BINS=bins, layout=LAYOUTS_1D[name], out_layout=out_layout)
    kept = x[(np.arange(n) % 3 != 0) & (x >= 0) & (x < bins)]
    assert np.array_equal(h, np.bincount(kept, minlength=bins))


GATHER_CASES = [
    ("same_layout_axis0", 0, 32, LAYOUTS_2D["regs_lanes_warps_both"], LAYOUTS_2D["regs_lanes_warps_both"]),
    ("same_layout_axis1", 1, 64, LAYOUTS_2D["regs_lanes_warps_both"], LAYOUTS_2D["regs_lanes_warps_both"]),
    ("other_layout_axis0", 0, 16, LAYOUTS_2D["column_major"], LAYOUTS_2D["warps_along_rows"]),
    ("other_layout_axis1", 1, 128, LAYOUTS_2D["warps_along_rows"], LAYOUTS_2D["column_major"]),
]


@pytest.mark.parametrize("case", GATHER_CASES, ids=[c[0] for c in GATHER_CASES])
def test_gather_matches_take_along_axis(case):
    _, axis, k, src_layout, idx_layout = case
    rng = _rng(k + axis)
    src = rng.standard_normal((32, 64)).astype(np.float32)
    idx_shape = (k, 64) if axis == 0 else (32, k)
    idx = rng.integers(0, src.shape[axis], idx_shape).astype(np.int32)
    out = np.full(idx_shape, np.nan, np.float32)
    _interpret(gather_kernel, src, idx, out, M=32, N=64, K=k, AXIS=axis, src_layout=src_layout,
               idx_layout=idx_layout)
    assert np.array_equal(out, np.take_along_axis(src, idx, axis))


def test_gather_index_out_of_range_is_reported_in_the_interpreter():
    src = _rng(1).standard_normal((32, 64)).astype(np.float32)
    idx = np.zeros((32, 64), np.int32)
    idx[3, 5] = 32
    out = np.zeros_like(src)
    layout = LAYOUTS_2D["regs_lanes_warps_both"]
    with pytest.raises(CompilationError, match=r"index 32 at element \(3, 5\) is outside the source's 32"):
        _interpret(gather_kernel, src, idx, out, M=32, N=64, K=32, AXIS=0, src_layout=layout, idx_layout=layout)


@pytest.mark.parametrize("name", sorted(LAYOUTS_1D))
def test_map_elementwise_branches_per_element_and_returns_tuples(name):
    n = 256
    rng = _rng(11)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    x_in = x.copy()
    lo, hi, s = (np.full(n, np.nan, np.float32) for _ in range(3))
    _interpret(map_kernel, x, y, lo, hi, s, N=n, layout=LAYOUTS_1D[name])
    x64 = x_in.astype(np.float64)
    np.testing.assert_allclose(x, np.where(x64 > 0, x64, 1.5 * (np.exp(x64) - 1)), rtol=1e-6, atol=1e-6)
    assert np.array_equal(lo, np.minimum(x_in, y)) and np.array_equal(hi, np.maximum(x_in, y))
    np.testing.assert_allclose(s, x64 + y, rtol=1e-6)


def test_map_elementwise_pack_passes_consecutive_registers():
    """With pack=2 each call gets elements 2i and 2i+1 of each input (input-major) and
    returns each result's two values in turn (result-major), as Gluon orders them."""
    n = 256
    rng = _rng(12)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    r, s = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    _interpret(map_pack_kernel, x, y, r, s, N=n, layout=gl.BlockedLayout([2], [32], [4], [0]))
    x2, y2 = x.reshape(-1, 2), y.reshape(-1, 2)
    assert np.array_equal(r.reshape(-1, 2), np.stack([np.minimum(x2[:, 0], y2[:, 0]),
                                                      np.maximum(x2[:, 1], y2[:, 1])], -1))
    assert np.array_equal(s.reshape(-1, 2), np.stack([x2[:, 0] + x2[:, 1], y2[:, 0] + y2[:, 1]], -1))


# --------------------------------------------------------------------------------- errors
@gluonkit.jit
def _bad_scan_fn(p, N: gl.constexpr, layout: gl.constexpr):
    x = gl.load(p + gl.arange(0, N, layout=layout))
    gl.store(p + gl.arange(0, N, layout=layout), gl.associative_scan(x, 0, max))  # <- scan


@gluonkit.jit
def _bad_histogram(p, N: gl.constexpr, layout: gl.constexpr):
    x = gl.load(p + gl.arange(0, N, layout=layout))
    h = gl.histogram(x, 16)  # <- histogram


@gluonkit.jit
def _bad_gather(p, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(p + offs)
    y = gl.gather(x, gl.full([N, 1], 0, gl.int32), 0)  # <- gather


@gluonkit.jit
def _bad_scan_combine(p, N: gl.constexpr, layout: gl.constexpr):
    x = gl.load(p + gl.arange(0, N, layout=layout))
    y = gl.associative_scan(x, 0, _affine)  # <- combine


@gluonkit.jit
def _bad_bins(p, N: gl.constexpr, layout: gl.constexpr):
    x = gl.load(p + gl.arange(0, N, layout=layout))
    h = gl.histogram(x, 100, layout=layout)  # <- bins


ERROR_CASES = [
    ("scan_combine_not_jit", _bad_scan_fn, "# <- scan", ArgumentError, "must be a @gluonkit.jit function"),
    ("histogram_without_layout", _bad_histogram, "# <- histogram", ArgumentError, "requires a destination layout"),
    ("gather_rank_mismatch", _bad_gather, "# <- gather", ShapeMismatchError, "must have the same rank"),
    ("scan_combine_arity", _bad_scan_combine, "# <- combine", ArgumentError,
     "_affine(): missing a required argument: 'a2'"),
    ("histogram_bins_not_pow2", _bad_bins, "# <- bins", ShapeMismatchError, "must be a power of two"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_bad_calls_name_the_line_and_the_fix(case):
    _, kernel, marker, exc_type, fragment = case
    with pytest.raises(CompilationError) as info:
        kernel.build_ir([I32P], dict(N=128, layout=LAYOUTS_1D["one_per_thread"]))
    err = info.value
    assert isinstance(err, exc_type), f"{type(err).__name__}: {err}"
    assert fragment in err.message
    line = line_containing(kernel, marker)
    assert err.loc.line == line or (err.loc.inlined_at is not None and err.loc.inlined_at.line == line), str(err)


def test_map_elementwise_pack_must_divide_the_registers_per_thread():
    x = _rng(14).standard_normal(128).astype(np.float32)
    with pytest.raises(CompilationError, match="not a multiple of pack=2") as info:
        _interpret(map_pack_kernel, x, x.copy(), x.copy(), x.copy(), N=128, layout=LAYOUTS_1D["one_per_thread"])
    assert info.value.loc.line == line_containing(map_pack_kernel, "gl.map_elementwise")
    with pytest.raises(CompilationError, match="not a multiple of pack=2"):
        map_pack_kernel.compile(P32, P32, P32, P32, num_warps=4, N=128, layout=LAYOUTS_1D["one_per_thread"])


# 16 x 16 over 4 warps: lane basis 4 moves along both dimensions at once.
MIXED = gl.DistributedLinearLayout(reg_bases=[[0, 1]], lane_bases=[[0, 2], [0, 4], [0, 8], [1, 0], [2, 1]],
                                   warp_bases=[[4, 0], [8, 0]], block_bases=[], shape=[16, 16])


@pytest.mark.parametrize("axis", [0, 1])
def test_scan_refuses_a_layout_mixing_the_axis_with_another_dimension(axis):
    x = _rng(axis).standard_normal((16, 16)).astype(np.float32)
    with pytest.raises(CompilationError, match=r"lane basis \[2, 1\].*convert_layout the operand") as info:
        _interpret(scan_2d_kernel, x, x.copy(), M=16, N=16, AXIS=axis, REVERSE=False, layout=MIXED)
    line = line_containing(scan_2d_kernel, "gl.associative_scan")
    assert info.value.loc.line == line
    with pytest.raises(CompilationError, match=r"lane basis \[2, 1\].*convert_layout the operand") as info:
        scan_2d_kernel.compile(P32, P32, num_warps=4, M=16, N=16, AXIS=axis, REVERSE=False, layout=MIXED)
    assert info.value.loc.line == line


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64])
def test_histogram_of_narrow_and_wide_integers(dtype):
    n, bins = 1024, 512
    info = np.iinfo(dtype)
    x = _rng(int(info.bits)).integers(max(info.min, -600), min(info.max, 600) + 1, n).astype(dtype)
    h = np.full(bins, -1, np.int32)
    _interpret(histogram_kernel, x, h, N=n, BINS=bins, layout=_B1D_HIST, out_layout=_B1D_HIST)
    kept = x[(np.arange(n) % 3 != 0) & (x >= 0) & (x < bins)].astype(np.int64)
    assert np.array_equal(h, np.bincount(kept, minlength=bins))
    if have_ptxas():
        ptr = {np.int8: "*i8", np.uint8: "*u8", np.int64: "*i64"}[dtype]
        for target in ("sm_90a", "sm_100a"):
            histogram_kernel.compile(ptr, PI32, target=target, num_warps=4, N=n, BINS=bins, layout=_B1D_HIST,
                                     out_layout=_B1D_HIST)


_B1D_HIST = gl.BlockedLayout([4], [32], [4], [0])


# ------------------------------------------------------------------ lowering through ptxas
_B2D = LAYOUTS_2D["regs_lanes_warps_both"]
_B1D = LAYOUTS_1D["two_per_thread"]
COMPILE_CASES = [
    (f"scan_{name}_axis{axis}", scan_2d_kernel, [P32, P32],
     dict(M=32, N=64, AXIS=axis, REVERSE=axis == 1, layout=layout))
    for name, layout in sorted(LAYOUTS_2D.items()) for axis in (0, 1)
] + [
    (f"cum_{name}", cum_1d_kernel, [P32, P32, P32], dict(N=256, REVERSE=False, layout=layout))
    for name, layout in sorted(LAYOUTS_1D.items())
] + [
    ("affine_scan_reverse", affine_scan_kernel, [P32, P32, P32], dict(N=256, REVERSE=True, layout=_B1D)),
    ("cumsum_int8", cumsum_int8_kernel, [PI32, PI32], dict(N=512, layout=_B1D)),
    ("histogram_64", histogram_kernel, [PI32, PI32],
     dict(N=1024, BINS=64, layout=LAYOUTS_1D["replicated_warps"], out_layout=gl.BlockedLayout([1], [32], [4], [0]))),
    ("histogram_512", histogram_kernel, [PI32, PI32],
     dict(N=1024, BINS=512, layout=_B1D, out_layout=gl.BlockedLayout([2], [32], [4], [0]))),
] + [
    (f"gather_{c[0]}", gather_kernel, [P32, PI32, P32],
     dict(M=32, N=64, K=c[2], AXIS=c[1], src_layout=c[3], idx_layout=c[4])) for c in GATHER_CASES
] + [
    ("map_elementwise", map_kernel, [P32, P32, P32, P32, P32], dict(N=256, layout=_B1D)),
    ("map_elementwise_pack", map_pack_kernel, [P32, P32, P32, P32], dict(N=256, layout=_B1D)),
]


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("case", COMPILE_CASES, ids=[c[0] for c in COMPILE_CASES])
def test_kernels_lower_and_ptxas_accepts_them(case, target):
    _, kernel, types, constexprs = case
    compiled = kernel.compile(*types, target=target, num_warps=4, **constexprs)
    assert f".target {target}" in compiled.asm["ptx"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert compiled.metadata["spill_stores"] == 0


def _ptx(case):
    _, kernel, types, constexprs = next(c for c in COMPILE_CASES if c[0] == case)
    return kernel.compile(*types, num_warps=4, **constexprs).asm["ptx"]


def test_scan_across_lanes_shuffles_and_across_warps_uses_scratch():
    # Rows: 2 registers, 4 lanes and 2 warps along axis 0 -> butterflies and one scratch round trip.
    ptx = _ptx("scan_regs_lanes_warps_both_axis0")
    assert "shfl.sync.bfly.b32" in ptx
    assert "st.shared" in ptx and "ld.shared" in ptx and "bar.sync" in ptx
    # Column-major layout, axis 0: registers and lanes only -> no shared memory at all.
    within_warp = _ptx("scan_column_major_axis0")
    assert "shfl.sync.bfly.b32" in within_warp and "st.shared" not in within_warp


def test_histogram_counts_with_shared_memory_atomics():
    ptx = _ptx("histogram_512")
    assert "atom.shared.add.u32" in ptx or "red.shared.add.u32" in ptx


# --------------------------------------------------------------------------- on the GPU
def on_gpu(test):
    """Mark ``test`` as needing a GPU (skipped without one)."""
    test = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")(test)
    return pytest.mark.gpu(test)


def _both(kernel, numpy_args, **constexprs):
    """(GPU results, interpreter results) of one launch of ``kernel`` on copies of the inputs."""
    torch = pytest.importorskip("torch")
    tensors = [torch.from_numpy(a.copy()).cuda() for a in numpy_args]
    kernel[(1,)](*tensors, num_warps=4, **constexprs)
    torch.cuda.synchronize()
    on_cpu = [a.copy() for a in numpy_args]
    _interpret(kernel, *on_cpu, **constexprs)
    return [t.cpu().numpy() for t in tensors], on_cpu


@on_gpu
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name", sorted(LAYOUTS_2D))
def test_gpu_scan_matches_interpreter_bit_for_bit(name, axis, reverse):
    x = _rng(5).standard_normal((32, 64)).astype(np.float32)
    gpu, cpu = _both(scan_2d_kernel, [x, np.full_like(x, np.nan)], M=32, N=64, AXIS=axis, REVERSE=reverse,
                     layout=LAYOUTS_2D[name])
    assert np.array_equal(gpu[1], cpu[1])
    np.testing.assert_allclose(gpu[1], _numpy_scan(x.astype(np.float64), axis, reverse, np.cumsum), atol=1e-4)


@on_gpu
@pytest.mark.parametrize("name", sorted(LAYOUTS_1D))
def test_gpu_cumsum_cumprod_and_ordered_tuple_scan(name):
    n = 256
    rng = _rng(6)
    x = (1.0 + 0.01 * rng.standard_normal(n)).astype(np.float32)
    gpu, cpu = _both(cum_1d_kernel, [x, np.zeros_like(x), np.zeros_like(x)], N=n, REVERSE=True,
                     layout=LAYOUTS_1D[name])
    assert np.array_equal(gpu[1], cpu[1]) and np.array_equal(gpu[2], cpu[2])
    a, b = rng.uniform(0.9, 1.1, n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    gpu, cpu = _both(affine_scan_kernel, [a, b, np.zeros_like(a)], N=n, REVERSE=False, layout=LAYOUTS_1D[name])
    assert np.array_equal(gpu[2], cpu[2])
    ints = rng.integers(-128, 128, 512).astype(np.int32)
    gpu, _ = _both(cumsum_int8_kernel, [ints, np.zeros_like(ints)], N=512, layout=_B1D)
    assert np.array_equal(gpu[1], np.cumsum(ints))


@on_gpu
@pytest.mark.parametrize("case", [c for c in COMPILE_CASES if c[0].startswith("histogram")],
                         ids=lambda c: c[0])
def test_gpu_histogram_matches_numpy(case):
    _, kernel, _, constexprs = case
    n, bins = constexprs["N"], constexprs["BINS"]
    x = _rng(bins).integers(-8, bins + 8, n).astype(np.int32)
    gpu, _ = _both(kernel, [x, np.full(bins, -1, np.int32)], **constexprs)
    kept = x[(np.arange(n) % 3 != 0) & (x >= 0) & (x < bins)]
    assert np.array_equal(gpu[1], np.bincount(kept, minlength=bins))


@on_gpu
@pytest.mark.parametrize("case", GATHER_CASES, ids=[c[0] for c in GATHER_CASES])
def test_gpu_gather_matches_take_along_axis(case):
    _, axis, k, src_layout, idx_layout = case
    rng = _rng(k)
    src = rng.standard_normal((32, 64)).astype(np.float32)
    idx_shape = (k, 64) if axis == 0 else (32, k)
    idx = rng.integers(0, src.shape[axis], idx_shape).astype(np.int32)
    gpu, _ = _both(gather_kernel, [src, idx, np.full(idx_shape, np.nan, np.float32)], M=32, N=64, K=k, AXIS=axis,
                   src_layout=src_layout, idx_layout=idx_layout)
    assert np.array_equal(gpu[2], np.take_along_axis(src, idx, axis))


@on_gpu
def test_gpu_map_elementwise_matches_interpreter():
    n = 256
    rng = _rng(13)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    outs = [np.full(n, np.nan, np.float32) for _ in range(3)]
    gpu, cpu = _both(map_kernel, [x, y] + outs, N=n, layout=_B1D)
    np.testing.assert_allclose(gpu[0], cpu[0], rtol=1e-6, atol=1e-6)  # exp may differ in the last bit
    for g, c in zip(gpu[2:], cpu[2:]):
        assert np.array_equal(g, c)
    gpu, cpu = _both(map_pack_kernel, [x, y, outs[0], outs[1]], N=n, layout=_B1D)
    assert np.array_equal(gpu[2], cpu[2]) and np.array_equal(gpu[3], cpu[3])
