"""Verifier rules of Blackwell tensor memory: allocation, views, ``tcgen05.ld`` / ``tcgen05.st``.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  Result types are the ones :mod:`.tmem` computes, and every load/store layout
passes :func:`~gluonkit.ir.tmem.access_map` (the lane-quarter rule), so the interpreter and
the lowering can trust them.
"""

from __future__ import annotations

from ..layouts.distributed import SliceLayout
from .core import Operation
from .tmem import access_map, layout_problem, slice_offset
from .types import TensorMemoryDescType, TensorType, int1
from .verifier import rule
from .verify_checks import count_parts, fail, scalar_of

__all__ = []


def _desc(op: Operation, value, what: str) -> TensorMemoryDescType:
    if not isinstance(value.type, TensorMemoryDescType):
        fail(op, f"{what} must be a tensor memory descriptor, got {value.type}")
    return value.type


def _check_buffer(op: Operation, ty: TensorMemoryDescType) -> None:
    problem = layout_problem(ty.layout, ty.alloc_shape, ty.element)
    if problem:
        fail(op, problem)


def _tensor_access(op: Operation, ty, desc: TensorMemoryDescType, what: str) -> None:
    """``ty`` must be a tensor of ``desc``'s shape and element type in a layout tcgen05 can move."""
    if not isinstance(ty, TensorType) or ty.shape != desc.shape or ty.element != desc.element:
        fail(op, f"{what} must be a tensor of shape {list(desc.shape)} and type {desc.element}, got {ty}")
    _, problem = access_map(desc, ty.layout.to_linear_layout(list(ty.shape)))
    if problem:
        fail(op, f"{what}: {problem}")


@rule("tmem_alloc")
def _tmem_alloc(op):
    if len(op.operands) > 1:
        fail(op, f"takes at most one operand (the initial value), got {len(op.operands)}")
    count_parts(op, None, 1)
    ty = _desc(op, op.results[0], "the result")
    _check_buffer(op, ty)
    if ty.alloc_shape != ty.shape:
        fail(op, f"an allocation's alloc_shape {list(ty.alloc_shape)} must be its shape {list(ty.shape)}")
    if ty.element == int1:
        fail(op, "int1 cannot live in tensor memory")
    if op.operands:
        _tensor_access(op, op.operands[0].type, ty, "the initial value")


@rule("tmem_load")
def _tmem_load(op):
    red = op.attrs.get("red")
    count_parts(op, 1, 1 if red == "none" else 2)
    src = _desc(op, op.operands[0], "the operand")
    _tensor_access(op, op.results[0].type, src, "the result")
    if red not in ("none", "min", "max"):
        fail(op, f"red must be 'none', 'min' or 'max', got {red!r}")
    if red != "none":
        want = TensorType(src.element, src.shape[:1], SliceLayout(1, op.results[0].type.layout))
        if op.results[1].type != want:
            fail(op, f"the reduction result should be {want}, got {op.results[1].type}")
        if op.attrs.get("propagate_nan") not in ("none", "all") or not isinstance(op.attrs.get("abs"), bool):
            fail(op, "abs must be a bool and propagate_nan 'none' or 'all'")


@rule("tmem_store")
def _tmem_store(op):
    count_parts(op, 3, 0)
    dst = _desc(op, op.operands[0], "the first operand")
    _tensor_access(op, op.operands[1].type, dst, "the stored value")
    scalar_of(op, op.operands[2], lambda t: t.is_bool(), "the predicate")


@rule("tmem_index")
def _tmem_index(op):
    count_parts(op, 2, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    scalar_of(op, op.operands[1], lambda t: t.is_int() and not t.is_bool(), "the index")
    if src.num_stage_dims < 1:
        fail(op, f"the operand {src} has no leading stage dimension to index")
    if (res.element, res.shape, res.alloc_shape, res.layout) != (src.element, src.shape[1:], src.alloc_shape[1:],
                                                                 src.layout):
        fail(op, f"result type should drop the leading dimension of {src}, got {res}")


@rule("tmem_slice")
def _tmem_slice(op):
    count_parts(op, 1, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    start, length, dim = op.attrs["start"], op.attrs["length"], op.attrs["dim"]
    if not src.num_stage_dims <= dim < src.rank or length <= 0 or length & (length - 1) or start % length \
            or start + length > src.shape[dim]:
        fail(op, f"slice start={start} length={length} dim={dim} does not fit {src}")
    try:
        slice_offset(src, dim, start)
    except ValueError as e:
        fail(op, str(e))
    shape = src.shape[:dim] + (length,) + src.shape[dim + 1:]
    if (res.element, res.shape, res.alloc_shape, res.layout) != (src.element, shape, src.alloc_shape, src.layout):
        fail(op, f"result type should be {src} with dim {dim} of size {length}, got {res}")


@rule("tmem_reinterpret")
def _tmem_reinterpret(op):
    count_parts(op, 1, 1)
    _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    _check_buffer(op, res)
    if res.alloc_shape != res.shape:
        fail(op, f"a reinterpreted view's alloc_shape {list(res.alloc_shape)} must be its shape {list(res.shape)}")
