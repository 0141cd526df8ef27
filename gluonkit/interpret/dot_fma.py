"""The ``dot_fma`` rule: ``acc = fma(a[..., m, k], b[..., k, n], acc)`` for k = 0, 1, …

Computed on the logical tensors in the GPU's order (k ascending, one rounding per step to
``acc``'s type; the product and sum are formed in float64, exact for float32 inputs up to
the rare double rounding noted for ``fma``).
"""

from __future__ import annotations

from typing import List

from ..ir.types import float64
from .dtypes import convert
from .engine import rule
from .values import from_logical, to_logical

__all__: List[str] = []


@rule("dot_fma")
def _dot_fma(program, op, operands):
    a, b, acc = (to_logical(t, program.threads, op.loc, what) for t, what in zip(operands, ("a", "b", "acc")))
    a_ty, b_ty, acc_ty = (v.type.element for v in op.operands)
    a64, b64 = convert(a, a_ty, float64), convert(b, b_ty, float64)  # exact widenings
    out = convert(acc, acc_ty, float64)
    for k in range(a.shape[-1]):
        step = a64[..., :, k:k + 1] * b64[..., k:k + 1, :] + out
        out = convert(convert(step, float64, acc_ty), acc_ty, float64)
    return [from_logical(convert(out, float64, acc_ty), op.results[0].type, program.threads, op.loc)]
