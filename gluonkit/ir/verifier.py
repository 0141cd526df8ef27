"""The IR verifier: every op's typing rule, SSA scoping and terminators.

Each catalogue op has exactly one rule here, registered with :func:`rule`.  A rule raises
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
from .types import DType, PointerType, TensorType, element_type, int1, int32, shape_of

__all__ = ["verify", "RULES", "rule", "layouts_match"]

RULES: Dict[str, Callable[[Operation], None]] = {}


def rule(name: str):
    """Register the verifier rule of catalogue op ``name``."""
    if name not in OPS:
        raise KeyError(f"verifier rule for unknown op {name!r}")

    def register(fn):
        RULES[name] = fn
        return fn

    return register


def _fail(op: Operation, message: str) -> None:
    raise CompilationError(f"{op.name}: {message}", op.loc)


def layouts_match(a, b, shape) -> bool:
    """Two layouts place a tensor of ``shape`` identically (same linear layout).

    An ``AutoLayout`` matches anything: before inference the unresolved side will be
    unified with the other by :mod:`gluonkit.lower.infer`, and after inference none is left
    (``verify(..., concrete=True)`` checks that).
    """
    if a == b or isinstance(a, AutoLayout) or isinstance(b, AutoLayout):
        return True
    try:
        return a.to_linear_layout(list(shape)) == b.to_linear_layout(list(shape))
    except ValueError:
        return False


def _same_shape_and_layout(op: Operation, values, what: str) -> None:
    types = [v.type for v in values]
    tensors = [t for t in types if isinstance(t, TensorType)]
    if not tensors:
        return
    if len(tensors) != len(types):
        _fail(op, f"{what} mixes scalars and tensors ({', '.join(map(str, types))}); splat the scalars first")
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape:
            _fail(op, f"{what} have different shapes {list(first.shape)} and {list(t.shape)}")
        if not layouts_match(t.layout, first.layout, first.shape):
            _fail(op, f"{what} have different layouts {first.layout!r} and {t.layout!r}; insert convert_layout")


def _result_matches(op: Operation, shape, layout_like, element=None) -> None:
    res = op.results[0].type
    if tuple(shape_of(res)) != tuple(shape):
        _fail(op, f"result shape {list(shape_of(res))} should be {list(shape)}")
    if layout_like is not None and isinstance(res, TensorType):
        if not layouts_match(res.layout, layout_like, res.shape):
            _fail(op, f"result layout {res.layout!r} should be {layout_like!r}")
    if element is not None and element_type(res) != element:
        _fail(op, f"result element type {element_type(res)} should be {element}")


def _scalar_of(op: Operation, value, dtype_pred, what: str) -> None:
    if isinstance(value.type, TensorType) or not dtype_pred(value.type):
        _fail(op, f"{what} must be a scalar of the right type, got {value.type}")


def _count(op: Operation, n_operands=None, n_results=None, n_regions=0) -> None:
    if n_operands is not None and len(op.operands) != n_operands:
        _fail(op, f"expects {n_operands} operands, got {len(op.operands)}")
    if n_results is not None and len(op.results) != n_results:
        _fail(op, f"expects {n_results} results, got {len(op.results)}")
    if len(op.regions) != n_regions:
        _fail(op, f"expects {n_regions} regions, got {len(op.regions)}")


def _terminated_by(op: Operation, block: Block, name: str, types) -> None:
    term = block.terminator
    if term is None or term.name != name:
        _fail(op, f"region must end with {name}")
    got = [v.type for v in (term.operands[1:] if name == "condition" else term.operands)]
    if len(got) != len(types) or any(not _types_match(a, b) for a, b in zip(got, types)):
        _fail(op, f"region yields {got} but {[str(t) for t in types]} are expected")


def _types_match(a, b) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.shape == b.shape and a.element == b.element and layouts_match(a.layout, b.layout, a.shape)
    return a == b


# ---------------------------------------------------------------------------- values
@rule("constant")
def _constant(op):
    _count(op, 0, 1)


@rule("program_id")
def _program_id(op):
    _count(op, 0, 1)
    if op.attrs.get("axis") not in (0, 1, 2):
        _fail(op, f"axis must be 0, 1 or 2, got {op.attrs.get('axis')!r}")
    _result_matches(op, (), None, int32)


rule("num_programs")(_program_id)


@rule("arange")
def _arange(op):
    _count(op, 0, 1)
    start, end = op.attrs["start"], op.attrs["end"]
    n = end - start
    if n <= 0 or n & (n - 1):
        _fail(op, f"end - start must be a positive power of two, got {end} - {start} = {n}")
    _result_matches(op, (n,), None, int32)


@rule("splat")
def _splat(op):
    _count(op, 1, 1)
    if isinstance(op.operands[0].type, TensorType):
        _fail(op, "operand must be a scalar")
    if element_type(op.results[0].type) != op.operands[0].type:
        _fail(op, "result element type must be the scalar's type")


# ---------------------------------------------------------------------- element-wise
@rule("binary")
def _binary(op):
    _count(op, 2, 1)
    if op.attrs.get("fn") not in BINARY_FNS:
        _fail(op, f"fn must be one of {BINARY_FNS}, got {op.attrs.get('fn')!r}")
    _same_shape_and_layout(op, op.operands + op.results, "operands and result")
    a, b = (element_type(v.type) for v in op.operands)
    if a != b:
        _fail(op, f"operand element types differ: {a} and {b}")


@rule("unary")
def _unary(op):
    _count(op, 1, 1)
    if op.attrs.get("fn") not in UNARY_FNS:
        _fail(op, f"fn must be one of {UNARY_FNS}, got {op.attrs.get('fn')!r}")
    _same_shape_and_layout(op, op.operands + op.results, "operand and result")


@rule("compare")
def _compare(op):
    _count(op, 2, 1)
    if op.attrs.get("predicate") not in COMPARE_PREDICATES:
        _fail(op, f"predicate must be one of {COMPARE_PREDICATES}")
    _same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if element_type(op.results[0].type) != int1:
        _fail(op, "result must be int1")


@rule("fma")
def _fma(op):
    _count(op, 3, 1)
    _same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if not element_type(op.operands[0].type).is_floating():
        _fail(op, "operands must be floating point")


@rule("select")
def _select(op):
    _count(op, 3, 1)
    _same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if element_type(op.operands[0].type) != int1:
        _fail(op, f"condition must be int1, got {element_type(op.operands[0].type)}")


@rule("cast")
def _cast(op):
    _count(op, 1, 1)
    _same_shape_and_layout(op, op.operands + op.results, "operand and result")
    if element_type(op.results[0].type) != op.attrs.get("to"):
        _fail(op, "result element type must equal attr `to`")
    if op.attrs.get("bitcast"):
        a, b = element_type(op.operands[0].type), op.attrs["to"]
        if a.primitive_bitwidth != b.primitive_bitwidth:
            _fail(op, f"bitcast between types of different widths: {a} and {b}")


@rule("addptr")
def _addptr(op):
    _count(op, 2, 1)
    _same_shape_and_layout(op, op.operands + op.results, "operands and result")
    if not isinstance(element_type(op.operands[0].type), PointerType):
        _fail(op, "first operand must be a pointer")
    off = element_type(op.operands[1].type)
    if not (isinstance(off, DType) and off.is_int()):
        _fail(op, f"offset must be an integer, got {off}")


# ------------------------------------------------------------------ shapes and layouts
@rule("broadcast")
def _broadcast(op):
    _count(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)) or src.rank != dst.rank:
        _fail(op, "operand and result must be tensors of one rank")
    for i, (a, b) in enumerate(zip(src.shape, dst.shape)):
        if a != b and a != 1:
            _fail(op, f"dimension {i} of size {a} cannot broadcast to {b}")
    if src.layout != dst.layout and not isinstance(src.layout, AutoLayout) and not isinstance(dst.layout, AutoLayout):
        _fail(op, f"broadcast keeps the layout: {src.layout!r} vs {dst.layout!r}")


@rule("expand_dims")
def _expand_dims(op):
    _count(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    axis = op.attrs["axis"]
    expected = src.shape[:axis] + (1,) + src.shape[axis:]
    if dst.shape != expected:
        _fail(op, f"result shape should be {list(expected)}, got {list(dst.shape)}")
    if not isinstance(src.layout, AutoLayout) and not isinstance(dst.layout, AutoLayout):
        want = SliceLayout(axis, dst.layout)
        if not layouts_match(src.layout, want, src.shape):
            _fail(op, f"operand layout must be {want!r} to expand dim {axis}, got {src.layout!r}")


@rule("reshape")
def _reshape(op):
    _count(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    if src.numel != dst.numel:
        _fail(op, f"cannot reshape {list(src.shape)} ({src.numel} elements) to {list(dst.shape)} ({dst.numel})")


@rule("permute")
def _permute(op):
    _count(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    order = tuple(op.attrs["order"])
    if sorted(order) != list(range(src.rank)):
        _fail(op, f"order must be a permutation of {list(range(src.rank))}, got {list(order)}")
    if dst.shape != tuple(src.shape[i] for i in order):
        _fail(op, "result shape must be the permuted operand shape")


@rule("split")
def _split(op):
    _count(op, 1, 2)
    src = op.operands[0].type
    if src.shape[-1] != 2:
        _fail(op, f"last dimension must be 2, got {list(src.shape)}")
    for r in op.results:
        if r.type.shape != src.shape[:-1]:
            _fail(op, "results must drop the last dimension")


@rule("join")
def _join(op):
    _count(op, 2, 1)
    a, b = (v.type for v in op.operands)
    if a.shape != b.shape or a.element != b.element:
        _fail(op, f"operands must have one shape and type, got {a} and {b}")
    if op.results[0].type.shape != a.shape + (2,):
        _fail(op, "result must add a last dimension of 2")


@rule("convert_layout")
def _convert_layout(op):
    _count(op, 1, 1)
    src, dst = op.operands[0].type, op.results[0].type
    if src.shape != dst.shape or src.element != dst.element:
        _fail(op, "convert_layout changes only the layout")


@rule("set_auto_layout")
def _set_auto_layout(op):
    _convert_layout(op)
    if isinstance(op.results[0].type.layout, AutoLayout):
        _fail(op, "the target layout must be concrete")


@rule("reduce")
def _reduce(op):
    n = len(op.operands)
    _count(op, None, n, 1)
    axis = op.attrs["axis"]
    shape = op.operands[0].type.shape
    if not 0 <= axis < len(shape):
        _fail(op, f"axis {axis} is out of range for a tensor of rank {len(shape)}")
    _same_shape_and_layout(op, op.operands, "operands")
    combine = op.regions[0]
    if len(combine.args) != 2 * n:
        _fail(op, f"combine region takes {2 * n} arguments, got {len(combine.args)}")
    _terminated_by(op, combine, "yield", [a.type for a in combine.args[:n]])


# ------------------------------------------------------------------------------ memory
@rule("load")
def _load(op):
    n = 1 + bool(op.attrs.get("has_mask")) + bool(op.attrs.get("has_other"))
    _count(op, n, 1)
    _same_shape_and_layout(op, op.operands + op.results, "pointer, mask, other and result")
    ptr = element_type(op.operands[0].type)
    if not isinstance(ptr, PointerType):
        _fail(op, f"first operand must be a pointer, got {ptr}")
    if element_type(op.results[0].type) != ptr.element:
        _fail(op, "result element type must be the pointee type")


@rule("store")
def _store(op):
    n = 2 + bool(op.attrs.get("has_mask"))
    _count(op, n, 0)
    _same_shape_and_layout(op, op.operands, "pointer, value and mask")
    ptr = element_type(op.operands[0].type)
    if not isinstance(ptr, PointerType) or element_type(op.operands[1].type) != ptr.element:
        _fail(op, f"value of type {element_type(op.operands[1].type)} cannot be stored through {ptr}")


# ------------------------------------------------------------------------ control flow
@rule("for")
def _for(op):
    _count(op, None, len(op.operands) - 3, 1)
    body = op.regions[0]
    inits = op.operands[3:]
    if len(body.args) != 1 + len(inits):
        _fail(op, "body takes the induction variable and one argument per carried value")
    for i, (init, arg, res) in enumerate(zip(inits, body.args[1:], op.results)):
        if not (_types_match(init.type, arg.type) and _types_match(init.type, res.type)):
            _fail(op, f"carried value {i} changes type: {init.type} before the loop, {arg.type} in it")
    _terminated_by(op, body, "yield", [a.type for a in body.args[1:]])


@rule("if")
def _if(op):
    _count(op, 1, None, 2)
    _scalar_of(op, op.operands[0], lambda t: t == int1, "condition")
    for region in op.regions:
        _terminated_by(op, region, "yield", [r.type for r in op.results])


@rule("while")
def _while(op):
    _count(op, None, None, 2)
    before, after = op.regions
    _terminated_by(op, before, "condition", [a.type for a in after.args])
    _terminated_by(op, after, "yield", [a.type for a in before.args])


def _terminator_rule(op):
    if op.parent is not None and op.parent.terminator is not op:
        _fail(op, "must be the last op of its region")


for _name in ("yield", "condition", "return"):
    rule(_name)(_terminator_rule)


# ------------------------------------------------------------------ debugging and hints
@rule("device_print")
def _device_print(op):
    _count(op, None, 0)


@rule("device_assert")
def _device_assert(op):
    _count(op, 1, 0)
    if element_type(op.operands[0].type) != int1:
        _fail(op, f"asserted condition must be int1, got {op.operands[0].type}")
    if not isinstance(op.attrs.get("message"), str) or not isinstance(op.attrs.get("line"), int):
        _fail(op, "needs a string message and an int line")


@rule("assume")
def _assume(op):
    _count(op, 1, 0)
    _scalar_of(op, op.operands[0], lambda t: t == int1, "assumed condition")


@rule("hint")
def _hint(op):
    _count(op, 1, 1)
    _same_shape_and_layout(op, op.operands + op.results, "operand and result")


# ------------------------------------------------------------------------------ driver
def verify(func: Function, concrete: bool = False) -> None:
    """Check every op's rule, SSA scoping, and (``concrete``) that no AutoLayout is left."""
    _verify_block(func.body, set(), concrete)
    if func.body.terminator is None or func.body.terminator.name != "return":
        raise CompilationError(f"kernel {func.name} must end with return", func.loc)


def _verify_block(block: Block, visible: Set[int], concrete: bool) -> None:
    scope = set(visible) | {a.uid for a in block.args}
    for op in block.ops:
        for v in op.operands:
            if v.uid not in scope:
                _fail(op, f"uses a value that is not defined in scope ({v.type})")
        if op.name not in RULES:
            _fail(op, "has no verifier rule")
        RULES[op.name](op)
        if concrete:
            for r in op.results:
                if isinstance(r.type, TensorType) and isinstance(r.type.layout, AutoLayout):
                    _fail(op, "result still has an AutoLayout after layout inference")
        for region in op.regions:
            _verify_block(region, scope, concrete)
        scope.update(r.uid for r in op.results)
