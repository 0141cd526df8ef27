"""Which layout conversions and reductions go through scratch shared memory.

Those ops execute ``bar.sync 0`` in every thread (between writing scratch and reading it
back).  Their lowering rules (:mod:`.layout_ops`, :mod:`.reduce`) and the barrier planner
(:mod:`.barrier_plan`), which counts on those barriers, decide it with the functions here,
so the two cannot disagree.
"""

from __future__ import annotations

from typing import List

from ...ir import CompilationError, Operation
from ...layouts.linear import LinearLayout

__all__ = ["REGISTER_ONLY_CONVERSIONS", "converts_through_scratch", "moves_along_axis", "warp_axis_bits"]

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
