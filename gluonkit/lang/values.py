"""Structured kernel values: the runtime tensors inside tuples and aggregates.

Control flow carries values through regions as flat lists of IR values.  A Python value
in a kernel may nest runtime tensors inside tuples, lists and aggregates next to
compile-time parts (ints, layouts, shared memory descriptors …).  :func:`flatten` splits a
value into its runtime leaves and a *structure* that records everything else;
:func:`unflatten` puts new leaves back into that structure.  Two values can flow into one
result (a loop-carried variable, the two branches of an ``if``) when their structures
agree: same shape of containers, the same compile-time parts, and leaves of one type.

An asynchronous wgmma's :class:`~.nvidia.wgmma.warpgroup_mma_accumulator` is a runtime
leaf too (its value is the accumulator tensor in flight), as in Gluon: it can be carried
through loops and branches, and a carried value keeps the kind it had first — a variable
that starts as a tensor and is reassigned an accumulator inside a loop is a tensor at the
top of each iteration and after the loop, one that starts as an accumulator stays one.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from ..ir.types import TensorType
from ..ir import layouts_match
from .aggregate import fields_of, is_aggregate, rebuild
from .nvidia.wgmma import warpgroup_mma_accumulator
from .tensor import tensor

__all__ = ["is_runtime", "flatten", "unflatten", "structure_mismatch", "describe"]


def is_runtime(value) -> bool:
    """Whether ``value`` is or contains a runtime tensor (inside tuples, lists, aggregates)."""
    if isinstance(value, (tensor, warpgroup_mma_accumulator)):
        return True
    if isinstance(value, (tuple, list)):
        return any(is_runtime(v) for v in value)
    if is_aggregate(value):
        return any(is_runtime(v) for v in fields_of(value).values())
    return False


# A structure is ("leaf", type) for a tensor, ("leaf", type, warpgroup_mma_accumulator) for
# an accumulator (its leaf is the tensor it holds), (container type, [structures]) for a
# tuple or list, ("aggregate", class, [(name, structure)]) for an aggregate, ("const",
# value) else.
def flatten(value) -> Tuple[List[tensor], Any]:
    """``(runtime leaves in order, structure)`` of ``value``."""
    leaves: List[tensor] = []
    return leaves, _flatten(value, leaves)


def _flatten(value, leaves):
    if isinstance(value, tensor):
        leaves.append(value)
        return ("leaf", value.type)
    if isinstance(value, warpgroup_mma_accumulator):
        leaves.append(tensor(value.handle))
        return ("leaf", value.type, warpgroup_mma_accumulator)
    if type(value) in (tuple, list):
        return (type(value), [_flatten(v, leaves) for v in value])
    if is_aggregate(value):
        return ("aggregate", type(value), [(n, _flatten(v, leaves)) for n, v in fields_of(value).items()])
    return ("const", value)


def unflatten(structure, leaves) -> Any:
    """The value of ``structure`` with ``leaves`` (tensors, in order) in its runtime places."""
    it = iter(leaves)
    return _unflatten(structure, it)


def _unflatten(structure, it):
    kind = structure[0]
    if kind == "leaf":
        leaf = next(it)
        return structure[2](leaf.handle) if len(structure) > 2 else leaf
    if kind == "const":
        return structure[1]
    if kind == "aggregate":
        return rebuild(structure[1], {n: _unflatten(s, it) for n, s in structure[2]})
    values = [_unflatten(s, it) for s in structure[1]]
    return kind(values) if kind is list else tuple(values)


def _same_leaf_type(a, b) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.shape == b.shape and a.element == b.element and layouts_match(a.layout, b.layout, a.shape)
    return a == b


def _same_constant(a, b) -> bool:
    if a is b:
        return True
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:  # noqa: BLE001 - values without a usable ==
        return False


def structure_mismatch(a, b, path: str = "") -> Optional[str]:
    """Why structures ``a`` and ``b`` cannot hold one value (None when they can)."""
    where = f" at {path}" if path else ""
    if a[0] != b[0]:
        return f"{describe(a)} and {describe(b)}{where}"
    kind = a[0]
    if kind == "leaf":
        return None if _same_leaf_type(a[1], b[1]) else f"types {a[1]} and {b[1]}{where}"
    if kind == "const":
        return None if _same_constant(a[1], b[1]) else f"compile-time values {a[1]!r} and {b[1]!r}{where}"
    if kind == "aggregate":
        if a[1] is not b[1]:
            return f"aggregates {a[1].__name__} and {b[1].__name__}{where}"
        for (name, sa), (_, sb) in zip(a[2], b[2]):
            problem = structure_mismatch(sa, sb, f"{path}.{name}" if path else f".{name}")
            if problem:
                return problem
        return None
    if len(a[1]) != len(b[1]):
        return f"tuples of {len(a[1])} and {len(b[1])} values{where}"
    for i, (sa, sb) in enumerate(zip(a[1], b[1])):
        problem = structure_mismatch(sa, sb, f"{path}[{i}]")
        if problem:
            return problem
    return None


def describe(structure) -> str:
    """A short description of a structure's kind for error messages."""
    kind = structure[0]
    if kind == "leaf":
        return f"a runtime value of type {structure[1]}"
    if kind == "const":
        return f"the compile-time value {structure[1]!r}"
    if kind == "aggregate":
        return f"an aggregate {structure[1].__name__}"
    return f"a {kind.__name__} of {len(structure[1])} values"
