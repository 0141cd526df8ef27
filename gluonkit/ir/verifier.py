"""The IR verifier: the rule table, the core ops' typing rules, SSA scoping and terminators.

Each catalogue op has exactly one rule, registered with :func:`rule`: the core ops' here,
the other op families' in the ``verify_*`` modules (and :mod:`.warp_specialize`), which
``gluonkit.ir`` imports; the checks they share are in :mod:`.verify_checks`.  A rule raises
:class:`~gluonkit.ir.diagnostics.CompilationError` at the op's location with what was
expected and what was found.  ``verify(func, concrete=True)`` also demands that no
``AutoLayout`` is left (the state after layout inference).
"""

from __future__ import annotations

from typing import Callable, Dict, Set

from ..layouts.distributed import AutoLayout, SliceLayout
from .core import Block, Function, Operation
from .diagnostics import CompilationError
from .ops import BINARY_FNS, COMPARE_PREDICATES, OPS, UNARY_FNS
from .types import DType, PointerType, TensorType, element_type, int1, int32
from .verify_checks import (
    count_parts, fail, layouts_match, result_matches, same_shape_and_layout, scalar_of, terminated_by, types_match,
)

__all__ = ["verify", "RULES", "rule"]

RULES: Dict[str, Callable[[Operation], None]] = {}


def rule(name: str):
    """Register the verifier rule of catalogue op ``name``."""
    if name not in OPS:
        raise KeyError(f"verifier rule for unknown op {name!r}")

    def register(fn):
        RULES[name] = fn
        return fn

    return register


# ---------------------------------------------------------------------------- values
@rule("constant")
def _constant(op):
    count_parts(op, 0, 1)


@rule("program_id")
def _program_id(op):
    count_parts(op, 0, 1)
    if op.attrs.get("axis") not in (0, 1, 2):
        fail(op, f"axis must be 0, 1 or 2, got {op.attrs.get('axis')!r}")
    result_matches(op, (), None, int32)


rule("num_programs")(_program_id)


@rule("arange")
def _arange(op):
    count_parts(op, 0, 1)
    start, end = op.attrs["start"], op.attrs["end"]
    n = end - start
    if n <= 0 or n & (n - 1):
        fail(op, f"end - start must be a positive power of two, got {end} - {start} = {n}")
    result_matches(op, (n,), None, int32)


@rule("splat")
def _splat(op):
    count_parts(op, 1, 1)
    if isinstance(op.operands[0].type, TensorType):
        fail(op, "operand must be a scalar")
    if element_type(op.results[0].type) != op.operands[0].type:
        fail(op, "result element type must be the scalar's type")


# ---------------------------------------------------------------------- element-wise
@rule("binary")
def _binary(op):
    count_parts(op, 2, 1)
    if op.attrs.get("fn") not in BINARY_FNS:
        fail(op, f"fn must be one of {BINARY_FNS}, got {op.attrs.get('fn')!r}")
    same_shape_and_layout(op, op.operands + op.results, "operands and result")
    a, b = (element_type(v.type) for v in op.operands)
    if a != b:
        fail(op, f"operand element types differ: {a} and {b}")


@rule("unary")
def _unary(op):
    count_parts(op, 1, 1)
    if op.attrs.get("fn") not in UNARY_FNS:
        fail(op, f"fn must be one of {UNARY_FNS}, got {op.attrs.get('fn')!r}")
    same_shape_and_layout(op, op.operands + op.results, "operand and result")


@rule("compare")
def _compare(op):
    count_parts(op, 2, 1)
    if op.attrs.get("predicate") not in COMPARE_PREDICATES:
        fail(op, f"predicate must be one of {COMPARE_PREDICATES}")
    same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if element_type(op.results[0].type) != int1:
        fail(op, "result must be int1")


@rule("fma")
def _fma(op):
    count_parts(op, 3, 1)
    same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if not element_type(op.operands[0].type).is_floating():
        fail(op, "operands must be floating point")


@rule("select")
def _select(op):
    count_parts(op, 3, 1)
    same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if element_type(op.operands[0].type) != int1:
        fail(op, f"condition must be int1, got {element_type(op.operands[0].type)}")


@rule("cast")
def _cast(op):
    count_parts(op, 1, 1)
    same_shape_and_layout(op, op.operands + op.results, "operand and result")
    if element_type(op.results[0].type) != op.attrs.get("to"):
        fail(op, "result element type must equal attr `to`")
    if op.attrs.get("bitcast"):
        a, b = element_type(op.operands[0].type), op.attrs["to"]
        if a.primitive_bitwidth != b.primitive_bitwidth:
            fail(op, f"bitcast between types of different widths: {a} and {b}")


