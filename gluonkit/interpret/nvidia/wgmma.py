"""Rules for Hopper's warpgroup MMA: ``warpgroup_mma`` and ``warpgroup_mma_wait``.

``D = A @ B (+ acc where use_acc)``: the inputs are exactly their element type's values
(float16, bfloat16, fp8), so their products are exact; the sum is formed in float64 and
rounded once to the float32 accumulator.  float32 inputs are multiplied as tf32, as the
tensor cores read them: the low 13 of the 23 mantissa bits are ignored (truncated toward
zero, not rounded: the PTX ``.tf32`` operand is an f32 bit pattern of which only the tf32
bits count; kernels that want round-to-nearest convert first).  Products of tf32 values
are exact in float64 too.  (The tensor cores add in float32 in their own
order, so GPU results differ from these in the last bits.)  Operands are read where they
live: shared-memory views element by element through their layout (a read of bytes nothing
wrote is reported), register operands and ``acc`` through their distributed layouts.

Asynchronous MMAs (``is_async=True``) are *groups* in issue order (each op commits one, as
``wgmma.commit_group`` does after it).  Their result is a :class:`~.engine.Pending` value:
chaining it into the next ``warpgroup_mma`` or passing it to ``warpgroup_mma_wait`` is
fine; any other read before a wait retires the group is reported with both lines.  While a
group is in flight, the shared-memory bytes it reads are registered with their buffer, so
a ``local_store`` into them is reported with both lines too.  ``warpgroup_mma_wait(n)``
retires the oldest groups until at most ``n`` remain; a synchronous ``warpgroup_mma``
waits for every group (``wgmma.wait_group 0``), like the hardware.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Deque, List, Optional

import numpy as np

from ...ir.types import SharedMemoryDescType
from ..engine import Pending, rule
from ..shared_memory import AsyncRead, SharedRef, byte_mask, read
from ..trace import view_name
from ..values import Tensor, from_logical, to_logical

__all__: List[str] = []


@dataclass
class _Group:
    """One in-flight asynchronous warpgroup_mma: its result and the buffer bytes it reads."""

    result: Pending
    value: Tensor
    reads: List[tuple]  # (SharedBuffer, AsyncRead)
    span: Optional[object] = None  # its span on a trace, while recording one

    def retire(self) -> None:
        self.result.value = self.value
        for buffer, reader in self.reads:
            buffer.async_reads.remove(reader)
        if self.span is not None:
            self.span.finish()


def _groups(program) -> Deque[_Group]:
    return program.async_state.setdefault("wgmma", deque())


def _retire(program, keep: int) -> None:
    groups = _groups(program)
    while len(groups) > keep:
        groups.popleft().retire()


def _logical(program, op, value, ty, what: str) -> np.ndarray:
    if isinstance(ty, SharedMemoryDescType):
        return read(value, ty, op)
    if isinstance(value, Pending):  # a chained accumulator still in flight (retired ones arrive resolved)
        value = _pending_tensor(program, value)
    return to_logical(value, program.threads, op.loc, what)


#: The bits of a float32 that a tf32 operand keeps: sign, exponent and the top 10 mantissa bits.
_TF32_MASK = np.uint32(0xFFFFE000)


def _multiplicand(program, op, value, ty, what: str) -> np.ndarray:
    """An input operand as the float64 values the tensor cores multiply (float32 truncated to tf32)."""
    logical = _logical(program, op, value, ty, what)
    if ty.element.name == "float32":
        logical = (np.ascontiguousarray(logical, np.float32).view(np.uint32) & _TF32_MASK).view(np.float32)
    return logical.astype(np.float64)


def _pending_tensor(program, pending: Pending) -> Tensor:
    """The value an in-flight group will produce (a chained accumulator)."""
    for group in _groups(program):
        if group.result is pending:
            return group.value
    raise AssertionError("a pending wgmma result without an in-flight group")


@rule("warpgroup_mma")
def _warpgroup_mma(program, op, operands):
    a, b, acc, use_acc = operands
    a_ty, b_ty, acc_ty = (v.type for v in op.operands[:3])
    product = _multiplicand(program, op, a, a_ty, "a") @ _multiplicand(program, op, b, b_ty, "b")
    if bool(use_acc):
        product += _logical(program, op, acc, acc_ty, "acc").astype(np.float64)
    value = from_logical(product.astype(np.float32), op.results[0].type, program.threads, op.loc)
    if not op.attrs["is_async"]:
        _retire(program, 0)
        if program.trace is not None:
            program.trace.instant("warpgroup_mma", "wgmma.sync", op, shape=list(op.results[0].type.shape))
        return [value]
    where = f"the asynchronous warpgroup_mma at line {op.loc.line}"
    fix = "call warpgroup_mma_wait(num_outstanding=..., deps=[...]) until it has completed, first"
    reads = []
    for ref, ty in ((a, a_ty), (b, b_ty)):
        if isinstance(ref, SharedRef):
            reader = AsyncRead(byte_mask(ref, ty, op), where, fix)
            ref.buffer.async_reads.append(reader)
            reads.append((ref.buffer, reader))
    result = Pending(where, op.loc, fix)
    group = _Group(result, value, reads)
    if program.trace is not None:
        shared = ", ".join(view_name(ref, ty) for ref, ty in ((a, a_ty), (b, b_ty)) if isinstance(ref, SharedRef))
        group.span = program.trace.start("wgmma", "wgmma", op, shape=list(op.results[0].type.shape), reads=shared)
    _groups(program).append(group)
    return [result]


@rule("warpgroup_mma_wait")
def _warpgroup_mma_wait(program, op, operands):
    if program.trace is not None:
        retires = max(0, len(_groups(program)) - op.attrs["num_outstanding"])
        program.trace.instant("warpgroup_mma_wait", "wgmma.wait", op, num_outstanding=op.attrs["num_outstanding"],
                              retires=retires)
    _retire(program, op.attrs["num_outstanding"])
    return [v.value if isinstance(v, Pending) and v.value is not None else v for v in operands]
