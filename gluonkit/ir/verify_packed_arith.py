"""Verifier rule of ``packed_arith`` (Blackwell's ``add2``, ``sub2``, ``mul2``, ``fma2``, ``min2``, ``max2``).

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  :func:`packed_problem` is also what the frontend asks, so a bad call is reported at
the user's line.  The rules are those of the packed PTX instructions that exist for sm_100a
(PTX ISA 8.6+) and that ptxas 13.0 assembles:

* float32: ``add``/``sub``/``mul``/``fma`` (``add.rn.f32x2`` …, a 64-bit register pair);
* float16 and bfloat16: all six (``add.rn.f16x2`` …, ``min.bf16x2`` …, one 32-bit register);
* every operand and the result have one element type (Triton 3.9 also names mixed
  signatures, such as ``f32x2 <- (f16x2, f32x2)``, that no PTX instruction has);
* each thread holds at least two distinct elements of the result, so registers pair up
  (a layout whose register bases are all zero, or absent, has nothing to pair).
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..layouts.distributed import AutoLayout
from .core import Operation
from .ops import PACKED_FNS
from .types import TensorType, bfloat16, element_type, float16, float32
from .verifier import rule
from .verify_checks import count_parts, fail, same_shape_and_layout

__all__ = ["PACKED_TYPES", "packed_problem", "pairs_registers"]

#: The packed instructions per element type.
PACKED_TYPES = {float32: ("add", "sub", "mul", "fma"), float16: PACKED_FNS, bfloat16: PACKED_FNS}


def packed_problem(fn: str, operands: Sequence, result) -> Optional[str]:
    """Why ``fn`` on operand element types ``operands`` giving ``result`` is no packed instruction."""
    if fn not in PACKED_FNS:
        return f"fn must be one of {', '.join(PACKED_FNS)}, got {fn!r}"
    if len(operands) != (3 if fn == "fma" else 2):
        return f"{fn} takes {3 if fn == 'fma' else 2} operands, got {len(operands)}"
    signature = f"{result} <- ({', '.join(map(str, operands))})"
    if result.is_fp8() and fn in ("add", "sub"):
        return (f"no packed {fn} for {signature}: PTX's add/sub.e4m3x4 and .e5m2x4 are newer than the PTX ISA that "
                "ptxas 13.0 accepts for sm_100a (not built); convert to float16 and use the float16 form")
    if any(t != result for t in operands) or fn not in PACKED_TYPES.get(result, ()):
        supported = "; ".join(f"{t}: {'/'.join(fns)}" for t, fns in PACKED_TYPES.items())
        return (f"no packed {fn} instruction for {signature}; packed arithmetic on sm_100a takes operands of the "
                f"result's type ({supported}); convert the operands with .to(...) or pass dtype=")
    return None


def pairs_registers(ty: TensorType) -> bool:
    """Whether each thread holds at least two distinct elements of ``ty`` (a non-zero register basis)."""
    bases = ty.layout.to_linear_layout(list(ty.shape)).bases.get("register", [])
    return any(any(b) for b in bases)


@rule("packed_arith")
def _packed_arith(op: Operation):
    count_parts(op, 3 if op.attrs.get("fn") == "fma" else 2, 1)
    same_shape_and_layout(op, op.operands + op.results, "operands and result")
    result = op.results[0].type
    if not isinstance(result, TensorType):
        fail(op, f"operates on distributed tensors, got {result}")
    problem = packed_problem(op.attrs.get("fn"), [element_type(v.type) for v in op.operands], result.element)
    if problem:
        fail(op, problem)
    if not isinstance(result.layout, AutoLayout) and not pairs_registers(result):
        fail(op, f"each thread must hold at least two distinct elements to pair them, but {result.layout!r} gives "
                 f"it one of {list(result.shape)}; use a layout with size_per_thread 2 (or more) along a dimension")
