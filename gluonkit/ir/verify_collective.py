"""Verifier rules of ``scan``, ``histogram``, ``gather`` and ``map_elementwise``.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  These are the Gluon 3.9 builtins whose results depend on more than one element
of an operand (or, for ``map_elementwise``, that run a user function on scalars).
"""

from __future__ import annotations

from .core import Operation
from .types import DType, TensorType, int1, int32
from .verifier import _count, _fail, _same_shape_and_layout, _terminated_by, _types_match, layouts_match, rule

__all__ = []


@rule("scan")
def _scan(op: Operation) -> None:
    n = len(op.operands)
    _count(op, None, n, 1)
    if n == 0 or not all(isinstance(v.type, TensorType) for v in op.operands):
        _fail(op, "expects one or more tensor operands")
    axis = op.attrs["axis"]
    shape = op.operands[0].type.shape
    if not 0 <= axis < len(shape):
        _fail(op, f"axis {axis} is out of range for a tensor of rank {len(shape)}")
    _same_shape_and_layout(op, op.operands, "operands")
    for x, r in zip(op.operands, op.results):
        if not _types_match(x.type, r.type):
            _fail(op, f"result type {r.type} should be the operand type {x.type}")
    combine = op.regions[0]
    if len(combine.args) != 2 * n or [a.type for a in combine.args] != [v.type.element for v in op.operands] * 2:
        _fail(op, f"combine region takes {2 * n} scalars (the operands' element types twice)")
    _terminated_by(op, combine, "yield", [a.type for a in combine.args[:n]])


@rule("histogram")
def _histogram(op: Operation) -> None:
    has_mask = bool(op.attrs.get("has_mask"))
    _count(op, 1 + has_mask, 1)
    x = op.operands[0].type
    if not isinstance(x, TensorType) or x.rank != 1 or not x.element.is_int():
        _fail(op, f"operand must be a 1-D integer tensor, got {x}")
    if has_mask:
        _same_shape_and_layout(op, op.operands, "input and mask")
        if op.operands[1].type.element != int1:
            _fail(op, "mask must be int1")
    res = op.results[0].type
    bins = op.attrs["num_bins"]
    if not isinstance(res, TensorType) or res.shape != (bins,) or res.element != int32:
        _fail(op, f"result must be tensor<int32>[{bins}], got {res}")


@rule("gather")
def _gather(op: Operation) -> None:
    _count(op, 2, 1)
    src, index, res = op.operands[0].type, op.operands[1].type, op.results[0].type
    if not all(isinstance(t, TensorType) for t in (src, index, res)):
        _fail(op, "operands and result must be tensors")
    axis = op.attrs["axis"]
    if index.rank != src.rank or not 0 <= axis < src.rank:
        _fail(op, f"index rank {index.rank} must equal source rank {src.rank} and axis {axis} be below it")
    if any(a != b for d, (a, b) in enumerate(zip(src.shape, index.shape)) if d != axis):
        _fail(op, f"index shape {list(index.shape)} must match source shape {list(src.shape)} except along axis {axis}")
    if not isinstance(index.element, DType) or not index.element.is_int():
        _fail(op, f"index must hold integers, got {index.element}")
    if res.shape != index.shape or res.element != src.element or not layouts_match(res.layout, index.layout, res.shape):
        _fail(op, f"result must have the index's shape and layout and the source's element type, got {res}")


@rule("map_elementwise")
def _map_elementwise(op: Operation) -> None:
    pack = op.attrs["pack"]
    if not isinstance(pack, int) or pack < 1:
        _fail(op, f"pack must be a positive int, got {pack!r}")
    _count(op, None, None, 1)
    values = op.operands + op.results
    if not op.operands or not all(isinstance(v.type, TensorType) for v in values):
        _fail(op, "operands and results must be tensors")
    _same_shape_and_layout(op, values, "operands and results")
    fn = op.regions[0]
    if [a.type for a in fn.args] != [v.type.element for v in op.operands for _ in range(pack)]:
        _fail(op, f"the region takes each operand's element type {pack} time(s) in turn")
    _terminated_by(op, fn, "yield", [r.type.element for r in op.results for _ in range(pack)])
