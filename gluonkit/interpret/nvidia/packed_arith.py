"""Interpreter rule of ``packed_arith``: Blackwell's two-lane ``add2``, ``sub2``, ``mul2``, ``fma2``, ``min2``,
``max2``.

Each lane is one correctly rounded operation in the result's type (float32, float16 or
bfloat16), as the ``.rn`` PTX instructions compute it; ``fma`` rounds ``a*b + c`` once.
The exact result is formed in float64 as an unevaluated sum ``s + e`` (products of these
types are exact in float64; ``TwoSum`` gives the sum's error), then rounded *to odd* in
float64 and, for bfloat16, once more in float32 (whose conversion to bfloat16 is the one
numpy offers): rounding to odd with two spare bits keeps the final round-to-nearest-even
exact, where rounding twice to nearest would not be.  ``min``/``max`` select: where exactly
one operand is NaN the other is returned, ``a < b ? a : b`` otherwise (PTX's rule, which
returns ``b`` for two zeros).
"""

from __future__ import annotations

import numpy as np

from ...ir.types import element_type
from ..dtypes import numpy_dtype
from ..engine import rule
from ..values import raw, wrap

__all__ = ["round_sum"]


def _to_odd(value: np.ndarray, exact_above: np.ndarray) -> np.ndarray:
    """``value`` (an inexact rounding where ``exact_above`` is non-zero: the sign of exact - value) rounded
    to odd: an inexact result with an even last bit moves one ulp toward the exact value."""
    bits = value.view(np.dtype(f"uint{8 * value.dtype.itemsize}"))
    even = (bits & 1) == 0
    toward = np.where(exact_above > 0, np.inf, -np.inf).astype(value.dtype)
    return np.where((exact_above != 0) & even & np.isfinite(value), np.nextafter(value, toward), value)


def round_sum(s: np.ndarray, e: np.ndarray, dtype) -> np.ndarray:
    """``s + e`` (float64 arrays, ``|e|`` at most half an ulp of ``s``) rounded once to nearest-even ``dtype``."""
    odd = _to_odd(s, np.sign(e))
    if dtype.name == "bfloat16":  # numpy converts float64 to bfloat16 through float32: round to odd there first
        narrow = odd.astype(np.float32)
        with np.errstate(invalid="ignore"):
            odd = _to_odd(narrow, np.sign(odd - narrow.astype(np.float64)))
    return odd.astype(numpy_dtype(dtype))


def _two_sum(a: np.ndarray, b: np.ndarray):
    """``(s, e)`` with ``s`` the float64 sum and ``e`` its exact error (0 where ``s`` is not finite)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


def _select(fn: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        pick_a = a < b if fn == "min" else a > b
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.where(pick_a, a, b)))


@rule("packed_arith")
def _packed_arith(program, op, operands):
    fn, ty = op.attrs["fn"], op.results[0].type
    dtype = element_type(ty)
    values = [np.asarray(raw(v)) for v in operands]
    if fn in ("min", "max"):
        return [wrap(ty, _select(fn, *values))]
    wide = [v.astype(np.float64) for v in values]  # exact widenings
    with np.errstate(invalid="ignore", over="ignore"):
        if fn == "mul":
            s, e = wide[0] * wide[1], np.zeros_like(wide[0])  # exact: at most 2 x 24 significant bits
        elif fn == "fma":
            s, e = _two_sum(wide[0] * wide[1], wide[2])
        else:
            s, e = _two_sum(wide[0], -wide[1] if fn == "sub" else wide[1])
    return [wrap(ty, round_sum(s, e, dtype))]
