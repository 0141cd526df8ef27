"""Triton's type-promotion rules for binary operators (pure functions of dtypes).

An operand is either a *tensor* (any runtime value: a 0-d scalar or a distributed tensor)
or a *literal* (a Python ``bool``/``int``/``float`` written in the kernel or held in a
``constexpr``).  The element type both operands are converted to is decided as follows:

0. **Literals do not widen tensors of their kind or above.**  Kinds are ordered
   ``bool < uint < int < float``; if the literal's kind is at most the tensor's kind, the
   tensor's type wins: ``x_int8 + 1 -> int8``, ``x_fp16 * 2.0 -> float16``,
   ``x_uint8 + True -> uint8``.  Exception: ``/`` and ``%`` on ``float16``/``bfloat16`` compute
   in ``float32``.  The literal must fit the chosen type (``x_int8 + 300`` is an error, and
   so is a negative literal with an unsigned tensor).  Otherwise the literal takes its own
   type (:func:`literal_dtype`: ``int`` -> ``int32``, widening to ``uint32``/``int64``/``uint64``
   when needed; ``float`` -> ``float32``, ``float64`` beyond its range; ``bool`` -> ``int1``)
   and the rules below apply: ``x_int32 + 1.5 -> float32``.
1. Either operand ``float64`` -> ``float64``.
2. Either ``float32`` -> ``float32``  (``int32 + float32 -> float32``).
3. Either ``float16`` -> ``float16`` (``int32 + float16 -> float16``; ``float16 + bfloat16 ->
   float16``), but ``float32`` for ``/`` and ``%``.
4. Both ``bfloat16`` -> ``bfloat16`` (``float32`` for ``/`` and ``%``); one ``bfloat16`` ->
   ``float32``.
5. Two fp8 types: the type if equal, else ``float16``; fp8 with an integer is an error.
6. Two integers: C's usual arithmetic conversions on (width, signedness): the wider wins
   (``int32 + int64 -> int64``); at equal width unsigned wins (``int32 + uint32 ->
   uint32``); ``int1`` counts as a 1-bit signed integer.  ``/``, ``//`` and ``%`` refuse
   operands of different signedness.

Bitwise operators and shifts require integers and use rule 6; ``/`` then converts an
integer result to ``float32``; ``//`` requires integers.
"""

from __future__ import annotations

import math
from typing import Union

from ..ir.types import (
    DType, bfloat16, float16, float32, float64, int1, int32, int64, uint32, uint64,
)

__all__ = ["KIND_ORDER", "literal_dtype", "computation_type", "integer_promote",
           "literal_fits", "is_literal"]

KIND_ORDER = {"bool": 0, "uint": 1, "int": 2, "float": 3}

_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_MIN_NORMAL = 1.1754943508222875e-38


def is_literal(value) -> bool:
    """A Python number that takes part in promotion as a literal."""
    return isinstance(value, (bool, int, float))


def literal_dtype(value: Union[bool, int, float]) -> DType:
    """The type a Python number gets on its own (Triton's ``to_tensor``)."""
    if isinstance(value, bool):
        return int1
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return int32
        if 2**31 <= value < 2**32:
            return uint32
        if -2**63 <= value < 2**63:
            return int64
        if 2**63 <= value < 2**64:
            return uint64
        raise ValueError(f"integer literal {value} does not fit in 64 bits")
    if math.isinf(value) or math.isnan(value) or value == 0.0:
        return float32
    if _FLOAT32_MIN_NORMAL <= abs(value) <= _FLOAT32_MAX:
        return float32
    return float64


def literal_fits(value: Union[bool, int, float], dtype: DType) -> bool:
    """Whether the literal ``value`` is representable in ``dtype`` (floats: always)."""
    if dtype.is_floating():
        return True
    if isinstance(value, float):
        return False
    v = int(value)
    bits = dtype.primitive_bitwidth
    if dtype.is_bool():
        return v in (0, 1)
    if dtype.is_int_unsigned():
        return 0 <= v < 2**bits
    return -2**(bits - 1) <= v < 2**(bits - 1)


def integer_promote(a: DType, b: DType) -> DType:
    """Rule 6: C's usual arithmetic conversions on two integer types."""
    a_unsigned, b_unsigned = a.is_int_unsigned(), b.is_int_unsigned()
    wa, wb = a.primitive_bitwidth, b.primitive_bitwidth
    if a_unsigned == b_unsigned:
        return a if wa > wb else b
    if a_unsigned:
        return a if wa >= wb else b
    return b if wb >= wa else a


def computation_type(a: DType, a_literal: bool, b: DType, b_literal: bool,
                     div_or_mod: bool = False) -> DType:
    """The common element type of a binary arithmetic op (rules 0–6 of the module doc).

    ``a``/``b`` are the operands' element types (a literal's own :func:`literal_dtype`).
    Raises ``TypeError`` saying what is wrong when no rule applies.
    """
    if a_literal != b_literal:
        lit, ten = (a, b) if a_literal else (b, a)
        if KIND_ORDER[lit.kind] <= KIND_ORDER[ten.kind]:
            if div_or_mod and ten in (float16, bfloat16):
                return float32
            return ten
    if float64 in (a, b):
        return float64
    if float32 in (a, b):
        return float32
    if float16 in (a, b):
        return float32 if div_or_mod else float16
    if a == bfloat16 and b == bfloat16:
        return float32 if div_or_mod else bfloat16
    if bfloat16 in (a, b):
        return float32
    if a.is_fp8() and b.is_fp8():
        return a if a == b else float16
    if not (a.is_int() and b.is_int()):
        raise TypeError(f"no common type for {a} and {b}; cast one of them with .to(...)")
    if div_or_mod and a.is_int_unsigned() != b.is_int_unsigned():
        raise TypeError(
            f"/, // and % need operands of one signedness, got {a} and {b}; "
            "cast one of them with .to(...)")
    return integer_promote(a, b)
