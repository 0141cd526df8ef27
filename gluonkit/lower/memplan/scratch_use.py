"""Which layout conversions, reductions and atomics go through scratch shared memory.

Those ops execute ``bar.sync 0`` in every thread (between writing scratch and reading it
back).  Their lowering rules (:mod:`gluonkit.lower.ops.layout_ops`, :mod:`gluonkit.lower.ops.reduce`,
:mod:`gluonkit.lower.ops.atomics`) and the scratch sizes the shared-memory planner places
(:mod:`.scratch_size`, which the barrier planner follows) decide it with the functions here,
so they cannot disagree.
"""

from __future__ import annotations

from typing import List

from ...ir import CompilationError, Function, Operation, TensorType
from ...layouts.linear import LinearLayout

__all__ = ["REGISTER_ONLY_CONVERSIONS", "converts_through_scratch", "moves_along_axis", "warp_axis_bits", "cta_axis_bits",
           "atomic_broadcasts_through_scratch", "is_used"]

# plan_conversion kinds that move data in registers or by warp shuffles only.
REGISTER_ONLY_CONVERSIONS = ("identical", "register_permutation", "warp_shuffle")


def converts_through_scratch(plan) -> bool:
    """Whether a :func:`~gluonkit.layouts.conversion.plan_conversion` plan uses scratch memory."""
    return plan.kind not in REGISTER_ONLY_CONVERSIONS


def moves_along_axis(op: Operation, basis: List[int], axis: int, dim_name: str) -> bool:
    """Whether a lane/warp basis of a reduction's operand moves along the axis only (True)
    or not at all (False); one that moves along the axis and elsewhere is refused."""
    along = basis[axis] != 0
    elsewhere = any(c for d, c in enumerate(basis) if d != axis)
    if along and elsewhere:
        raise CompilationError(
            f"reduce along axis {axis}: a {dim_name} basis {basis} of the operand's layout moves along "
            "the axis and another dimension at once; convert_layout the operand first", op.loc)
    return along


def warp_axis_bits(op: Operation, layout: LinearLayout) -> List[int]:
    """The warp bits of the ``reduce`` op's operand ``layout`` that move along its axis: the
    reduction crosses warps (through scratch memory) exactly when there are any."""
    axis = op.attrs["axis"]
    return [bit for bit, basis in enumerate(layout.bases.get("warp", []))
            if moves_along_axis(op, basis, axis, "warp")]


def cta_axis_bits(op: Operation, layout: LinearLayout) -> List[int]:
    """The CTA-rank bits of the ``reduce`` op's operand ``layout`` (its ``block`` bases, from
    ``cga_layout``) that move along its axis: the reduction crosses the CTAs of the cluster
    (through distributed shared memory, between cluster barriers) exactly when there are any."""
    axis = op.attrs["axis"]
    return [bit for bit, basis in enumerate(layout.bases.get("block", []))
            if moves_along_axis(op, basis, axis, "cga_layout (block)")]


def atomic_broadcasts_through_scratch(func: Function, op: Operation) -> bool:
    """Whether an atomic's old values go to other threads through scratch memory: its result is
    used and the layout holds an element in several threads (or the pointer is a scalar, which
    one thread updates for the whole program), so only one thread performed the atomic."""
    if op.name not in ("atomic_rmw", "atomic_cas"):
        return False
    if not is_used(func, op.results[0]):
        return False
    ty = op.results[0].type
    if not isinstance(ty, TensorType):
        return func.num_warps * 32 > 1
    ll = ty.layout.to_linear_layout(list(ty.shape))
    return any(not any(b) for d in ("lane", "warp") for b in ll.bases.get(d, []))


def is_used(func: Function, value) -> bool:
    """Whether any op of ``func`` takes ``value`` as an operand."""
    return any(value is v for o in func.walk() for v in o.operands)
