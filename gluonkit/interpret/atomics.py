"""Rules for ``atomic_rmw`` and ``atomic_cas``: sequential read-modify-writes of global memory.

As on the GPU, each element of the pointer tensor is updated once, however many threads
its layout holds it in (the copy in the lowest thread and register performs it; every
copy of the result gets the old value it returned).  A program applies its elements in
thread-then-register order, and programs run one after another, so updates of one address
by many elements or programs (a histogram) happen in a fixed order: the final value is
what the GPU computes (up to float rounding, whose order the GPU does not fix), and each
element's old value is one the GPU could return.  Masked-off elements touch no memory and
return 0 (undefined on the GPU).  The copies of an operand that a layout replicates must
agree, as for ``store``.
"""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType, element_type
from .dtypes import numpy_dtype
from .engine import rule
from .values import Tensor, element_text, to_logical, wrap

__all__ = []

_ACCUMULATE = {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
               "max": np.maximum, "min": np.minimum}


def _logical(program, op, value, what: str) -> np.ndarray:
    """The operand as one value per element (a 0-d array for scalars)."""
    if isinstance(value, Tensor):
        return to_logical(value, program.num_warps, op.loc, what).ravel()
    return np.asarray(value).reshape(1)


def _apply(fn: str, initial: np.ndarray, values: np.ndarray, compare) -> tuple:
    """(old value per update, final value) of one address updated by ``values`` in order."""
    if fn == "xchg":
        chain = np.concatenate([initial[:1], values])
        return chain[:-1], chain[-1]
    if fn == "cas":
        bits = np.dtype(f"uint{8 * values.itemsize}")
        current, olds = initial[0], np.empty_like(values)
        for i, (c, v) in enumerate(zip(compare, values)):
            olds[i] = current
            if np.asarray(current).view(bits) == np.asarray(c).view(bits):
                current = v
        return olds, current
    chain = _ACCUMULATE[fn].accumulate(np.concatenate([initial[:1], values]), dtype=values.dtype)
    return chain[:-1], chain[-1]


def _run(program, op, operands, fn: str):
    ty = op.results[0].type
    dtype = numpy_dtype(element_type(ty))
    ptr = _logical(program, op, operands[0], "the pointer").astype(np.int64)
    values = _logical(program, op, operands[-2 if op.attrs.get("has_mask") else -1], "the value").astype(dtype)
    compare = _logical(program, op, operands[1], "the compared value").astype(dtype) if fn == "cas" else None
    active = np.ones(ptr.shape, bool)
    if op.attrs.get("has_mask"):
        active = np.broadcast_to(_logical(program, op, operands[-1], "the mask").astype(bool), ptr.shape)
    ptr, values = np.broadcast_to(ptr, active.shape), np.broadcast_to(values, active.shape)
    positions = np.flatnonzero(active)
    addresses = ptr[positions]
    order = np.argsort(addresses, kind="stable")  # by address, program order within one
    sorted_addresses = addresses[order]
    starts = np.flatnonzero(np.r_[True, sorted_addresses[1:] != sorted_addresses[:-1]]) if order.size else order
    ends = np.r_[starts[1:], order.size].astype(np.int64)
    def describe(i: int) -> str:  # the i-th address updated: the first element that updates it
        return f"pointer {element_text(_shape(ty), int(positions[order[starts[i]]]))} in program {tuple(program.pid)}"

    initial = program.memory.read(sorted_addresses[starts], dtype, op.loc, describe)
    old = np.zeros(active.shape, dtype)
    final = np.empty(starts.size, dtype)
    for g, (s, e) in enumerate(zip(starts, ends)):
        which = order[s:e]
        cmp = np.broadcast_to(compare, active.shape)[positions[which]] if compare is not None else None
        olds, final[g] = _apply(fn, initial[g:g + 1], values[positions[which]], cmp)
        old[positions[which]] = olds
    program.memory.write(sorted_addresses[starts], final, op.loc, describe)
    if isinstance(ty, TensorType):
        p = program.placement(ty, op)
        return [Tensor(ty, old[p.index])]
    return [wrap(ty, old[0])]


def _shape(ty):
    return ty.shape if isinstance(ty, TensorType) else ()


@rule("atomic_rmw")
def _atomic_rmw(program, op, operands):
    return _run(program, op, operands, op.attrs["fn"])


@rule("atomic_cas")
def _atomic_cas(program, op, operands):
    return _run(program, op, operands, "cas")
