"""Warp shuffles (``shfl.sync``) of values of any type up to 64 bits.

``bfly`` reads from lane ``lane ^ mask`` (butterfly reductions); ``idx`` from an explicit
lane (layout conversions within a warp).  Values narrower than 32 bits travel zero-extended;
64-bit values as two 32-bit halves.
"""

from __future__ import annotations

import llvmlite.ir as lir

from ..context import KernelLowering
from ..llvm_types import I32, bit_width

__all__ = ["shuffle"]


def shuffle(ctx: KernelLowering, mode: str, value: lir.Value, lane: lir.Value) -> lir.Value:
    """``value`` as held by another lane of this warp; ``mode`` is ``"bfly"`` or ``"idx"``."""
    b = ctx.builder
    shfl = ctx.intrinsic(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
    bits = bit_width(value.type)
    is_int = isinstance(value.type, lir.IntType)
    as_int = value if is_int else b.bitcast(value, lir.IntType(bits))

    def one(word):
        return b.call(shfl, [I32(-1), word, lane, I32(31)])

    if bits == 64:
        wide = lir.IntType(64)
        low = one(b.trunc(as_int, I32))
        high = one(b.trunc(b.lshr(as_int, wide(32)), I32))
        result = b.or_(b.zext(low, wide), b.shl(b.zext(high, wide), wide(32)))
    elif bits < 32:
        result = b.trunc(one(b.zext(as_int, I32)), lir.IntType(bits))
    else:
        result = one(as_int)
    return result if is_int else b.bitcast(result, value.type)
