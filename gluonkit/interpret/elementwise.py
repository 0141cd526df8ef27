"""Rules for element-wise ops: arithmetic, math, comparisons, select, casts, pointer offsets.

Element-wise ops act on each (thread, register) independently — exactly what the GPU does,
with no data movement — so they work on register files, on scalars, and on the batched
scalars of a reduce's combine function alike.

Semantics (the op catalogue's): integer arithmetic wraps; division and remainder truncate
toward zero as in C (division by zero is undefined on the GPU; here the quotient is -1,
all bits set, and the remainder the dividend); shifts by at least the bit width give 0 (or
the sign for arithmetic right shifts); ``shr`` is arithmetic for signed types.  Floats
narrower than 32 bits compute in float32 and round to their type after every op; ``fma``
computes ``a*b + c`` in float64 (the product of float32 inputs is exact there) and rounds
to the type, which can differ from a truly fused result only by double rounding in rare
ties (and float64 ``fma`` is not fused).  ``exp2`` of a 32-bit (or narrower) float flushes a
subnormal result to 0, as the GPU's ``ex2.approx.ftz.f32`` does.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.types import PointerType, element_type, float64
from .dtypes import compute_dtype, convert, numpy_dtype
from .engine import rule
from .errors import InterpreterError
from .values import raw, wrap

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _operand(value, ty) -> np.ndarray:
    """An operand's data in the dtype its arithmetic is computed in."""
    return np.asarray(raw(value)).astype(compute_dtype(ty), copy=False)


# ----------------------------------------------------------------------------- binary
def _int_div(a, b):
    safe = np.where(b == 0, 1, b)
    q = a // safe
    q = q + ((q * safe != a) & ((a < 0) != (safe < 0))).astype(q.dtype)  # floor -> trunc
    return np.where(b == 0, np.array(-1).astype(a.dtype), q)


def _int_rem(a, b):
    return np.where(b == 0, a, a - _int_div(a, b) * b)


def _shift(a, b, ty, left: bool):
    bits = ty.primitive_bitwidth
    amount = np.minimum(b.view(np.dtype(f"uint{a.itemsize * 8}")), bits)
    if left:
        return np.where(amount >= bits, 0, np.left_shift(a, np.minimum(amount, bits - 1).astype(a.dtype)))
    fill = np.right_shift(a, bits - 1) if ty.is_int_signed() else np.zeros_like(a)
    return np.where(amount >= bits, fill, np.right_shift(a, np.minimum(amount, bits - 1).astype(a.dtype)))


def _umulhi(a, b, ty):
    bits = ty.primitive_bitwidth
    unsigned = np.dtype(f"uint{bits}")
    ua, ub = a.view(unsigned), b.view(unsigned)
    if bits <= 32:
        wide = ua.astype(np.uint64) * ub.astype(np.uint64)
        return (wide >> np.uint64(bits)).astype(unsigned).view(a.dtype)
    hi = np.frompyfunc(lambda x, y: (int(x) * int(y)) >> bits, 2, 1)(ua, ub)
    return np.asarray(hi, dtype=object).astype(unsigned).view(a.dtype)


def _max_min(fn, a, b, ty, propagate_nan):
    if not ty.is_floating():
        return np.maximum(a, b) if fn == "maximum" else np.minimum(a, b)
    if propagate_nan == "all":
        return np.maximum(a, b) if fn == "maximum" else np.minimum(a, b)
    return np.fmax(a, b) if fn == "maximum" else np.fmin(a, b)


_ARITH = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
_BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
# int1 arithmetic is arithmetic modulo 2.
_BOOL = {"add": np.logical_xor, "sub": np.logical_xor, "mul": np.logical_and,
         "maximum": np.logical_or, "minimum": np.logical_and}


