"""Blackwell's packed arithmetic (``add2``, ``sub2``, ``mul2``, ``fma2``, ``min2``, ``max2``): the interpreter against
an exact rational reference (one rounding to nearest even per lane), Gluon 3.9's result types, errors at the user's
line, and ptxas for sm_100a (float32 pairs) and sm_90a (16-bit pairs).  The instructions are compared with Triton
3.9's in ``tests/test_triton39_crosscheck.py``; ``tests/test_gpu_packed_arith.py`` runs the kernels on a GPU."""

from __future__ import annotations

import re
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia import blackwell
from interpreting import launch_interpreted
from kernel_checks import line_containing, needs_ptxas
from packed_arith_kernels import packed

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
PTR = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
OPS = {"float32": ("add", "sub", "mul", "fma", "add_number", "fma_number"),
       "float16": ("add", "sub", "mul", "fma", "min", "max", "add_number", "fma_number"),
       "bfloat16": ("add", "sub", "mul", "fma", "min", "max", "add_number", "fma_number")}
CASES = [(dtype, op) for dtype, ops in OPS.items() for op in ops]


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"uint{8 * x.dtype.itemsize}"))


def _rounded(exact: Fraction, dtype) -> float:
    """``exact`` rounded to nearest-even ``dtype``, by comparing the representable neighbours of a guess."""
    guess = np.array([float(exact)], np.float32).astype(dtype)  # within one ulp of the answer
    word = int(_bits(guess)[0])
    top = 1 << (8 * guess.dtype.itemsize)
    neighbours = np.array([(word + d) % top for d in (-1, 0, 1)] + [word ^ (top >> 1)], _bits(guess).dtype).view(dtype)
    finite = [v for v in neighbours if np.isfinite(float(v))]
    return float(min(finite, key=lambda v: (abs(Fraction(float(v)) - exact), int(_bits(np.array([v]))[0]) & 1)))


def reference(op: str, x, y, z, dtype) -> np.ndarray:
    """Each lane of ``op`` exactly, rounded once to ``dtype`` (min/max: PTX's ``a < b ? a : b``)."""
    out = []
    for a, b, c in zip(x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)):
        if op in ("min", "max"):
            out.append(a if (a < b if op == "min" else a > b) else b)
            continue
        float64 = {"add": a + b, "sub": a - b, "mul": a * b, "fma": a * b + c, "add_number": a + 1.5,
                   "fma_number": a * 0.75 + c}[op]  # (its sign where the result is zero)
        a, b, c = Fraction(a), Fraction(b), Fraction(c)
        exact = {"add": a + b, "sub": a - b, "mul": a * b, "fma": a * b + c, "add_number": a + Fraction(3, 2),
                 "fma_number": a * Fraction(3, 4) + c}[op]
        value = _rounded(exact, dtype)
        out.append(value if value else np.copysign(0.0, float(exact) if exact else float64))
    return np.array(out).astype(dtype)


def _inputs(dtype, n, rng):
    """Random values over several binades (16-bit subnormals included, no overflow), so sums and products round,
    cancel and underflow."""
    scale = rng.choice([1.0, 2.0 ** -9, 2.0 ** -20, 3.0, 16.0], n)
    return [(rng.standard_normal(n) * scale).astype(DTYPES[dtype]) for _ in range(3)]


@pytest.mark.parametrize("dtype, op", CASES)
@pytest.mark.parametrize("spt", [2, 4])
def test_each_lane_is_rounded_once(dtype, op, spt):
    n = 128 * spt
    x, y, z = _inputs(dtype, n, np.random.default_rng(n + len(op)))
    out = np.full(n, np.nan, DTYPES[dtype])
    launch_interpreted(packed, (1,), x, y, z, out, OP=op, N=n, SPT=spt, num_warps=4)
    np.testing.assert_array_equal(_bits(out), _bits(reference(op, x, y, z, DTYPES[dtype])))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_min_and_max_follow_ptx_on_nan_and_signed_zeros(dtype):
    x = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, -np.inf, 3.0, -2.0] * 32, DTYPES[dtype])
    y = np.array([2.0, np.nan, np.nan, 0.0, -0.0, 5.0, np.inf, -2.0] * 32, DTYPES[dtype])
    for op, pick in (("min", [2.0, 1.0, np.nan, 0.0, -0.0, -np.inf, 3.0, -2.0]),
                     ("max", [2.0, 1.0, np.nan, 0.0, -0.0, 5.0, np.inf, -2.0])):
        out = np.zeros(256, DTYPES[dtype])
        launch_interpreted(packed, (1,), x, y, x, out, OP=op, N=256, SPT=2, num_warps=4)
        expected = np.array(pick * 32, DTYPES[dtype])  # two zeros: the second operand (a < b ? a : b)
        np.testing.assert_array_equal(np.signbit(out.astype(np.float32)), np.signbit(expected.astype(np.float32)))
        np.testing.assert_array_equal(out.astype(np.float32), expected.astype(np.float32))


def test_overflow_and_nan_follow_ieee():
    big = np.float16(60000.0)
    x = np.array([big, np.inf, np.inf, 1.0] * 64, np.float16)
    y = np.array([big, -np.inf, 1.0, np.nan] * 64, np.float16)
    out = np.zeros(256, np.float16)
    launch_interpreted(packed, (1,), x, y, y, out, OP="add", N=256, SPT=2, num_warps=4)
    np.testing.assert_array_equal(out[:4].astype(np.float32), [np.inf, np.nan, np.inf, np.nan])


