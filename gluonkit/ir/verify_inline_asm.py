"""Verifier rule of ``inline_asm_elementwise`` (``gl.inline_asm_elementwise``).

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  Arguments and results are numbers of one shape and layout; ``asm`` and
``constraints`` are strings; ``pack`` (elements per execution of the assembly) is a power
of two, and above 1 only for tensors.
"""

from __future__ import annotations

from .types import DType, TensorType, element_type
from .verifier import rule
from .verify_checks import fail, same_shape_and_layout

__all__ = []


@rule("inline_asm_elementwise")
def _inline_asm(op):
    if op.regions or not op.results:
        fail(op, "has at least one result and no regions")
    if not isinstance(op.attrs.get("asm"), str) or not isinstance(op.attrs.get("constraints"), str):
        fail(op, "asm and constraints must be strings")
    pack = op.attrs.get("pack")
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1 or pack & (pack - 1):
        fail(op, f"pack must be a positive power of two, got {pack!r}")
    same_shape_and_layout(op, list(op.operands) + op.results, "arguments and results")
    for v in list(op.operands) + op.results:
        if not isinstance(element_type(v.type), DType):
            fail(op, f"arguments and results must be numbers, got {element_type(v.type)}")
    if pack > 1 and not isinstance(op.results[0].type, TensorType):
        fail(op, "pack > 1 needs tensor arguments")