@rule("binary")
def _binary(program, op, operands):
    fn = op.attrs["fn"]
    ty = element_type(op.operands[0].type)
    a, b = (_operand(v, ty) for v in operands)
    if ty.is_bool():
        table = {**_BITWISE, **_BOOL}
        if fn not in table:
            raise InterpreterError(f"binary {fn} is not defined on int1", op.loc)
        result = table[fn](a, b)
    elif fn in _ARITH:
        result = _ARITH[fn](a, b)
    elif fn in _BITWISE:
        result = _BITWISE[fn](a, b)
    elif fn == "div":
        result = np.divide(a, b) if ty.is_floating() else _int_div(a, b)
    elif fn in ("div_rn", "div_approx"):  # float only; the GPU's approximation is within 2 ulp
        result = np.divide(a, b)
    elif fn == "rem":
        result = np.fmod(a, b) if ty.is_floating() else _int_rem(a, b)
    elif fn in ("shl", "shr"):
        result = _shift(a, b, ty, fn == "shl")
    elif fn in ("maximum", "minimum"):
        result = _max_min(fn, a, b, ty, op.attrs.get("propagate_nan", "none"))
    elif fn == "pow":
        result = np.power(a, b)
    else:  # umulhi
        result = _umulhi(a, b, ty)
    return [wrap(op.results[0].type, _round(result, ty))]


def _round(result, ty) -> np.ndarray:
    """Round a result computed in :func:`compute_dtype` to ``ty``."""
    return np.asarray(result).astype(numpy_dtype(ty))


# ------------------------------------------------------------------------------ unary
def _exp2_ftz(x):
    """``2**x`` with results below float32's smallest normal flushed to 0 (``ex2.approx.ftz``);
    float64 is not flushed."""
    result = np.exp2(x)
    if x.dtype == np.float64:
        return result
    return np.where(result < np.finfo(np.float32).tiny, np.zeros_like(result), result)


_MATH = {
    "exp": np.exp, "exp2": _exp2_ftz, "log": np.log, "log2": np.log2, "sqrt": np.sqrt, "sqrt_rn": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "floor": np.floor,
    "ceil": np.ceil, "erf": lambda x: _erf(x).astype(x.dtype),
}


@rule("unary")
def _unary(program, op, operands):
    fn = op.attrs["fn"]
    ty = element_type(op.operands[0].type)
    x = _operand(operands[0], ty)
    if fn == "neg":
        result = x if ty.is_bool() else np.negative(x)  # -x == x modulo 2
    elif fn == "not":
        result = np.invert(x)
    elif fn == "abs":
        result = x if ty.is_int_unsigned() or ty.is_bool() else np.abs(x)
    elif ty.is_floating():
        result = _MATH[fn](x)
    else:
        raise InterpreterError(f"unary {fn} needs a floating-point operand, got {ty}", op.loc)
    return [wrap(op.results[0].type, _round(result, ty))]


# ----------------------------------------------------------------------- comparisons
_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


@rule("compare")
def _compare(program, op, operands):
    ty = element_type(op.operands[0].type)
    a, b = (_operand(v, ty) for v in operands)
    return [wrap(op.results[0].type, _COMPARE[op.attrs["predicate"]](a, b))]


@rule("fma")
def _fma(program, op, operands):
    ty = element_type(op.operands[0].type)
    a, b, c = (np.asarray(raw(v)).astype(np.float64) for v in operands)
    return [wrap(op.results[0].type, convert(a * b + c, float64, ty))]


@rule("select")
def _select(program, op, operands):
    cond, t, f = (raw(v) for v in operands)
    return [wrap(op.results[0].type, np.where(cond, t, f))]


# ------------------------------------------------------------------------ conversions
@rule("cast")
def _cast(program, op, operands):
    src = element_type(op.operands[0].type)
    dst = op.attrs["to"]
    x = np.asarray(raw(operands[0]))
    if op.attrs.get("bitcast"):
        result = np.ascontiguousarray(x).view(numpy_dtype(dst))
    else:
        result = convert(x, src, dst, op.attrs.get("rounding") or "rtne")
    return [wrap(op.results[0].type, result)]


@rule("addptr")
def _addptr(program, op, operands):
    ptr_ty = element_type(op.operands[0].type)
    assert isinstance(ptr_ty, PointerType)
    base = np.asarray(raw(operands[0])).astype(np.int64)
    offset = np.asarray(raw(operands[1])).astype(np.int64)
    return [wrap(op.results[0].type, base + offset * ptr_ty.element.itemsize)]

