"""Blackwell's packed arithmetic in kernels: ``add2``, ``sub2``, ``mul2``, ``fma2``, ``min2``, ``max2``.

Gluon's names and signatures (``triton.experimental.gluon.language.nvidia.blackwell``)::

    y = add2(a, b)              # a + b, two lanes per instruction (add.rn.f32x2 on float32)
    y = fma2(a, b, c)           # a * b + c with one rounding (fma.rn.f32x2)
    y = max2(a, b, dtype=None)  # float16 / bfloat16 only (max.f16x2)

The result's element type is Gluon's: ``dtype`` when given, else the floating-point tensor
operand with the most elements sets it, promoted with the other floating-point operands as
``+`` would (an fp8 addend of ``add2``/``sub2``/``fma2`` keeps its type); Python numbers and
scalars become ``dtype`` and every operand is broadcast to the result's shape.  Tensor operands
are not converted: the instruction takes each operand in the result's type (float32 for
add/sub/mul/fma; float16 and bfloat16 for all six), anything else is an error at the call
naming the signature (:func:`gluonkit.ir.verify_packed_arith.packed_problem`).  Each thread
must hold two or more elements of the result, which the lowering pairs register by register.
"""

from __future__ import annotations

import math

from ...ir.types import TensorType
from ...ir.verify_packed_arith import packed_problem, pairs_registers
from ...layouts.distributed import AutoLayout
from .. import promotion
from ..errors import LayoutMismatchError, TypeMismatchError
from ..tensor import builtin, tensor

__all__ = ["add2", "sub2", "mul2", "fma2", "min2", "max2"]


def _result_dtype(sem, fn: str, operands, dtype):
    """Gluon's result type: ``dtype``, or the largest floating-point tensor's, promoted with the others'."""
    if dtype is not None:
        return sem.require_dtype(dtype, f"{fn}2's dtype")
    blocks = [v for v in operands if isinstance(v, tensor) and v.is_block() and v.dtype.is_floating()]
    reference = max(blocks, key=lambda v: math.prod(v.shape))
    addend = operands[-1]
    if fn in ("add", "sub", "fma") and isinstance(addend, tensor) and addend.dtype.is_fp8():
        result = addend.dtype
    else:
        result = reference.dtype
    for v in operands:
        literal = not isinstance(v, tensor)
        ty = promotion.literal_dtype(v) if literal and promotion.is_literal(v) else getattr(v, "dtype", None)
        if ty is None or not ty.is_floating() or (result.is_fp8() and ty.is_fp8()):
            continue
        try:
            result = promotion.computation_type(result, False, ty, literal)
        except TypeError as e:
            sem.error(f"{fn}2: {e}", TypeMismatchError)
    return result


def _packed(sem, fn: str, operands, dtype) -> tensor:
    name = f"{fn}2"
    for v in operands:
        if not isinstance(v, tensor) and not promotion.is_literal(v):
            sem.error(f"{name}'s operands must be tensors or numbers, got {v!r}", TypeMismatchError)
    if not any(isinstance(v, tensor) and v.is_block() for v in operands):
        sem.error(f"{name} needs at least one distributed tensor operand (packed arithmetic pairs the elements a "
                  "thread holds)", TypeMismatchError)
    if not any(isinstance(v, tensor) and v.is_block() and v.dtype.is_floating() for v in operands):
        sem.error(f"{name} needs a floating-point tensor operand; packed FP4 operands (uint8 pairs of e2m1) are "
                  "Rubin's and not supported", TypeMismatchError)
    result = _result_dtype(sem, fn, operands, dtype)
    values = [v if isinstance(v, tensor) and v.is_block() else sem.cast(sem.to_tensor(v, result), result)
              for v in operands]
    values = sem.broadcast_all(values)
    problem = packed_problem(fn, [v.dtype for v in values], result)
    if problem:
        sem.error(f"{name}: {problem}", TypeMismatchError)
    result_type = TensorType(result, values[0].shape, values[0].layout)
    if not isinstance(result_type.layout, AutoLayout) and not pairs_registers(result_type):
        sem.error(f"{name}: each thread must hold at least two distinct elements to pair them, but "
                  f"{result_type.layout!r} gives it one of {list(result_type.shape)}; use a layout with "
                  "size_per_thread 2 (or more) along a dimension", LayoutMismatchError)
    return sem.create1("packed_arith", values, result_type, {"fn": fn})


@builtin
def add2(lhs, rhs, dtype=None, _semantic=None):
    """``lhs + rhs`` with a two-lane packed instruction (see the module docstring)."""
    return _packed(_semantic, "add", (lhs, rhs), dtype)


@builtin
def sub2(lhs, rhs, dtype=None, _semantic=None):
    """``lhs - rhs`` with a two-lane packed instruction."""
    return _packed(_semantic, "sub", (lhs, rhs), dtype)


@builtin
def mul2(lhs, rhs, dtype=None, _semantic=None):
    """``lhs * rhs`` with a two-lane packed instruction."""
    return _packed(_semantic, "mul", (lhs, rhs), dtype)


@builtin
def fma2(lhs, rhs, acc, dtype=None, _semantic=None):
    """``lhs * rhs + acc`` with one rounding, two lanes per instruction."""
    return _packed(_semantic, "fma", (lhs, rhs, acc), dtype)


@builtin
def min2(lhs, rhs, dtype=None, _semantic=None):
    """The smaller of ``lhs`` and ``rhs`` (the other where one is NaN), float16/bfloat16 pairs."""
    return _packed(_semantic, "min", (lhs, rhs), dtype)


@builtin
def max2(lhs, rhs, dtype=None, _semantic=None):
    """The larger of ``lhs`` and ``rhs`` (the other where one is NaN), float16/bfloat16 pairs."""
    return _packed(_semantic, "max", (lhs, rhs), dtype)
