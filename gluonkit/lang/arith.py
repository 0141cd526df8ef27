"""Gluon 3.9's small functions over existing ops: ``gl.add``, ``gl.sub``, ``gl.mul``,
``gl.to_tensor``, ``gl.broadcast``, ``gl.umulhi``, ``gl.clamp``, ``gl.ravel``.

``gl.add(x, y)`` is ``x + y`` with the same promotion and broadcasting.  Gluon's
``sanitize_overflow`` asks Triton's integer-overflow sanitizer to check the operation when
that sanitizer is enabled; gluonkit has no such sanitizer, so the flag is accepted and has
no effect (docs/porting.rst).
"""

from __future__ import annotations

from .builtins import PropagateNan
from .errors import TypeMismatchError
from .tensor import builtin

__all__ = ["add", "sub", "mul", "to_tensor", "broadcast", "umulhi", "clamp", "ravel"]


@builtin
def add(x, y, sanitize_overflow=True, _semantic=None):
    """``x + y``."""
    return _semantic.arith("add", x, y)


@builtin
def sub(x, y, sanitize_overflow=True, _semantic=None):
    """``x - y``."""
    return _semantic.arith("sub", x, y)


@builtin
def mul(x, y, sanitize_overflow=True, _semantic=None):
    """``x * y``."""
    return _semantic.arith("mul", x, y)


@builtin
def to_tensor(x, _semantic=None):
    """``x`` (a Python number, a constexpr or a tensor) as a tensor: a scalar of its literal type."""
    return _semantic.to_tensor(x)


@builtin
def broadcast(input, other, _semantic=None):  # noqa: A002 - Gluon's name
    """``(input, other)`` broadcast against each other: one shape, one layout."""
    a, b = _semantic.broadcast_all([_semantic.to_tensor(input), _semantic.to_tensor(other)])
    return a, b


@builtin
def umulhi(x, y, _semantic=None):
    """The high half of the full-width product of the integers ``x`` and ``y``."""
    a, b = _semantic.promote(x, y, "umulhi")
    if not a.dtype.is_int() or a.dtype.is_bool():
        _semantic.error(f"umulhi needs integer operands, got {a.dtype}", TypeMismatchError)
    return _semantic._binary("umulhi", a, b)


@builtin
def clamp(x, min, max, propagate_nan=PropagateNan.NONE, _semantic=None):  # noqa: A002 - Gluon's names
    """``x`` limited to ``[min, max]`` (floating point; ``min > max`` is undefined, as in Triton).

    A NaN ``x`` gives ``min`` with ``PropagateNan.NONE`` and NaN with ``PropagateNan.ALL``.
    """
    x = _semantic.to_tensor(x)
    if not x.dtype.is_floating():
        _semantic.error(f"clamp is for floating-point tensors, got {x.dtype}; use gl.minimum(gl.maximum(x, lo), hi)",
                        TypeMismatchError)
    low = _semantic.minmax("maximum", x, min, propagate_nan)
    return _semantic.minmax("minimum", low, max, propagate_nan)


@builtin
def ravel(x, can_reorder=False, _semantic=None):
    """``x`` as a 1-D tensor, in row-major order."""
    x = _semantic.require_tensor(x, "ravel's operand", block=True)
    return _semantic.reshape(x, [x.type.numel], can_reorder)
