"""Verifier rules of the TMA copies (``tma.async_copy_*``, ``tma.store_wait``).

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  A copy moves exactly one block of its descriptor, so the shared view must be a
whole tile with the descriptor's block shape, element type and layout (the layout TMA
writes, as Gluon asserts); coordinates are one int32 scalar per dimension.  A load through
an im2col descriptor (:class:`~.types.TensorDescIm2ColType`) takes one coordinate per
dimension of the tensor and then one int16 im2col offset per spatial dimension; stores have
no im2col mode.
"""

from __future__ import annotations

from .core import Operation
from .types import DType, SharedMemoryDescType, TensorDescIm2ColType, TensorDescType, int1, int16, int32
from .verify_checks import fail, one_mbarrier
from .verifier import rule

__all__ = []


def _check(op: Operation, n_fixed: int, smem_index: int) -> None:
    if op.results or op.regions:
        fail(op, "has no results and no regions")
    if len(op.operands) < n_fixed or not isinstance(op.operands[0].type, TensorDescType):
        fail(op, f"expects a tensor descriptor and {n_fixed - 1} more operands before the coordinates")
    desc: TensorDescType = op.operands[0].type
    smem = op.operands[smem_index].type
    if not isinstance(smem, SharedMemoryDescType):
        fail(op, f"the shared memory operand must be a shared memory descriptor, got {smem}")
    if smem.element != desc.element or smem.shape != desc.block_shape:
        fail(op, f"the shared view {smem} must hold the descriptor's block {list(desc.block_shape)} x {desc.element}")
    if smem.shape != smem.alloc_shape:
        fail(op, f"the shared view {smem} must be a whole tile of its buffer (index() stages, do not slice)")
    if smem.layout != desc.layout:
        fail(op, f"the shared view's layout {smem.layout!r} must be the descriptor's layout {desc.layout!r}")
    coords = op.operands[n_fixed:]
    im2col = isinstance(desc, TensorDescIm2ColType)
    taps = desc.rank - 2 if im2col else 0
    if len(coords) != desc.rank + taps:
        what = f" and {taps} im2col offsets" if im2col else " (one per dimension of the block)"
        fail(op, f"expects {desc.rank} coordinates{what}, got {len(coords)} operands after the fixed ones")
    for c in coords[:desc.rank]:
        if c.type != int32:
            fail(op, f"coordinates must be int32 scalars, got {c.type}")
    for c in coords[desc.rank:]:
        if c.type != int16:
            fail(op, f"im2col offsets must be int16 scalars, got {c.type}")


@rule("async_tma_copy_global_to_shared")
def _global_to_shared(op):
    _check(op, 4, 1)
    one_mbarrier(op, op.operands[2])
    pred = op.operands[3].type
    if not isinstance(pred, DType) or pred != int1:
        fail(op, f"the predicate must be an int1 scalar, got {pred}")
    if op.attrs.get("multicast", False) is not True and "multicast" in op.attrs:
        fail(op, f"multicast, when present, must be True, got {op.attrs['multicast']!r}")
    if op.attrs.get("multicast") and isinstance(op.operands[0].type, TensorDescIm2ColType):
        fail(op, "multicast copies take a tiled descriptor, not an im2col one")


@rule("async_tma_copy_shared_to_global")
def _shared_to_global(op):
    if op.operands and isinstance(op.operands[0].type, TensorDescIm2ColType):
        fail(op, "TMA stores take a tiled descriptor, not an im2col one")
    _check(op, 2, 1)


@rule("async_tma_store_wait")
def _store_wait(op):
    if op.operands or op.results or op.regions:
        fail(op, "takes no operands, results or regions")
    n = op.attrs.get("pendings")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        fail(op, f"pendings must be a non-negative int, got {n!r}")
    if not isinstance(op.attrs.get("read_only"), bool):
        fail(op, f"read_only must be a bool, got {op.attrs.get('read_only')!r}")
