"""Gluon's function spellings of operators: ``gl.add``, ``gl.sub``, ``gl.mul``, ``gl.to_tensor``, ``gl.broadcast``.

``gl.add(x, y)`` is ``x + y`` with the same promotion and broadcasting.  Gluon's
``sanitize_overflow`` asks Triton's integer-overflow sanitizer to check the operation when
that sanitizer is enabled; gluonkit has no such sanitizer, so the flag is accepted and has
no effect (docs/porting.rst).
"""

from __future__ import annotations

from .tensor import builtin

__all__ = ["add", "sub", "mul", "to_tensor", "broadcast"]


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
