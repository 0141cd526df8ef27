"""Checks that the verifier's rule modules share (:mod:`.verifier` and the ``verify_*`` modules).

Each raises :class:`~gluonkit.ir.diagnostics.CompilationError` at the op's location, the
message starting with the op's name, so every rule reports its mistakes the same way.
"""

from __future__ import annotations

from ..layouts.barrier import MBarrierLayout
from ..layouts.distributed import AutoLayout
from .core import Block, Operation
from .diagnostics import CompilationError
from .types import DType, SharedMemoryDescType, TensorType, element_type, int64, shape_of

__all__ = ["fail", "layouts_match", "same_shape_and_layout", "result_matches", "scalar_of", "count_parts",
           "terminated_by", "types_match", "one_mbarrier"]


def fail(op: Operation, message: str) -> None:
    """Stop verification at ``op``'s source line, naming the op."""
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


def same_shape_and_layout(op: Operation, values, what: str) -> None:
    """``values`` are all scalars, or all tensors of one shape and (linear) layout."""
    types = [v.type for v in values]
    tensors = [t for t in types if isinstance(t, TensorType)]
    if not tensors:
        return
    if len(tensors) != len(types):
        fail(op, f"{what} mixes scalars and tensors ({', '.join(map(str, types))}); splat the scalars first")
    first = tensors[0]
    for t in tensors[1:]:
        if t.shape != first.shape:
            fail(op, f"{what} have different shapes {list(first.shape)} and {list(t.shape)}")
        if not layouts_match(t.layout, first.layout, first.shape):
            fail(op, f"{what} have different layouts {first.layout!r} and {t.layout!r}; insert convert_layout")


def result_matches(op: Operation, shape, layout_like, element=None) -> None:
    """The single result has ``shape``, the layout of ``layout_like`` (if given) and ``element``."""
    res = op.results[0].type
    if tuple(shape_of(res)) != tuple(shape):
        fail(op, f"result shape {list(shape_of(res))} should be {list(shape)}")
    if layout_like is not None and isinstance(res, TensorType):
        if not layouts_match(res.layout, layout_like, res.shape):
            fail(op, f"result layout {res.layout!r} should be {layout_like!r}")
    if element is not None and element_type(res) != element:
        fail(op, f"result element type {element_type(res)} should be {element}")


def scalar_of(op: Operation, value, dtype_pred, what: str) -> None:
    """``value`` is a scalar whose dtype satisfies ``dtype_pred``."""
    if not isinstance(value.type, DType) or not dtype_pred(value.type):
        fail(op, f"{what} must be a scalar of the right type, got {value.type}")


def count_parts(op: Operation, n_operands=None, n_results=None, n_regions=0) -> None:
    """``op`` has these numbers of operands, results and regions (``None``: any number)."""
    if n_operands is not None and len(op.operands) != n_operands:
        fail(op, f"expects {n_operands} operands, got {len(op.operands)}")
    if n_results is not None and len(op.results) != n_results:
        fail(op, f"expects {n_results} results, got {len(op.results)}")
    if len(op.regions) != n_regions:
        fail(op, f"expects {n_regions} regions, got {len(op.regions)}")


def terminated_by(op: Operation, block: Block, name: str, types) -> None:
    """``block`` ends with a ``name`` op yielding values of ``types``."""
    term = block.terminator
    if term is None or term.name != name:
        fail(op, f"region must end with {name}")
    got = [v.type for v in (term.operands[1:] if name == "condition" else term.operands)]
    if len(got) != len(types) or any(not types_match(a, b) for a, b in zip(got, types)):
        fail(op, f"region yields {got} but {[str(t) for t in types]} are expected")


def types_match(a, b) -> bool:
    """Equal types, tensors comparing layouts by their linear layouts."""
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.shape == b.shape and a.element == b.element and layouts_match(a.layout, b.layout, a.shape)
    return a == b


def one_mbarrier(op: Operation, value) -> None:
    """``value`` is a single mbarrier: an int64 shared view of shape [1] with ``MBarrierLayout``."""
    ty = value.type
    if not (isinstance(ty, SharedMemoryDescType) and isinstance(ty.layout, MBarrierLayout)
            and ty.element == int64 and ty.shape == (1,)):
        fail(op, f"the barrier must be one mbarrier (an int64 view of shape [1] with MBarrierLayout, "
                 f"e.g. bars.index(i)), got {ty}")
