"""The code generator's handling of aggregates, constexpr functions and ``must_use_result``.

Kept apart from :mod:`gluonkit.lang.codegen` so that the expression/statement walker stays
about Python syntax; the :class:`~gluonkit.lang.codegen.CodeGenerator` mixes this in and
calls :meth:`StructsMixin.call_structured` before its generic call handling.
"""

from __future__ import annotations

import ast

from .aggregate import AggregateError, aggregate_replace, construct, is_aggregate, is_aggregate_class
from .callables import BoundMethod, is_constexpr_function, is_jit_function
from .errors import ArgumentError, CompilationError, TypeMismatchError, UnsupportedSyntaxError
from .values import is_runtime

__all__ = ["StructsMixin", "NOT_HANDLED"]

NOT_HANDLED = object()


class StructsMixin:
    """Calls of aggregate classes, bound methods and constexpr functions; field access."""

    def call_structured(self, fn, args, kwargs, name: str):
        """The result of calling ``fn`` when it is an aggregate class, a bound method, a
        constexpr function or ``aggregate_replace``; ``NOT_HANDLED`` otherwise."""
        if isinstance(fn, BoundMethod):
            if is_jit_function(fn.function):
                return self.call_jit(fn.function, [fn.instance, *args], kwargs)
            return self._python_call(fn.function, [fn.instance, *args], kwargs, name)
        if is_aggregate_class(fn):
            try:
                return construct(fn, args, kwargs, self.call_jit)
            except CompilationError:
                raise
            except AggregateError as e:
                self.error(f"{name}(...): {e}", TypeMismatchError)
            except TypeError as e:
                self.error(f"{name}(...): {e}", ArgumentError)
            except Exception as e:  # noqa: BLE001 - the user's compile-time __init__ failed: report it at the call
                self.error(f"{name}(...) failed at compile time: {type(e).__name__}: {e}", ArgumentError)
        if is_constexpr_function(fn):
            return self._python_call(fn, args, kwargs, name)
        if fn is aggregate_replace:
            try:
                return aggregate_replace(*args, **kwargs)
            except TypeError as e:
                self.error(f"aggregate_replace(...): {e}", TypeMismatchError)
        return NOT_HANDLED

    def _python_call(self, fn, args, kwargs, name: str):
        """Run a compile-time Python function (a constexpr function or an aggregate's plain
        method); its result must be a compile-time value."""
        try:
            result = fn(*args, **kwargs)
        except CompilationError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's compile-time code failed: report it at the call
            self.error(f"{name}(...) failed at compile time: {type(e).__name__}: {e}", ArgumentError)
        if is_runtime(result) and is_constexpr_function(getattr(fn, "function", fn)):
            self.error(f"{name}(...) is a constexpr_function but returned the runtime value {result!r}; "
                       "compute runtime values in a @jit function", TypeMismatchError)
        return result

    def bind_method(self, base, attr: str, value):
        """``base.attr`` for an aggregate instance: ``@jit`` methods get bound to it."""
        if is_aggregate(base) and is_jit_function(value) and attr not in base.__dict__:
            return BoundMethod(base, value)
        return value

    def assign_attribute(self, target: ast.Attribute, value) -> None:
        """``obj.field = value``: allowed only while an aggregate's ``@jit __init__`` builds ``obj``."""
        base = self.visit(target.value)
        if not is_aggregate(base):
            self.error(f"assignment to {ast.unparse(target)} is not supported: only an aggregate's __init__ may "
                       "set attributes (of self)", UnsupportedSyntaxError)
        try:
            setattr(base, target.attr, value)
        except AggregateError as e:
            self.error(str(e), TypeMismatchError)

    def check_result_used(self, fn, name: str) -> None:
        """Raise if ``fn`` is marked ``must_use_result`` (its call is a bare statement)."""
        reason = getattr(fn, "_must_use_result", False)
        if reason:
            extra = f" {reason}" if isinstance(reason, str) else ""
            self.error(f"the result of {name}(...) is not used; it is marked must_use_result.{extra}",
                       UnsupportedSyntaxError)
