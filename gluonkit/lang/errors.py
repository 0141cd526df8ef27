"""The precise kinds of :class:`~gluonkit.ir.CompilationError` the frontend raises.

Every mistake in a kernel's source becomes one of these, located at the user's line (with
the chain of ``@jit`` calls it was inlined through).  Catch ``CompilationError`` to catch
them all; the subclasses let tests and tools tell the kinds apart.
"""

from __future__ import annotations

from ..ir.diagnostics import CompilationError

__all__ = [
    "CompilationError", "UnsupportedSyntaxError", "TypeMismatchError", "ShapeMismatchError",
    "LayoutMismatchError", "ConstexprRequiredError", "UndefinedNameError", "ArgumentError",
]


class UnsupportedSyntaxError(CompilationError):
    """A Python construct kernels cannot express (``break``, ``try``, ``return`` inside a runtime loop …)."""


class TypeMismatchError(CompilationError):
    """Operand types that no promotion rule reconciles, or a value whose type changes."""


class ShapeMismatchError(CompilationError):
    """Shapes that cannot be broadcast or reshaped into each other."""


class LayoutMismatchError(CompilationError):
    """Two different concrete layouts meet where one is needed (insert ``convert_layout``)."""


class ConstexprRequiredError(CompilationError):
    """A runtime value where a compile-time constant (``gl.constexpr``) is required."""


class UndefinedNameError(CompilationError):
    """A name that is not defined at this point of the kernel."""


class ArgumentError(CompilationError):
    """A call with the wrong number, names or kinds of arguments."""