# ------------------------------------------------------------------ Gluon's typing, errors at the call
@gluonkit.jit
def _typed(x_ptr, out_ptr, WHICH: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 2], [32, 1], [4, 1], [1, 0])
    rows = gl.arange(0, 128, gl.SliceLayout(1, layout))
    cols = gl.arange(0, 2, gl.SliceLayout(0, layout))
    offs = rows[:, None] * 2 + cols[None, :]
    a = gl.load(x_ptr + offs)
    if WHICH == "scalar":  # a runtime scalar operand is converted to the result type and splat
        r = blackwell.mul2(a, gl.load(x_ptr))
    else:  # a [128, 1] operand is broadcast to the [128, 2] one
        r = blackwell.sub2(a, gl.load(x_ptr + rows[:, None] * 2))
    gl.store(out_ptr + offs, r)


@pytest.mark.parametrize("which", ["scalar", "broadcast"])
def test_scalars_are_converted_and_operands_broadcast(which):
    x = np.random.default_rng(1).standard_normal(256).astype(np.float32)
    out = np.zeros(256, np.float32)
    launch_interpreted(_typed, (1,), x, out, WHICH=which, num_warps=4)
    expected = x * x[0] if which == "scalar" else x - np.repeat(x[::2], 2)
    np.testing.assert_array_equal(out, expected)


@gluonkit.jit
def _bad(x_ptr, h_ptr, q_ptr, i_ptr, WHICH: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([2], [32], [4], [0])
    offs = gl.arange(0, 256, layout)
    x = gl.load(x_ptr + offs)
    h = gl.load(h_ptr + offs)
    q = gl.load(q_ptr + offs)
    i = gl.load(i_ptr + offs)
    if WHICH == "mixed":
        blackwell.add2(h, x)
    elif WHICH == "fp8":
        blackwell.sub2(q, q)
    elif WHICH == "min_f32":
        blackwell.min2(x, x)
    elif WHICH == "ints":
        blackwell.add2(i, i)
    elif WHICH == "numbers":
        blackwell.add2(1.0, 2.0)
    else:
        one: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        o = gl.arange(0, 128, one)
        blackwell.mul2(gl.load(x_ptr + o), gl.load(x_ptr + o))


@pytest.mark.parametrize("which, message", [
    ("mixed", r"no packed add instruction for float32 <- \(float16, float32\)"),
    ("fp8", r"PTX's add/sub.e4m3x4 and .e5m2x4 are newer"),
    ("min_f32", r"no packed min instruction for float32 <- \(float32, float32\)"),
    ("ints", r"needs a floating-point tensor operand"),
    ("numbers", r"needs at least one distributed tensor operand"),
    ("one_per_thread", r"each thread must hold at least two distinct elements"),
])
def test_bad_calls_are_errors_at_the_call(which, message):
    with pytest.raises(gluonkit.CompilationError, match=message) as info:
        _bad.compile("*fp32:16", "*fp16:16", "*fp8e4nv:16", "*i32:16", WHICH=which, num_warps=4, target="sm_100a")
    line = line_containing(_bad.fn, f'WHICH == "{which}"') + 1 if which != "one_per_thread" else \
        line_containing(_bad.fn, "blackwell.mul2(")
    assert f":{line}:" in str(info.value), str(info.value)


# ------------------------------------------------------------------------------------ ptxas
def _mnemonic(op: str, dtype: str) -> str:
    fn = op.split("_")[0]
    suffix = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
    return f"{fn}{'.rn' if fn not in ('min', 'max') else ''}.{suffix}x2"


@needs_ptxas
@pytest.mark.parametrize("dtype, op", CASES)
def test_ptxas_accepts_the_pairs_for_sm_100a(dtype, op):
    compiled = packed.compile(*[f"*{PTR[dtype]}:16"] * 4, OP=op, N=512, SPT=4, num_warps=4, target="sm_100a")
    assert compiled.asm["cubin"]
    # 4 elements per thread: two instructions, each on a register pair (64-bit for float32)
    register = r"%rd\d+" if dtype == "float32" else r"%r\d+"
    found = re.findall(rf"{re.escape(_mnemonic(op, dtype))} {register}, {register}, {register}", compiled.asm["ptx"])
    assert len(found) == 2


@needs_ptxas
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_pairs_assemble_for_sm_90a_too(dtype):
    for op in ("add", "fma", "max"):
        compiled = packed.compile(*[f"*{PTR[dtype]}:16"] * 4, OP=op, N=256, SPT=2, num_warps=4, target="sm_90a")
        assert compiled.asm["cubin"] and _mnemonic(op, dtype) in compiled.asm["ptx"]


def test_float32_pairs_are_an_error_on_sm_90a():
    with pytest.raises(gluonkit.CompilationError, match=r"add2 of float32 is Blackwell's add.rn.f32x2; sm_90a has no "
                                                         r"float32 pairs") as info:
        packed.compile(*["*fp32:16"] * 4, OP="add", N=256, SPT=2, num_warps=4, target="sm_90a")
    assert "packed_arith_kernels.py" in str(info.value)
