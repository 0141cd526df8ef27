"""Layout inference: give every ``AutoLayout`` tensor a concrete layout, in place.

The pass follows Gluon's ``ResolveAutoEncodings`` (seeds from ``set_auto_layout``,
propagation forwards and backwards through element-wise ops, slices for
``expand_dims``/reductions, tied control-flow values) with two differences, both so that
more programs compile with a predictable result:

1. Values nothing pins get a **default layout** — Triton's default blocked layout for the
   group's shape and the ``num_warps`` of the code it is in (the kernel's, or its warp-specialize
   partition's) (:func:`~.infer_derive.default_blocked_layout`)
   — where Gluon stops with "Failed to infer return type".  Groups are defaulted from the
   highest rank down, so the 1-D operands of ``x[:, None] + y[None, :]`` become slices of
   the 2-D default rather than unrelated 1-D layouts.
2. A concrete layout met anywhere (not only through ``set_auto_layout``) pins its group,
   and layouts are compared by their linear layouts, so two spellings of one placement
   never conflict.  Where Gluon lets a layout derived through ``permute``/``reshape``/
   ``join``/``split`` silently lose to another, we report the conflict: those ops move no
   data here, so both layouts cannot hold.

Steps: :mod:`.infer_rules` turns every op into constraints; relations propagate known
layouts to fixed point; unpinned groups get defaults; every relation is checked; each
``AutoLayout`` value's type is rewritten.  Conflicts raise
:class:`~.infer_constraints.LayoutConflictError` showing both source lines.
"""

from __future__ import annotations

from ...ir import Block, Function, TensorType
from ...ir.warp_specialize import partition_num_warps
from ...layouts.distributed import AutoLayout
from . import derive as derive
from .constraints import Constraints, LayoutConflictError, LayoutInferenceError, Pin, Relation, conflict_error
from .rules import INFER_RULES

__all__ = ["infer_layouts", "LayoutInferenceError", "LayoutConflictError"]


def infer_layouts(func: Function) -> None:
    """Resolve every ``AutoLayout`` in ``func`` (in place).

    Afterwards ``ir.verify(func, concrete=True)`` holds; a contradiction raises
    :class:`LayoutConflictError` / :class:`LayoutInferenceError` at the user's lines.
    """
    c = _collect(func)
    _propagate(c)
    _apply_defaults(c, func.num_warps)
    for rel in c.relations:
        _check(c, rel)
    _rewrite(c)


def _collect(func: Function) -> Constraints:
    c = Constraints()
    for arg in func.args:
        c.add(arg)
    for op in func.walk():
        for region in op.regions:
            for arg in region.args:
                c.add(arg)
        for value in op.operands + op.results:
            c.add(value)
        if op.name not in INFER_RULES:
            raise LayoutInferenceError(f"{op.name}: no layout-inference rule for this op", op.loc)
        INFER_RULES[op.name](op, c)
    return c


def _derived(rel: Relation, pin: Pin, layout, shape) -> Pin:
    line = f" (line {rel.op.loc.line})" if rel.op.loc.line else ""
    return Pin(layout, tuple(shape), pin.loc, f"{pin.why}, carried through {rel.op.name}{line}")


def _propagate(c: Constraints) -> None:
    """Apply relations with exactly one known side until nothing changes."""
    changed = True
    while changed:
        changed = False
        for rel in c.relations:
            src, dst = c.pin_of(rel.src), c.pin_of(rel.dst)
            if (src is None) == (dst is None):
                continue
            known, fn, target = (src, rel.forward, rel.dst) if src else (dst, rel.backward, rel.src)
            try:
                layout = fn(known.layout)
            except derive.Underivable:
                continue  # reported by _check if the other side stays inconsistent
            c.pin(target, _derived(rel, known, layout, target.type.shape), rel.op)
            changed = True


def _apply_defaults(c: Constraints, num_warps: int) -> None:
    """Give unpinned groups the default layout, highest rank first, propagating each."""
    while True:
        groups = {}
        for value in c.values.values():
            root = c.find(value)
            if c.pin_of_root(root) is None:
                groups.setdefault(root, []).append(value)
        if not groups:
            return
        members = max(groups.values(), key=lambda vs: vs[0].type.rank)
        shape = tuple(max(v.type.shape[i] for v in members) for i in range(members[0].type.rank))
        layout = derive.default_blocked_layout(shape, _warps_of(members[0], num_warps))
        why = "the default layout (nothing pins this value; pin it with set_auto_layout)"
        c.pin(members[0], Pin(layout, shape, members[0].loc, why))
        _propagate(c)


def _warps_of(value, kernel_num_warps: int) -> int:
    """The warps that execute the code making ``value`` (a warp-specialize partition's, or the kernel's)."""
    op = value.owner.parent_op if isinstance(value.owner, Block) else value.owner
    return kernel_num_warps if op is None else partition_num_warps(op, kernel_num_warps)


def _check(c: Constraints, rel: Relation) -> None:
    """Both sides of ``rel`` are known now: they must agree in at least one direction.

    When no direction agrees, a direction that cannot be derived at all (an operand that
    is not a slice, a split over lanes) is the better explanation than a mismatch with a
    layout that was itself only a default, so its reason is reported first.
    """
    src, dst = c.pin_of(rel.src), c.pin_of(rel.dst)
    mismatch, reason = None, None
    for known, other, fn, value in ((src, dst, rel.forward, rel.dst), (dst, src, rel.backward, rel.src)):
        try:
            expected = fn(known.layout)
        except derive.Underivable as why:
            reason = reason or why
            continue
        if derive.same_layout(expected, other.layout, value.type.shape):
            return
        mismatch = mismatch or (_derived(rel, known, expected, value.type.shape), other)
    if reason is not None:
        notes = [(f"{p.layout!r} is {p.why}", p.loc) for p in (src, dst) if p.loc != rel.op.loc]
        raise LayoutInferenceError(f"{rel.op.name}: {reason}; insert gl.convert_layout", rel.op.loc, notes)
    raise conflict_error(*mismatch, rel.op, f"{rel.op.name} relates the layouts of its operand and result")


def _rewrite(c: Constraints) -> None:
    for value in c.values.values():
        ty = value.type
        if isinstance(ty, TensorType) and isinstance(ty.layout, AutoLayout):
            pin = c.pin_of(value)
            try:
                layout = derive.fit_to_shape(pin.layout, ty.shape)
            except derive.Underivable as reason:
                raise LayoutInferenceError(f"{reason}; insert gl.convert_layout", value.loc,
                                           [(f"the layout is {pin.why}", pin.loc)]) from None
            value.type = ty.with_layout(layout)