@rule("addptr")
def _addptr(op):
    count_parts(op, 2, 1)
    same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if not isinstance(element_type(op.operands[0].type), PointerType):
        fail(op, "first operand must be a pointer")
    off = element_type(op.operands[1].type)
    if not (isinstance(off, DType) and off.is_int()):
        fail(op, f"offset must be an integer, got {off}")


# ------------------------------------------------------------------ shapes and layouts
@rule("broadcast")
def _broadcast(op):
    count_parts(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)) or src.rank != dst.rank:
        fail(op, "operand and result must be tensors of one rank")
    for i, (a, b) in enumerate(zip(src.shape, dst.shape)):
        if a != b and a != 1:
            fail(op, f"dimension {i} of size {a} cannot broadcast to {b}")
    if src.layout != dst.layout and not isinstance(src.layout, AutoLayout) and not isinstance(dst.layout, AutoLayout):
        fail(op, f"broadcast keeps the layout: {src.layout!r} vs {dst.layout!r}")


@rule("expand_dims")
def _expand_dims(op):
    count_parts(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    axis = op.attrs["axis"]
    expected = src.shape[:axis] + (1,) + src.shape[axis:]
    if dst.shape != expected:
        fail(op, f"result shape should be {list(expected)}, got {list(dst.shape)}")
    if not isinstance(src.layout, AutoLayout) and not isinstance(dst.layout, AutoLayout):
        want = SliceLayout(axis, dst.layout)
        if not layouts_match(src.layout, want, src.shape):
            fail(op, f"operand layout must be {want!r} to expand dim {axis}, got {src.layout!r}")


@rule("reshape")
def _reshape(op):
    count_parts(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    if src.numel != dst.numel:
        fail(op, f"cannot reshape {list(src.shape)} ({src.numel} elements) to {list(dst.shape)} ({dst.numel})")


@rule("permute")
def _permute(op):
    count_parts(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    order = tuple(op.attrs["order"])
    if sorted(order) != list(range(src.rank)):
        fail(op, f"order must be a permutation of {list(range(src.rank))}, got {list(order)}")
    if dst.shape != tuple(src.shape[i] for i in order):
        fail(op, "result shape must be the permuted operand shape")


@rule("split")
def _split(op):
    count_parts(op, 1, 2)
    src = op.operands[0].type
    if src.shape[-1] != 2:
        fail(op, f"last dimension must be 2, got {list(src.shape)}")
    for r in op.results:
        if r.type.shape != src.shape[:-1]:
            fail(op, "results must drop the last dimension")


@rule("join")
def _join(op):
    count_parts(op, 2, 1)
    a, b = (v.type for v in op.operands)
    if a.shape != b.shape or a.element != b.element:
        fail(op, f"operands must have one shape and type, got {a} and {b}")
    if op.results[0].type.shape != a.shape + (2,):
        fail(op, "result must add a last dimension of 2")


@rule("convert_layout")
def _convert_layout(op):
    count_parts(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    if src.shape != dst.shape or src.element != dst.element:
        fail(op, "convert_layout changes only the layout")


@rule("set_auto_layout")
def _set_auto_layout(op):
    _convert_layout(op)
    if isinstance(op.results[0].type.layout, AutoLayout):
        fail(op, "the target layout must be concrete")


@rule("reduce")
def _reduce(op):
    n = len(op.operands)
    count_parts(op, None, n, 1)
    axis = op.attrs["axis"]
    shape = op.operands[0].type.shape
    if not 0 <= axis < len(shape):
        fail(op, f"axis {axis} is out of range for a tensor of rank {len(shape)}")
    same_shape_and_layout(op, op.operands, "operands")
    combine = op.regions[0]
    if len(combine.args) != 2 * n:
        fail(op, f"combine region takes {2 * n} arguments, got {len(combine.args)}")
    terminated_by(op, combine, "yield", [a.type for a in combine.args[:n]])


# ------------------------------------------------------------------------------ memory
@rule("load")
def _load(op):
    n = 1 + bool(op.attrs.get("has_mask")) + bool(op.attrs.get("has_other"))
    count_parts(op, n, 1)
    same_shape_and_layout(op, op.operands + op.results, "pointer, mask, other and result")
    ptr = element_type(op.operands[0].type)
    if not isinstance(ptr, PointerType):
        fail(op, f"first operand must be a pointer, got {ptr}")
    if element_type(op.results[0].type) != ptr.element:
        fail(op, "result element type must be the pointee type")


@rule("store")
def _store(op):
    n = 2 + bool(op.attrs.get("has_mask"))
    count_parts(op, n, 0)
    same_shape_and_layout(op, op.operands, "pointer, value and mask")
    ptr = element_type(op.operands[0].type)
    if not isinstance(ptr, PointerType) or element_type(op.operands[1].type) != ptr.element:
        fail(op, f"value of type {element_type(op.operands[1].type)} cannot be stored through {ptr}")


# ------------------------------------------------------------------------ control flow
@rule("for")
def _for(op):
    count_parts(op, None, len(op.operands) - 3, 1)
    body = op.regions[0]
    inits = op.operands[3:]
    if len(body.args) != 1 + len(inits):
        fail(op, "body takes the induction variable and one argument per carried value")
    for i, (init, arg, res) in enumerate(zip(inits, body.args[1:], op.results)):
        if not (types_match(init.type, arg.type) and types_match(init.type, res.type)):
            fail(op, f"carried value {i} changes type: {init.type} before the loop, {arg.type} in it")
    terminated_by(op, body, "yield", [a.type for a in body.args[1:]])


@rule("if")
def _if(op):
    count_parts(op, 1, None, 2)
    scalar_of(op, op.operands[0], lambda t: t == int1, "condition")
    for region in op.regions:
        terminated_by(op, region, "yield", [r.type for r in op.results])


@rule("while")
def _while(op):
    count_parts(op, None, None, 2)
    before, after = op.regions
    terminated_by(op, before, "condition", [a.type for a in after.args])
    terminated_by(op, after, "yield", [a.type for a in before.args])


def _terminator_rule(op):
    if op.parent is not None and op.parent.terminator is not op:
        fail(op, "must be the last op of its region")


for _name in ("yield", "condition", "return"):
    rule(_name)(_terminator_rule)


# ------------------------------------------------------------------ debugging and hints
@rule("device_print")
def _device_print(op):
    count_parts(op, None, 0)


@rule("device_assert")
def _device_assert(op):
    count_parts(op, 1, 0)
    if element_type(op.operands[0].type) != int1:
        fail(op, f"asserted condition must be int1, got {op.operands[0].type}")
    if not isinstance(op.attrs.get("message"), str) or not isinstance(op.attrs.get("line"), int):
        fail(op, "needs a string message and an int line")


@rule("assume")
def _assume(op):
    count_parts(op, 1, 0)
    scalar_of(op, op.operands[0], lambda t: t == int1, "assumed condition")


@rule("hint")
def _hint(op):
    count_parts(op, 1, 1)
    same_shape_and_layout(op, op.operands + op.results, "operand and result")


# ------------------------------------------------------------------------------ driver
def verify(func: Function, concrete: bool = False) -> None:
    """Check every op's rule, SSA scoping, and (``concrete``) that no AutoLayout is left."""
    _verify_block(func.body, set(), concrete, func.num_ctas)
    if func.body.terminator is None or func.body.terminator.name != "return":
        raise CompilationError(f"kernel {func.name} must end with return", func.loc)


def _cta_bits(layout) -> int:
    """How many CTA bits a layout's ``cga_layout`` (or ``block_bases``) splits over (0: one CTA's worth)."""
    bases = getattr(layout, "cga_layout", None) or getattr(layout, "block_bases", None) or ()
    return len(bases) if any(any(v) for v in bases) else 0


def _verify_block(block: Block, visible: Set[int], concrete: bool, num_ctas: int = 1) -> None:
    scope = set(visible) | {a.uid for a in block.args}
    for op in block.ops:
        for v in op.operands:
            if v.uid not in scope:
                fail(op, f"uses a value that is not defined in scope ({v.type})")
        if op.name not in RULES:
            fail(op, "has no verifier rule")
        RULES[op.name](op)
        if concrete:
            for r in op.results:
                if isinstance(r.type, TensorType) and isinstance(r.type.layout, AutoLayout):
                    fail(op, "result still has an AutoLayout after layout inference")
                layout = getattr(r.type, "layout", None)
                if layout is not None and 1 << _cta_bits(layout) > num_ctas:
                    fail(op, f"the layout {layout!r} splits its value between {1 << _cta_bits(layout)} CTAs, but the "
                             f"kernel runs with num_ctas={num_ctas}; launch it with num_ctas={1 << _cta_bits(layout)} "
                             "or use a layout without cga_layout")
        for region in op.regions:
            _verify_block(region, scope, concrete, num_ctas)
        scope.update(r.uid for r in op.results)
