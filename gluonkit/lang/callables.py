"""Compile-time functions and call annotations: ``constexpr_function``, ``must_use_result``.

* ``@gluonkit.constexpr_function`` wraps a plain Python function that kernels call at
  compile time — to compute a layout, a block shape, a config — on compile-time arguments.
  In a kernel its ``gl.constexpr`` arguments arrive unwrapped and its result is a
  compile-time value; from Python it is an ordinary call.  As a method of an
  ``@gluonkit.aggregate`` it receives the instance as ``self``.
* ``@gluonkit.must_use_result`` (or ``@gluonkit.must_use_result("why")``) marks a ``@jit``
  function or builtin whose result a kernel must not drop: calling it as a bare statement is
  a compilation error (with the reason, when one is given).

:class:`BoundMethod` pairs an aggregate instance with a ``@jit`` or constexpr method looked
up on it in a kernel, so the code generator passes the instance as the first argument.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, Optional

from .constexpr import unwrap

__all__ = ["ConstexprFunction", "constexpr_function", "must_use_result", "BoundMethod", "is_constexpr_function",
           "is_jit_function", "triton_jit_function"]


_FROM_TRITON: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # Python function -> its gluonkit jit


def triton_jit_function(value, make_jit: Callable) -> Optional[Any]:
    """The ``@gluonkit.jit`` twin of a Triton ``@triton.jit`` function (Triton's ``JITFunction``,
    recognised by its class name and its Python function ``fn``), made once with ``make_jit``;
    None for anything else.

    Gluon kernels may call ``@triton.jit`` helpers (Gluon's tutorials do, for tile index
    arithmetic); gluonkit inlines the same Python function through its own frontend, so the
    helper may use what a gluonkit kernel may use (Triton-language builtins stay errors)."""
    fn = getattr(value, "fn", None)
    if type(value).__name__ != "JITFunction" or is_jit_function(value) or not inspect.isfunction(fn):
        return None
    if fn not in _FROM_TRITON:
        _FROM_TRITON[fn] = make_jit(fn)
    return _FROM_TRITON[fn]


def is_jit_function(value) -> bool:
    """Whether ``value`` is a ``@gluonkit.jit`` function (a :class:`~gluonkit.lang.jit.JITFunction`).

    Asked through the class's ``__gluonkit_jit__`` mark, so that the modules below ``jit`` in
    the import order (this one, aggregates, the code generator) need not import it.
    """
    return bool(getattr(value, "__gluonkit_jit__", False))


class ConstexprFunction:
    """A ``@gluonkit.constexpr_function`` (see the module docstring)."""

    __gluonkit_constexpr_function__ = True

    def __init__(self, fn: Callable):
        if not callable(fn):
            raise TypeError(f"@gluonkit.constexpr_function decorates a function, got {fn!r}")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, instance, owner=None):
        return self if instance is None else BoundMethod(instance, self)

    def __call__(self, *args, **kwargs):
        """Run the function on the values (``gl.constexpr`` wrappers stripped)."""
        return self.fn(*(unwrap(a) for a in args), **{k: unwrap(v) for k, v in kwargs.items()})

    def __repr__(self) -> str:
        return f"constexpr_function({getattr(self.fn, '__qualname__', self.fn)!r})"


def constexpr_function(fn: Callable) -> ConstexprFunction:
    """Make ``fn`` callable from kernels at compile time (see the module docstring)."""
    return ConstexprFunction(fn)


def is_constexpr_function(value) -> bool:
    return bool(getattr(value, "__gluonkit_constexpr_function__", False))


def must_use_result(x, s=True):
    """Mark the function ``x`` so that dropping its result in a kernel is an error; with a
    string ``x``, returns a decorator whose error message adds that reason.  (Gluon's
    parameter names.)"""
    if isinstance(x, str):
        return lambda fn: must_use_result(fn, x)
    x._must_use_result = s
    return x


class BoundMethod:
    """``instance.method`` for a ``@jit`` or constexpr method of an aggregate instance."""

    __slots__ = ("instance", "function")

    def __init__(self, instance: Any, function: Any):
        self.instance = instance
        self.function = function

    @property
    def _must_use_result(self):
        return getattr(self.function, "_must_use_result", False)

    def __call__(self, *args, **kwargs):
        return self.function(self.instance, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<bound method {getattr(self.function, '__name__', self.function)} of {self.instance!r}>"
