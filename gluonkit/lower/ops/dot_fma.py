"""Lowering of ``dot_fma``: per accumulator register, one ``fma`` per ``k`` in increasing order.

The verifier has checked that every thread holds, in registers, the ``a`` row and ``b``
column of each of its accumulator elements with the same thread part of the coordinates,
so the registers to read follow from the layouts' register images alone.  ``a``/``b``
elements are converted to the accumulator's type first (fp16/bf16 inputs, fp32 acc).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from ...ir import Operation
from ..context import KernelLowering
from ..llvm_types import llvm_type
from ..registry import lowering
from . import fp_convert

__all__: List[str] = []


def _register_of(ll) -> Dict[Tuple[int, ...], int]:
    """Register-image coordinates → first register index holding them."""
    table: Dict[Tuple[int, ...], int] = {}
    for r in range(ll.in_dim_size("register")):
        table.setdefault(tuple(ll.apply({"register": r}).values()), r)
    return table


@lowering("dot_fma")
def _dot_fma(ctx: KernelLowering, op: Operation) -> None:
    b_ = ctx.builder
    a_ty, b_ty, acc_ty = (v.type for v in op.operands)  # type: TensorType
    acc_elem = acc_ty.element
    ty = llvm_type(acc_elem)
    fma = ctx.intrinsic(f"llvm.fma.{ty.intrinsic_name}", ty, [ty, ty, ty])
    a_regs, b_regs, acc_regs = (ctx.get(v) for v in op.operands)

    def widened(values, src):
        if src == acc_elem:
            return list(values)
        return [fp_convert.float_to_float(ctx, v, src, acc_elem) for v in values]

    a_vals, b_vals = widened(a_regs, a_ty.element), widened(b_regs, b_ty.element)
    a_at, b_at = _register_of(ctx.linear_layout(a_ty)), _register_of(ctx.linear_layout(b_ty))
    acc_ll = ctx.linear_layout(acc_ty)
    out = []
    for r, value in enumerate(acc_regs):
        c = list(acc_ll.apply({"register": r}).values())
        for k in range(a_ty.shape[-1]):
            x = a_vals[a_at[tuple(c[:-1] + [k])]]
            y = b_vals[b_at[tuple(c[:-2] + [k, c[-1]])]]
            value = b_.call(fma, [x, y, value])
        out.append(value)
    ctx.set(op.results[0], out)
