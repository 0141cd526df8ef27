"""Verifier rules of ``scan``, ``histogram``, ``gather``, ``map_elementwise`` and ``dot_fma``.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  These are the Gluon 3.9 builtins whose results depend on more than one element
of an operand (or, for ``map_elementwise``, that run a user function on scalars).
"""

from __future__ import annotations

from ..layouts.distributed import AutoLayout
from .core import Operation
from .types import DType, TensorType, int1, int32
from .verifier import rule
from .verify_checks import count_parts, fail, layouts_match, same_shape_and_layout, terminated_by, types_match

__all__ = ["dot_fma_layout_problem"]


@rule("scan")
def _scan(op: Operation) -> None:
    n = len(op.operands)
    count_parts(op, None, n, 1)
    if n == 0 or not all(isinstance(v.type, TensorType) for v in op.operands):
        fail(op, "expects one or more tensor operands")
    axis = op.attrs["axis"]
    shape = op.operands[0].type.shape
    if not 0 <= axis < len(shape):
        fail(op, f"axis {axis} is out of range for a tensor of rank {len(shape)}")
    same_shape_and_layout(op, op.operands, "operands")
    for x, r in zip(op.operands, op.results):
        if not types_match(x.type, r.type):
            fail(op, f"result type {r.type} should be the operand type {x.type}")
    combine = op.regions[0]
    if len(combine.args) != 2 * n or [a.type for a in combine.args] != [v.type.element for v in op.operands] * 2:
        fail(op, f"combine region takes {2 * n} scalars (the operands' element types twice)")
    terminated_by(op, combine, "yield", [a.type for a in combine.args[:n]])


@rule("histogram")
def _histogram(op: Operation) -> None:
    has_mask = bool(op.attrs.get("has_mask"))
    count_parts(op, 1 + has_mask, 1)
    x = op.operands[0].type
    if not isinstance(x, TensorType) or x.rank != 1 or not x.element.is_int():
        fail(op, f"operand must be a 1-D integer tensor, got {x}")
    if has_mask:
        same_shape_and_layout(op, op.operands, "input and mask")
        if op.operands[1].type.element != int1:
            fail(op, "mask must be int1")
    res = op.results[0].type
    bins = op.attrs["num_bins"]
    if not isinstance(res, TensorType) or res.shape != (bins,) or res.element != int32:
        fail(op, f"result must be tensor<int32>[{bins}], got {res}")


@rule("gather")
def _gather(op: Operation) -> None:
    count_parts(op, 2, 1)
    src, index, res = op.operands[0].type, op.operands[1].type, op.results[0].type
    if not all(isinstance(t, TensorType) for t in (src, index, res)):
        fail(op, "operands and result must be tensors")
    axis = op.attrs["axis"]
    if index.rank != src.rank or not 0 <= axis < src.rank:
        fail(op, f"index rank {index.rank} must equal source rank {src.rank} and axis {axis} be below it")
    if any(a != b for d, (a, b) in enumerate(zip(src.shape, index.shape)) if d != axis):
        fail(op, f"index shape {list(index.shape)} must match source shape {list(src.shape)} except along axis {axis}")
    if not isinstance(index.element, DType) or not index.element.is_int():
        fail(op, f"index must hold integers, got {index.element}")
    if res.shape != index.shape or res.element != src.element or not layouts_match(res.layout, index.layout, res.shape):
        fail(op, f"result must have the index's shape and layout and the source's element type, got {res}")


@rule("map_elementwise")
def _map_elementwise(op: Operation) -> None:
    pack = op.attrs["pack"]
    if not isinstance(pack, int) or pack < 1:
        fail(op, f"pack must be a positive int, got {pack!r}")
    count_parts(op, None, None, 1)
    values = op.operands + op.results
    if not op.operands or not all(isinstance(v.type, TensorType) for v in values):
        fail(op, "operands and results must be tensors")
    same_shape_and_layout(op, values, "operands and results")
    fn = op.regions[0]
    if [a.type for a in fn.args] != [v.type.element for v in op.operands for _ in range(pack)]:
        fail(op, f"the region takes each operand's element type {pack} time(s) in turn")
    terminated_by(op, fn, "yield", [r.type.element for r in op.results for _ in range(pack)])


def dot_fma_layout_problem(a: TensorType, b: TensorType, acc: TensorType):
    """Why ``a``, ``b`` and ``acc``'s layouts cannot feed an in-thread FMA dot, or None.

    Each lane and warp basis of ``a`` must be ``acc``'s with the N component replaced by a
    zero K component (and of ``b`` with the M component zeroed), so a thread holds the rows
    and columns of its own accumulator elements; registers must hold every ``k``.
    """
    acc_ll = acc.layout.to_linear_layout(list(acc.shape))
    for operand, ty, keep in (("a", a, -2), ("b", b, -1)):
        ll = ty.layout.to_linear_layout(list(ty.shape))
        for dim in ("lane", "warp", "block"):
            for bit, (mine, theirs) in enumerate(zip(ll.bases.get(dim, []), acc_ll.bases.get(dim, []))):
                want = list(theirs[:-2]) + ([theirs[-2], 0] if keep == -2 else [0, theirs[-1]])
                if list(mine) != want:
                    return (f"{operand}'s {dim} basis {bit} is {list(mine)} but must be {want} (acc's with the "
                            f"{'N' if keep == -2 else 'M'} component replaced by K); use "
                            f"DotOperandLayout({0 if keep == -2 else 1}, acc_layout, 0)")
        k_dim = ty.rank - 1 if keep == -2 else ty.rank - 2
        held = {tuple(ll.apply({"register": r}).values()) for r in range(ll.in_dim_size("register"))}
        for r in range(acc_ll.in_dim_size("register")):
            c = list(acc_ll.apply({"register": r}).values())
            row = c[:-1] if keep == -2 else c[:-2] + [c[-1]]
            for k in range(ty.shape[k_dim]):
                need = tuple(row[:-1] + [row[-1], k]) if keep == -2 else tuple(row[:-1] + [k, row[-1]])
                if need not in held:
                    return f"a thread of {operand} does not hold element {list(need)} in its registers"
    return None


@rule("dot_fma")
def _dot_fma(op: Operation) -> None:
    count_parts(op, 3, 1)
    a, b, acc = (v.type for v in op.operands)
    res = op.results[0].type
    if not all(isinstance(t, TensorType) for t in (a, b, acc, res)):
        fail(op, "operands and result must be tensors")
    if not (a.rank == b.rank == acc.rank and acc.rank in (2, 3)):
        fail(op, f"a, b and acc must all have rank 2 or 3, got {a.rank}, {b.rank}, {acc.rank}")
    batch, (m, k), (k2, n) = a.shape[:-2], a.shape[-2:], b.shape[-2:]
    if b.shape[:-2] != batch or acc.shape != batch + (m, n) or k != k2:
        fail(op, f"shapes {list(a.shape)} @ {list(b.shape)} + {list(acc.shape)} do not chain")
    if not (a.element.is_floating() and a.element == b.element and acc.element.is_floating()):
        fail(op, f"a and b must share a float type and acc be float, got {a.element}, {b.element}, {acc.element}")
    if not types_match(res, acc):
        fail(op, f"result type {res} should be acc's {acc}")
    if not any(isinstance(t.layout, AutoLayout) for t in (a, b, acc)):
        problem = dot_fma_layout_problem(a, b, acc)
        if problem:
            fail(op, problem)
