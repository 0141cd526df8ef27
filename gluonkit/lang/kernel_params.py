"""A kernel's runtime parameters as IR function arguments, and back as kernel values.

Each runtime parameter has a type: a scalar ``DType`` or ``PointerType`` (one argument), a
``TensorDescType`` (the descriptor, then its shape and strides: see
:meth:`~gluonkit.ir.TensorDescType.flat_arg_types`), or — for a tuple argument, as Gluon
allows — a tuple of such types, possibly nested, whose compile-time elements are given as
``gl.constexpr(value)``.  A tuple parameter ``ptrs`` becomes the arguments ``ptrs_0``,
``ptrs_1`` … (``ptrs_0_1`` when nested); in the kernel it is the tuple of their values.
Divisibility specializations are keyed by these flat names.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Sequence, Tuple

from ..ir.diagnostics import Location
from ..ir.types import DType, PointerType, TensorDescType
from .constexpr import constexpr
from .errors import ArgumentError
from .nvidia.tma import descriptor_value
from .tensor import tensor

__all__ = ["flatten_params", "param_values", "leaf_names"]


def leaf_names(name: str, ty) -> List[str]:
    """The flat names of the scalar and pointer leaves of a (tuple) parameter type, in order."""
    if isinstance(ty, tuple):
        return [n for i, t in enumerate(ty) for n in leaf_names(f"{name}_{i}", t)]
    return [] if isinstance(ty, constexpr) else [name]


def flatten_params(names: Sequence[str], types: Sequence, loc: Location) -> Tuple[list, List[str]]:
    """``(argument types, argument names)`` of the IR function for these parameters."""
    flat_types: list = []
    flat_names: List[str] = []
    for name, ty in zip(names, types):
        _flatten(name, ty, flat_types, flat_names, loc)
    return flat_types, flat_names


def _flatten(name, ty, flat_types, flat_names, loc) -> None:
    if isinstance(ty, tuple):
        for i, t in enumerate(ty):
            _flatten(f"{name}_{i}", t, flat_types, flat_names, loc)
    elif isinstance(ty, constexpr):
        return
    elif isinstance(ty, TensorDescType):
        flat_types += ty.flat_arg_types()
        flat_names += [name] + [f"{name}_shape{d}" for d in range(ty.rank)] + \
            [f"{name}_stride{d}" for d in range(ty.rank)]
    elif isinstance(ty, (DType, PointerType)):
        flat_types.append(ty)
        flat_names.append(name)
    else:
        raise ArgumentError(f"argument '{name}' must have a scalar, pointer or tensor descriptor type (or a tuple "
                            f"of them), got {ty!r}", loc)


def param_values(names: Sequence[str], types: Sequence, args: Iterator, sem,
                 specialization: Dict[str, Dict[str, int]]) -> Dict[str, Any]:
    """The kernel values of the parameters, consuming the IR function's arguments ``args``
    in the order :func:`flatten_params` gave them."""
    return {name: _value(name, ty, args, sem, specialization) for name, ty in zip(names, types)}


def _value(name, ty, args, sem, specialization):
    if isinstance(ty, tuple):
        return tuple(_value(f"{name}_{i}", t, args, sem, specialization) for i, t in enumerate(ty))
    if isinstance(ty, constexpr):
        return ty.value
    arg = next(args)
    if isinstance(ty, TensorDescType):
        shape = [tensor(next(args)) for _ in range(ty.rank)]
        return descriptor_value(arg, shape, [tensor(next(args)) for _ in range(ty.rank)])
    value = tensor(arg)
    divisibility = specialization.get(name, {}).get("divisibility")
    if divisibility:
        value = sem.hint(value, multiple_of=divisibility)
        value.handle.name_hint = name
    return value
