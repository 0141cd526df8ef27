"""Gluon 3.9's ``fp4_to_fp``: unpack e2m1 (fp4) pairs stored in bytes to wider floats.

Built from existing ops: each byte holds two e2m1 values, the low nibble first along
``axis``; a nibble is sign (bit 3), exponent (bits 2-1, bias 1) and mantissa (bit 0), so
its float32 bit pattern is assembled with integer ops and bitcast (exactly representable
in float16/bfloat16 too).  The two halves are joined along a new last dimension and moved
next to ``axis``, then merged into it, so the result's layout is the source's with one
more register bit at the bottom of ``axis`` (what Gluon infers for its ``fp4_to_fp``).
"""

from __future__ import annotations

from ..ir.types import bfloat16, float16, float32, int8, int32, uint8
from .constexpr import unwrap
from .errors import ArgumentError, TypeMismatchError
from .tensor import builtin

__all__ = ["fp4_to_fp"]


def _decode(sem, nibble):
    """float32 values of int32 e2m1 codes 0…15."""
    sign = sem.bitwise("shl", sem.bitwise("and", nibble, 8), 28)
    exponent = sem.bitwise("shr", sem.bitwise("and", nibble, 6), 1)
    mantissa = sem.bitwise("and", nibble, 1)
    normal = sem.bitwise("or", sem.bitwise("shl", sem.arith("add", exponent, 126), 23),
                         sem.bitwise("shl", mantissa, 22))
    subnormal = sem.arith("mul", mantissa, 126 << 23)  # 0.5 or 0
    bits = sem.bitwise("or", sem.where(sem.compare("gt", exponent, 0), normal, subnormal), sign)
    return sem.cast(bits, float32, bitcast=True)


@builtin
def fp4_to_fp(src, elem_type, axis, _semantic=None):
    """Unpack the e2m1 pairs of the uint8 tensor ``src`` into ``elem_type`` (bfloat16,
    float16 or float32) values; ``axis`` doubles in size, the low nibble of each byte first."""
    sem = _semantic
    src = sem.require_tensor(src, "fp4_to_fp source", block=True)
    elem_type = sem.require_dtype(unwrap(elem_type), "fp4_to_fp elem_type")
    if src.dtype not in (uint8, int8):
        sem.error(f"fp4_to_fp expects a uint8 tensor of packed e2m1 pairs, got {src.dtype}", TypeMismatchError)
    if elem_type not in (bfloat16, float16, float32):
        sem.error(f"fp4_to_fp elem_type must be bfloat16, float16 or float32, got {elem_type}", TypeMismatchError)
    rank = src.rank
    axis = sem.require_int(axis, "fp4_to_fp axis")
    if not -rank <= axis < rank:
        sem.error(f"fp4_to_fp axis {axis} is out of range for rank {rank}", ArgumentError)
    axis %= rank
    codes = sem.cast(sem.cast(src, uint8, bitcast=True), int32)
    low = sem.cast(_decode(sem, sem.bitwise("and", codes, 15)), elem_type)
    high = sem.cast(_decode(sem, sem.bitwise("shr", codes, 4)), elem_type)
    pairs = sem.join(low, high)
    if axis != rank - 1:
        order = list(range(axis + 1)) + [rank] + list(range(axis + 1, rank))
        pairs = sem.permute(pairs, order)
    shape = list(src.shape)
    shape[axis] *= 2
    return sem.reshape(pairs, shape)
