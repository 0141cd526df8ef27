"""Rules for the atomics: ``atomic_rmw``, ``atomic_cas``, ``atomic_load`` and ``atomic_store``.

As on the GPU, each element of the pointer tensor is updated once, however many threads
its layout holds it in (the copy in the lowest thread and register performs it; every
copy of the result gets the old value it returned).  A program applies its elements in
thread-then-register order, and programs run one after another, so updates of one address
by many elements or programs (a histogram) happen in a fixed order: the final value is
what the GPU computes (up to float rounding, whose order the GPU does not fix), and each
element's old value is one the GPU could return.  Several elements of one ``atomic_store``
writing one address leave the last one's value (on the GPU one of them, none torn).
Masked-off elements touch no memory and return 0 (undefined on the GPU).  The copies of an
operand that a layout replicates must agree, as for ``store``.
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
    """The operand as one value per element, flattened (one entry for a scalar)."""
    if isinstance(value, Tensor):
        return to_logical(value, program.threads, op.loc, what).ravel()
    return np.asarray(value).reshape(1)


def _shape(ty):
    return ty.shape if isinstance(ty, TensorType) else ()


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


class _Access:
    """One atomic op's pointers, element type and active (unmasked) elements, flattened."""

    def __init__(self, program, op, operands):
        ptr_ty = op.operands[0].type
        self.program, self.op = program, op
        self.shape = _shape(ptr_ty)
        self.dtype = numpy_dtype(element_type(ptr_ty).element)
        self.ptr = _logical(program, op, operands[0], "the pointer").astype(np.int64)
        active = np.ones(self.ptr.shape, bool)
        if op.attrs.get("has_mask"):
            active = np.broadcast_to(_logical(program, op, operands[-1], "the mask").astype(bool), self.ptr.shape)
        self.positions = np.flatnonzero(active)
        if program.cta_rank:  # in a cluster, rank 0 performs the atomics of the CTAs that replicate it
            self.positions = self.positions[:0]

    def value(self, operand, what: str) -> np.ndarray:
        return np.broadcast_to(_logical(self.program, self.op, operand, what).astype(self.dtype), self.ptr.shape)

    def describe(self, positions):
        """Text for the i-th address of an access made by the elements ``positions``."""
        def text(i: int) -> str:
            return (f"pointer {element_text(self.shape, int(positions[i]))} in program "
                    f"{tuple(self.program.pid)}")
        return text

    def result(self, flat: np.ndarray):
        ty = self.op.results[0].type
        if isinstance(ty, TensorType):
            return Tensor(ty, flat[self.program.placement(ty, self.op).index])
        return wrap(ty, flat[0])


def _update(access: _Access, fn: str, values: np.ndarray, compare=None) -> np.ndarray:
    """Apply ``fn`` for every active element in order; the old value each one saw (0 where masked)."""
    positions = access.positions
    addresses = access.ptr[positions]
    order = np.argsort(addresses, kind="stable")  # by address, program order within one
    sorted_addresses = addresses[order]
    starts = np.flatnonzero(np.r_[True, sorted_addresses[1:] != sorted_addresses[:-1]]) if order.size else order
    ends = np.r_[starts[1:], order.size].astype(np.int64)
    describe = access.describe(positions[order[starts]])  # each address: the first element updating it
    memory, loc = access.program.memory, access.op.loc
    initial = memory.read(sorted_addresses[starts], access.dtype, loc, describe)
    old = np.zeros(access.ptr.shape, access.dtype)
    final = np.empty(starts.size, access.dtype)
    for g, (s, e) in enumerate(zip(starts, ends)):
        which = positions[order[s:e]]
        olds, final[g] = _apply(fn, initial[g:g + 1], values[which], None if compare is None else compare[which])
        old[which] = olds
    memory.write(sorted_addresses[starts], final, loc, describe)
    return old


@rule("atomic_rmw")
def _atomic_rmw(program, op, operands):
    access = _Access(program, op, operands)
    return [access.result(_update(access, op.attrs["fn"], access.value(operands[1], "the value")))]


@rule("atomic_cas")
def _atomic_cas(program, op, operands):
    access = _Access(program, op, operands)
    old = _update(access, "cas", access.value(operands[2], "the value"), access.value(operands[1], "the compared value"))
    return [access.result(old)]


@rule("atomic_load")
def _atomic_load(program, op, operands):
    access = _Access(program, op, operands)
    loaded = np.zeros(access.ptr.shape, access.dtype)
    loaded[access.positions] = program.memory.read(access.ptr[access.positions], access.dtype, op.loc,
                                                   access.describe(access.positions))
    return [access.result(loaded)]


@rule("atomic_store")
def _atomic_store(program, op, operands):
    access = _Access(program, op, operands)
    _update(access, "xchg", access.value(operands[1], "the stored value"))
    return []
