"""Verifier rules of the TMA copies (``tma.async_copy_*``, ``tma.store_wait``).

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  A copy moves exactly one block of its descriptor, so the shared view must be a
whole tile with the descriptor's block shape, element type and layout (the layout TMA
writes, as Gluon asserts); coordinates are one int32 scalar per dimension.
"""

from __future__ import annotations

from .core import Operation
from .types import DType, SharedMemoryDescType, TensorDescType, int1, int32
from .verify_checks import fail as _fail, one_mbarrier as _barrier
from .verifier import rule

__all__ = []


def _check(op: Operation, n_fixed: int, smem_index: int) -> None:
    if op.results or op.regions:
        _fail(op, "has no results and no regions")
    if len(op.operands) < n_fixed or not isinstance(op.operands[0].type, TensorDescType):
        _fail(op, f"expects a tensor descriptor and {n_fixed - 1} more operands before the coordinates")
    desc: TensorDescType = op.operands[0].type
    smem = op.operands[smem_index].type
    if not isinstance(smem, SharedMemoryDescType):
        _fail(op, f"the shared memory operand must be a shared memory descriptor, got {smem}")
    if smem.element != desc.element or smem.shape != desc.block_shape:
        _fail(op, f"the shared view {smem} must hold the descriptor's block {list(desc.block_shape)} x {desc.element}")
    if smem.shape != smem.alloc_shape:
        _fail(op, f"the shared view {smem} must be a whole tile of its buffer (index() stages, do not slice)")
    if smem.layout != desc.layout:
        _fail(op, f"the shared view's layout {smem.layout!r} must be the descriptor's layout {desc.layout!r}")
    coords = op.operands[n_fixed:]
    if len(coords) != desc.rank:
        _fail(op, f"expects {desc.rank} coordinates (one per dimension of the block), got {len(coords)}")
    for c in coords:
        if c.type != int32:
            _fail(op, f"coordinates must be int32 scalars, got {c.type}")


@rule("async_tma_copy_global_to_shared")
def _global_to_shared(op):
    _check(op, 4, 1)
    _barrier(op, op.operands[2])
    pred = op.operands[3].type
    if not isinstance(pred, DType) or pred != int1:
        _fail(op, f"the predicate must be an int1 scalar, got {pred}")


@rule("async_tma_copy_shared_to_global")
def _shared_to_global(op):
    _check(op, 2, 1)


@rule("async_tma_store_wait")
def _store_wait(op):
    if op.operands or op.results or op.regions:
        _fail(op, "takes no operands, results or regions")
    n = op.attrs.get("pendings")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        _fail(op, f"pendings must be a non-negative int, got {n!r}")
    if not isinstance(op.attrs.get("read_only"), bool):
        _fail(op, f"read_only must be a bool, got {op.attrs.get('read_only')!r}")
