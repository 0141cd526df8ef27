"""Gluon 3.9's layout queries and small element-wise/reduction builtins.

``to_linear_layout`` and ``bank_conflicts`` are checked against the answers Triton 3.9's
Gluon gives for the same layouts (recorded here); the element-wise and reduction helpers run
in the interpreter on random inputs against numpy and lower through ptxas for sm_90a and
sm_100a with the PTX instructions their rounding modes call for.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.lang import ArgumentError, CompilationError, TypeMismatchError
from gluonkit.runtime.driver import has_gpu
from interpreting import interpreter_on
from kernel_checks import have_ptxas, needs_ptxas

BLOCKED = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
NVMMA_128B = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
NVMMA_64B = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2)


# ----------------------------------------------------------------------- layout queries
@gluonkit.jit
def _linear_layouts(p, L: gl.constexpr, S: gl.constexpr, EXPECT_L: gl.constexpr,
                    EXPECT_S: gl.constexpr, EXPECT_SL: gl.constexpr):
    gl.static_assert(gl.to_linear_layout(L, [32, 64]) == EXPECT_L)
    gl.static_assert(gl.to_linear_layout(S, [32, 32]) == EXPECT_S)
    gl.static_assert(gl.to_linear_layout(gl.SliceLayout(0, L), [64]) == EXPECT_SL)
    gl.static_assert(gl.to_linear_layout(gl.AutoLayout(), [64]) == gl.AutoLayout())


def test_to_linear_layout_gives_triton_39s_bases():
    # Printed by Triton 3.9's gl.to_linear_layout for the same layouts and shapes.
    expect_l = gl.DistributedLinearLayout(
        reg_bases=[[0, 1], [0, 2], [0, 16], [0, 32]], lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
        warp_bases=[[8, 0], [16, 0]], block_bases=[], shape=[32, 64])
    expect_s = gl.SharedLinearLayout(
        offset_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [1, 0], [2, 8], [4, 16], [8, 0], [16, 0]],
        block_bases=[], alignment=512)
    expect_sl = gl.DistributedLinearLayout(reg_bases=[[1], [2], [16], [32]], lane_bases=[[4], [8], [0], [0], [0]],
                                           warp_bases=[[0], [0]], block_bases=[], shape=[64])
    _linear_layouts.build_ir([gl.pointer_type(gl.float32)], dict(L=BLOCKED, S=NVMMA_64B, EXPECT_L=expect_l,
                                                               EXPECT_S=expect_s, EXPECT_SL=expect_sl))
    with pytest.raises(CompilationError, match="static_assert failed"):
        other_swizzle = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2)
        _linear_layouts.build_ir([gl.pointer_type(gl.float32)], dict(L=BLOCKED, S=other_swizzle,
                                                                   EXPECT_L=expect_l, EXPECT_S=expect_s,
                                                                   EXPECT_SL=expect_sl))


@gluonkit.jit
def _conflicts(p, R: gl.constexpr, S: gl.constexpr, M: gl.constexpr, N: gl.constexpr, DT: gl.constexpr,
               EXPECT: gl.constexpr):
    x = gl.full([M, N], 0, DT, R)
    smem = gl.allocate_shared_memory(DT, [M, N], S)
    gl.static_assert(gl.bank_conflicts(x.type, smem.type) == EXPECT)


@pytest.mark.parametrize("case", [
    # (register layout, shared layout, shape, dtype, Triton 3.9's answer)
    (BLOCKED, NVMMA_128B, (64, 64), gl.float16, 1),
    (gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0]), gl.SwizzledSharedLayout(1, 1, 1, [0, 1]), (32, 32),
     gl.float32, 31),
    (gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0]), gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), (32, 32),
     gl.float32, 0),
], ids=["nvmma_fp16", "column_major_fp32", "row_major_fp32"])
def test_bank_conflicts_of_tensor_and_buffer_types(case):
    r, s, (m, n), dt, expect = case
    _conflicts.build_ir([gl.pointer_type(gl.float32)], dict(R=r, S=s, M=m, N=n, DT=dt, EXPECT=expect))
    with pytest.raises(CompilationError, match="static_assert failed"):
        _conflicts.build_ir([gl.pointer_type(gl.float32)], dict(R=r, S=s, M=m, N=n, DT=dt, EXPECT=expect + 1))


@gluonkit.jit
def _bad_conflicts(p):
    x = gl.full([32, 32], 0, gl.float32, gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0]))
    smem = gl.allocate_shared_memory(gl.float16, [32, 32], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    n = gl.bank_conflicts(x.type, smem.type)


def test_bank_conflicts_rejects_mismatched_types():
    with pytest.raises(TypeMismatchError, match="element types differ") as info:
        _bad_conflicts.build_ir([gl.pointer_type(gl.float32)])
    assert "gl.bank_conflicts(x.type, smem.type)" in str(info.value)


# ---------------------------------------------------------------- element-wise helpers
@gluonkit.jit
def _math_kernel(x_ptr, y_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    y = gl.load(y_ptr + offs)
    gl.store(out_ptr + 0 * N + offs, gl.clamp(x, -0.5, 0.5))
    gl.store(out_ptr + 1 * N + offs, gl.clamp(x, -0.5, 0.5, propagate_nan=gl.PropagateNan.ALL))
    gl.store(out_ptr + 2 * N + offs, gl.div_rn(x, y))
    gl.store(out_ptr + 3 * N + offs, gl.fdiv(x, y, ieee_rounding=True))
    gl.store(out_ptr + 4 * N + offs, gl.fdiv(x, y, approx=True))
    gl.store(out_ptr + 5 * N + offs, gl.sqrt_rn(gl.abs(y)))
    gl.store(out_ptr + 6 * N + offs, gl.sub(gl.add(x, y), gl.mul(x, y)))
    a, b = gl.broadcast(gl.to_tensor(2.0), x)
    gl.store(out_ptr + 7 * N + offs, a * b)


@gluonkit.jit
def _int_kernel(x_ptr, y_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    y = gl.load(y_ptr + offs)
    gl.store(out_ptr + offs, gl.umulhi(x, y))
    gl.store(out_ptr + N + offs, gl.clamp(x, -1000, 1000))
    gl.store(out_ptr + 2 * N, gl.xor_sum(x))
    gl.store(out_ptr + 2 * N + 1, gl.reduce_or(y, 0))


@gluonkit.jit
def _ravel_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    x = gl.max_constancy(gl.load(x_ptr + rows[:, None] * N + cols[None, :]), [1, 1])
    flat = gl.ravel(x)
    gl.store(out_ptr + gl.arange(0, M * N, layout=gl.BlockedLayout([4], [32], [4], [0])),
             gl.convert_layout(flat, gl.BlockedLayout([4], [32], [4], [0])))


LAYOUT_1D = gl.BlockedLayout([2], [32], [4], [0])


def test_float_helpers_match_numpy():
    n = 256
    rng = np.random.default_rng(21)
    x = rng.standard_normal(n).astype(np.float32)
    x[::17] = np.nan
    y = rng.standard_normal(n).astype(np.float32)
    out = np.full(8 * n, -7.0, np.float32)
    with interpreter_on():
        _math_kernel[(1,)](x, y, out, N=n, layout=LAYOUT_1D, num_warps=4)
    out = out.reshape(8, n)
    nan = np.isnan(x)
    assert np.array_equal(out[0], np.where(nan, -0.5, np.clip(x, -0.5, 0.5)))
    assert np.array_equal(out[1][~nan], np.clip(x, -0.5, 0.5)[~nan]) and np.isnan(out[1][nan]).all()
    assert np.array_equal(out[2], x / y, equal_nan=True) and np.array_equal(out[3], x / y, equal_nan=True)
    np.testing.assert_allclose(out[4][~nan], (x / y)[~nan], rtol=1e-6)
    assert np.array_equal(out[5], np.sqrt(np.abs(y)))
    np.testing.assert_allclose(out[6][~nan], (x.astype(np.float64) + y - x.astype(np.float64) * y)[~nan], rtol=1e-5,
                               atol=1e-6)
    assert np.array_equal(out[7], 2 * x, equal_nan=True)


def test_integer_helpers_match_numpy():
    n = 256
    rng = np.random.default_rng(22)
    x = rng.integers(-2**31, 2**31, n).astype(np.int32)
    y = rng.integers(-2**31, 2**31, n).astype(np.int32)
    out = np.zeros(2 * n + 2, np.int32)
    with interpreter_on():
        _int_kernel[(1,)](x, y, out, N=n, layout=LAYOUT_1D, num_warps=4)
    hi = (x.view(np.uint32).astype(np.uint64) * y.view(np.uint32).astype(np.uint64)) >> np.uint64(32)
    assert np.array_equal(out[:n], hi.astype(np.uint32).view(np.int32))  # umulhi is unsigned, as in Triton
    assert np.array_equal(out[n:2 * n], np.clip(x, -1000, 1000))
    assert out[2 * n] == np.bitwise_xor.reduce(x) and out[2 * n + 1] == np.bitwise_or.reduce(y)


def test_ravel_flattens_row_major():
    x = np.random.default_rng(23).standard_normal((16, 32)).astype(np.float32)
    out = np.zeros(512, np.float32)
    with interpreter_on():
        _ravel_kernel[(1,)](x, out, M=16, N=32, layout=BLOCKED, num_warps=4)
    assert np.array_equal(out, x.ravel())


@gluonkit.jit
def _bad_div_rn(p):
    x = gl.load(p + gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [0])))
    y = gl.div_rn(x, x)


@gluonkit.jit
def _bad_fdiv(p):
    x = gl.load(p)
    y = gl.fdiv(x, x, ieee_rounding=True, approx=True)


def test_helpers_reject_bad_operands():
    with pytest.raises(TypeMismatchError, match="div_rn expects float32 operands, got float16") as info:
        _bad_div_rn.build_ir([gl.pointer_type(gl.float16)])
    assert "y = gl.div_rn(x, x)" in str(info.value)
    with pytest.raises(ArgumentError, match="cannot be combined"):
        _bad_fdiv.build_ir([gl.pointer_type(gl.float32)])


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_helpers_lower_with_their_rounding_modes(target):
    ptx = _math_kernel.compile("*fp32:16", "*fp32:16", "*fp32:16", target=target, num_warps=4, N=256,
                               layout=LAYOUT_1D).asm["ptx"]
    for instruction in ("div.rn.f32", "div.approx.f32", "sqrt.rn.f32"):
        assert instruction in ptx
    compiled = _int_kernel.compile("*i32:16", "*i32:16", "*i32:16", target=target, num_warps=4, N=256,
                                   layout=LAYOUT_1D)
    assert "mul.hi.u32" in compiled.asm["ptx"] or "mul.wide.u32" in compiled.asm["ptx"]
    _ravel_kernel.compile("*fp32:16", "*fp32:16", target=target, num_warps=4, M=16, N=32, layout=BLOCKED)


@gluonkit.jit
def _methods_kernel(x_ptr, i_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    i = gl.load(i_ptr + offs)
    gl.store(out_ptr + offs, x.cumsum(0))
    gl.store(out_ptr + N + offs, x.cumprod(0, reverse=True))
    gl.store(out_ptr + 2 * N + offs, x.gather(i, 0))
    gl.store(out_ptr + 3 * N + offs, x.sqrt_rn())
    gl.store(out_ptr + 4 * N + offs, x.associative_scan(0, _max_fn))
    gl.store(out_ptr + 5 * N + offs, i.histogram(N, layout=layout).to(gl.float32))
    gl.store(out_ptr + 6 * N, i.xor_sum().to(gl.float32))
    gl.store(out_ptr + 6 * N + 1, i.reduce_or(0).to(gl.float32))
    gl.store(out_ptr + 6 * N + 2 + offs, x.ravel())


@gluonkit.jit
def _max_fn(a, b):
    return gl.maximum(a, b)


def test_tensor_methods_forward_to_the_builtins():
    n = 128
    rng = np.random.default_rng(24)
    x = rng.uniform(0.5, 1.5, n).astype(np.float32)
    i = rng.integers(0, n, n).astype(np.int32)
    out = np.zeros(7 * n + 2, np.float32)
    with interpreter_on():
        _methods_kernel[(1,)](x, i, out, N=n, layout=gl.BlockedLayout([1], [32], [4], [0]), num_warps=4)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out[:n], np.cumsum(x64), rtol=1e-5)
    np.testing.assert_allclose(out[n:2 * n], np.cumprod(x64[::-1])[::-1], rtol=1e-4)
    assert np.array_equal(out[2 * n:3 * n], x[i])
    assert np.array_equal(out[3 * n:4 * n], np.sqrt(x))
    assert np.array_equal(out[4 * n:5 * n], np.maximum.accumulate(x))
    assert np.array_equal(out[5 * n:6 * n], np.bincount(i, minlength=n))
    assert out[6 * n] == np.bitwise_xor.reduce(i) and out[6 * n + 1] == np.bitwise_or.reduce(i)
    assert np.array_equal(out[6 * n + 2:], x)


def _e2m1_reference(packed, axis):
    """Triton's interpreter's unpacking: low nibble first, then the e2m1 table."""
    table = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    data = np.moveaxis(packed, axis, -1)
    codes = np.stack([data & 0xF, data >> 4], -1).reshape(data.shape[:-1] + (2 * data.shape[-1],))
    values = np.where(codes & 8, -table[codes & 7], table[codes & 7])
    return np.moveaxis(values, -1, axis)


@gluonkit.jit
def _fp4_kernel(src_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, AXIS: gl.constexpr, DT: gl.constexpr,
                layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    src = gl.load(src_ptr + rows[:, None] * N + cols[None, :])
    out = gl.fp4_to_fp(src, DT, AXIS).to(gl.float32)
    OM: gl.constexpr = M * 2 if AXIS == 0 else M
    ON: gl.constexpr = N * 2 if AXIS == 1 else N
    out_layout: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    orows = gl.arange(0, OM, layout=gl.SliceLayout(1, out_layout))
    ocols = gl.arange(0, ON, layout=gl.SliceLayout(0, out_layout))
    gl.store(out_ptr + orows[:, None] * ON + ocols[None, :], gl.convert_layout(out, out_layout))


@pytest.mark.parametrize("dtype", [gl.bfloat16, gl.float16])
@pytest.mark.parametrize("axis", [0, 1])
def test_fp4_to_fp_unpacks_low_nibble_first(axis, dtype):
    packed = np.random.default_rng(axis).integers(0, 256, (16, 32)).astype(np.uint8)
    out = np.full((32, 32) if axis == 0 else (16, 64), np.nan, np.float32)
    with interpreter_on():
        _fp4_kernel[(1,)](packed, out, M=16, N=32, AXIS=axis, DT=dtype, layout=BLOCKED, num_warps=4)
    assert np.array_equal(out, _e2m1_reference(packed, axis))
    if have_ptxas():
        for target in ("sm_90a", "sm_100a"):
            _fp4_kernel.compile("*u8:16", "*fp32:16", target=target, num_warps=4, M=16, N=32, AXIS=axis, DT=dtype,
                                layout=BLOCKED)


@gluonkit.jit
def _math_methods_kernel(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, x.abs().sqrt() + x.exp() + x.floor() + x.cast(gl.int32).cdiv(2).to(gl.float32))


def test_math_functions_are_tensor_methods_as_in_gluon():
    n = 128
    x = np.random.default_rng(25).uniform(-3, 3, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    with interpreter_on():
        _math_methods_kernel[(1,)](x, out, N=n, layout=gl.BlockedLayout([1], [32], [4], [0]), num_warps=4)
    xi = x.astype(np.int32)  # truncation toward zero, then C-style (truncating) division of (x + 1) by 2
    cdiv = np.trunc((xi + 1) / 2)
    ref = np.sqrt(np.abs(x.astype(np.float64))) + np.exp(x.astype(np.float64)) + np.floor(x) + cdiv
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ dot_fma
ACC = gl.BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])  # 32 x 32 accumulator tile
# Triton 3.9's to_linear_layout(DotOperandLayout(0 | 1, ACC, 0), [32, 16] | [16, 32]), recorded.
DOT_A = gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [1, 0]], lane_bases=[[0, 0], [0, 0], [0, 0], [2, 0], [4, 0]],
    warp_bases=[[8, 0], [16, 0]], block_bases=[], shape=[32, 16])
DOT_B = gl.DistributedLinearLayout(
    reg_bases=[[0, 1], [1, 0], [2, 0], [4, 0], [8, 0], [0, 16]], lane_bases=[[0, 2], [0, 4], [0, 8], [0, 0], [0, 0]],
    warp_bases=[[0, 0], [0, 0]], block_bases=[], shape=[16, 32])


@gluonkit.jit
def _dot_fma_kernel(a_ptr, b_ptr, c_ptr, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr, acc_layout: gl.constexpr,
                    a_layout: gl.constexpr, b_layout: gl.constexpr):
    am = gl.arange(0, M, layout=gl.SliceLayout(1, a_layout))
    ak = gl.arange(0, K, layout=gl.SliceLayout(0, a_layout))
    a = gl.load(a_ptr + am[:, None] * K + ak[None, :])
    bk = gl.arange(0, K, layout=gl.SliceLayout(1, b_layout))
    bn = gl.arange(0, N, layout=gl.SliceLayout(0, b_layout))
    b = gl.load(b_ptr + bk[:, None] * N + bn[None, :])
    cm = gl.arange(0, M, layout=gl.SliceLayout(1, acc_layout))
    cn = gl.arange(0, N, layout=gl.SliceLayout(0, acc_layout))
    c_ptrs = c_ptr + cm[:, None] * N + cn[None, :]
    gl.store(c_ptrs, gl.dot_fma(a, b, gl.load(c_ptrs)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_dot_fma_matches_numpy(dtype):
    m, n, k = 32, 32, 16
    rng = np.random.default_rng(26)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = c.copy()
    layouts = dict(acc_layout=ACC, a_layout=DOT_A, b_layout=DOT_B)
    with interpreter_on():
        _dot_fma_kernel[(1,)](a, b, out, M=m, N=n, K=k, num_warps=4, **layouts)
    np.testing.assert_allclose(out, c + a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    if have_ptxas():
        ptr = "*fp32:16" if dtype == np.float32 else "*fp16:16"
        for target in ("sm_90a", "sm_100a"):
            ptx = _dot_fma_kernel.compile(ptr, ptr, "*fp32:16", target=target, num_warps=4, M=m, N=n, K=k,
                                          **layouts).asm["ptx"]
            assert ptx.count("fma.rn.f32") >= 4 * k  # 4 accumulator registers per thread, k each


def test_dot_fma_rejects_operands_spread_over_other_threads():
    m, n, k = 32, 32, 16
    wrong = gl.BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])  # K spread over lanes: not in the thread
    with pytest.raises(CompilationError, match="a's lane basis .* use DotOperandLayout\\(0, acc_layout, 0\\)") as info:
        _dot_fma_kernel.build_ir([gl.pointer_type(gl.float32)] * 3, dict(
            M=m, N=n, K=k, acc_layout=ACC, a_layout=wrong, b_layout=DOT_B))
    assert "gl.dot_fma(a, b, gl.load(c_ptrs))" in str(info.value)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_gpu_dot_fma_matches_the_interpreter_bit_for_bit():
    torch = pytest.importorskip("torch")
    m, n, k = 32, 32, 16
    rng = np.random.default_rng(27)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    layouts = dict(acc_layout=ACC, a_layout=DOT_A, b_layout=DOT_B)
    tensors = [torch.from_numpy(x.copy()).cuda() for x in (a, b, c)]
    _dot_fma_kernel[(1,)](*tensors, M=m, N=n, K=k, num_warps=4, **layouts)
    torch.cuda.synchronize()
    on_cpu = c.copy()
    with interpreter_on():
        _dot_fma_kernel[(1,)](a, b, on_cpu, M=m, N=n, K=k, num_warps=4, **layouts)
    assert np.array_equal(tensors[2].cpu().numpy(), on_cpu)


@gluonkit.jit
def _flip_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, DIM: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    offs = rows[:, None] * N + cols[None, :]
    x = gl.load(x_ptr + offs)
    y = x.flip(DIM).sigmoid()
    gl.store(out_ptr + offs, gl.convert_layout(y, layout))


@pytest.mark.parametrize("dim", [0, 1, None])
def test_flip_and_sigmoid_tensor_methods(dim):
    x = np.random.default_rng(28).standard_normal((16, 64)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with interpreter_on():
        _flip_kernel[(1,)](x, out, M=16, N=64, DIM=dim, layout=BLOCKED, num_warps=4)
    flipped = np.flip(x, 1 if dim is None else dim).astype(np.float64)
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-flipped)), rtol=1e-6, atol=1e-7)
    if have_ptxas():
        for target in ("sm_90a", "sm_100a"):
            _flip_kernel.compile("*fp32:16", "*fp32:16", target=target, num_warps=4, M=16, N=64, DIM=dim,
                                 layout=BLOCKED)


# --------------------------------------------------------------- constexpr .value
@gluonkit.jit
def _constexpr_value(out, BLOCK: gl.constexpr, SHAPE: gl.constexpr):
    """Gluon's compile-time values are ``gl.constexpr`` objects: ``.value`` is the plain value."""
    size: gl.constexpr = SHAPE.value[0] * SHAPE.value[1]
    gl.static_assert(size == BLOCK.value)
    offs = gl.arange(0, BLOCK.value, gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(out + offs, offs * SHAPE[1])


def test_constexpr_parameters_have_gluons_value_attribute():
    out = np.zeros(128, np.int32)
    with interpreter_on():
        _constexpr_value[(1,)](out, 128, (16, 8))
    np.testing.assert_array_equal(out, np.arange(128) * 8)


@gluonkit.jit
def _runtime_value(x):
    x = x.value  # a runtime scalar has no .value


def test_a_runtime_value_has_no_value_attribute():
    with pytest.raises(CompilationError, match="has no attribute 'value'"):
        _runtime_value.compile("i32")
