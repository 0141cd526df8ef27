"""``@gluonkit.aggregate``: user-defined structs of kernel values, as in Gluon.

An aggregate class declares annotated fields::

    @gluonkit.aggregate
    class Tile:
        acc: gl.tensor
        smem: gl.shared_memory_descriptor
        BLOCK: gl.constexpr
        STAGES: gl.constexpr = 2          # a default

        @gluonkit.constexpr_function      # or @gluonkit.jit, or no __init__ at all
        def __init__(self, acc, smem, BLOCK):
            ...

        @gluonkit.jit
        def scaled(self, s):
            return self.acc * s

Kernels construct instances by calling the class, read fields and call ``@jit`` and
``@constexpr_function`` methods; instances pass into and out of ``@jit`` functions and
through loops and branches like tuples (their runtime fields are carried, their other
fields must not change).  Without an ``__init__`` the fields are the constructor's
parameters, in order, with their defaults.  An ``__init__`` may be a ``@constexpr_function``
(Gluon's way: plain Python run at compile time), a plain function (the same), or a ``@jit``
function (inlined: it may compute with tensors).  Every field must be set by the
constructor; fields annotated ``gl.constexpr`` must hold compile-time values, ``gl.tensor``
fields runtime tensors, and fields annotated with another aggregate class (or another
gluonkit class) instances of it.  Instances are immutable afterwards:
:func:`aggregate_replace` makes a modified copy.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Dict, Optional, Sequence

from .callables import is_jit_function
from .constexpr import is_constexpr_annotation, unwrap
from .tensor import tensor

__all__ = ["aggregate", "aggregate_replace", "is_aggregate", "is_aggregate_class", "AggregateError",
           "new_instance", "finish_init", "default_init", "fields_of", "rebuild", "construct"]

_MISSING = object()


class AggregateError(TypeError):
    """A misuse of an aggregate (the frontend turns it into an error at the user's line)."""


class AggregateValue:
    """The base of every aggregate class: field storage, immutability and ``repr``."""

    __gluonkit_aggregate__ = True
    __aggregate_fields__: tuple = ()
    __aggregate_annotations__: Dict[str, Any] = {}
    __aggregate_defaults__: Dict[str, Any] = {}
    __aggregate_init__: Any = None

    def __new__(cls, *args, **kwargs):
        """Host-side construction (no kernel): runs a Python ``__init__`` or the default one."""
        init = cls.__aggregate_init__
        if is_jit_function(init):
            raise AggregateError(f"{cls.__name__} has a @jit __init__: construct it inside a kernel")
        instance = new_instance(cls)
        if init is None:
            default_init(instance, args, kwargs)
        else:
            init(instance, *args, **kwargs)
        finish_init(instance)
        return instance

    def __setattr__(self, name: str, value: Any) -> None:
        cls = type(self)
        if name not in cls.__aggregate_fields__:
            raise AggregateError(f"{cls.__name__} has no field '{name}'; its fields are "
                                 f"{list(cls.__aggregate_fields__)}")
        if not self.__dict__.get("_initializing", False):
            raise AggregateError(f"cannot assign to field '{name}' of {cls.__name__}: aggregates are immutable "
                                 f"after construction; use gluonkit.language.aggregate_replace(x, {name}=...)")
        self.__dict__[name] = unwrap(value)

    def __eq__(self, other) -> bool:
        """Field-wise equality, so that equal compile-time aggregates (kernel arguments,
        globals) share one compiled kernel."""
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(self.__dict__.get(n), other.__dict__.get(n)) for n in type(self).__aggregate_fields__)

    def __hash__(self) -> int:
        return hash((type(self),) + tuple(_hashable(self.__dict__.get(n)) for n in type(self).__aggregate_fields__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={self.__dict__.get(n, '<unset>')!r}" for n in type(self).__aggregate_fields__)
        return f"{type(self).__name__}({fields})"


def _same(a, b) -> bool:
    """Equality of two field values; runtime tensors are equal only to themselves."""
    if isinstance(a, tensor) or isinstance(b, tensor):
        return a is b
    return type(a) is type(b) and bool(a == b)


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def aggregate(cls: type) -> type:
    """Make ``cls`` an aggregate class (see the module docstring)."""
    if not isinstance(cls, type):
        raise TypeError(f"@gluonkit.aggregate decorates a class, got {cls!r}")
    bases = tuple(b for b in cls.__bases__ if b is not object)
    for base in bases:
        if not is_aggregate_class(base):
            raise TypeError(f"aggregate {cls.__name__} may only inherit from other aggregates, not {base.__name__}")
    annotations: Dict[str, Any] = {}
    defaults: Dict[str, Any] = {}
    for base in bases:
        annotations.update(base.__aggregate_annotations__)
        defaults.update(base.__aggregate_defaults__)
    own = dict(cls.__dict__.get("__annotations__", {}))
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable forward references: keep the strings
        hints = {}
    for name, annotation in own.items():
        annotations[name] = hints.get(name, annotation)
        value = cls.__dict__.get(name, _MISSING)
        if value is not _MISSING and not callable(value):
            defaults[name] = unwrap(value)
    namespace = {k: v for k, v in cls.__dict__.items()
                 if k not in ("__dict__", "__weakref__", "__init__") and k not in own}
    init = cls.__dict__.get("__init__")  # as in Triton, a subclass without one gets the generated one
    namespace.update(__aggregate_fields__=tuple(annotations), __aggregate_annotations__=annotations,
                     __aggregate_defaults__=defaults, __aggregate_init__=init)
    new = type(cls.__name__, bases or (AggregateValue,), namespace)
    new.__qualname__ = cls.__qualname__
    new.__module__ = cls.__module__
    return new


def is_aggregate_class(value) -> bool:
    return isinstance(value, type) and issubclass(value, AggregateValue)


def is_aggregate(value) -> bool:
    """Whether ``value`` is an aggregate instance."""
    return isinstance(value, AggregateValue)


def fields_of(instance) -> Dict[str, Any]:
    """The instance's fields by name, in declaration order."""
    return {n: instance.__dict__[n] for n in type(instance).__aggregate_fields__}


def new_instance(cls: type):
    """An instance of ``cls`` whose fields are still being set (its ``__init__`` runs next)."""
    instance = object.__new__(cls)
    instance.__dict__["_initializing"] = True
    return instance


def rebuild(cls: type, values: Dict[str, Any]):
    """A finished instance of ``cls`` with the given field values (no ``__init__``, no checks)."""
    instance = new_instance(cls)
    for name, value in values.items():
        instance.__dict__[name] = value
    instance.__dict__["_initializing"] = False
    return instance


def default_init(instance, args: Sequence, kwargs: Dict[str, Any]) -> None:
    """The constructor of an aggregate without ``__init__``: one parameter per field."""
    cls = type(instance)
    names = cls.__aggregate_fields__
    if len(args) > len(names):
        raise AggregateError(f"{cls.__name__}() takes {len(names)} positional arguments ({', '.join(names)}) "
                             f"but {len(args)} were given")
    kwargs = dict(kwargs)
    for i, name in enumerate(names):
        if i < len(args):
            if name in kwargs:
                raise AggregateError(f"{cls.__name__}() got multiple values for argument '{name}'")
            value = args[i]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif name in cls.__aggregate_defaults__:
            value = cls.__aggregate_defaults__[name]
        else:
            raise AggregateError(f"{cls.__name__}() missing required argument '{name}'")
        setattr(instance, name, value)
    if kwargs:
        raise AggregateError(f"{cls.__name__}() got an unexpected keyword argument '{next(iter(kwargs))}'")


def finish_init(instance) -> None:
    """Check that the constructor set every field with a value of its declared kind, then freeze."""
    cls = type(instance)
    for name in cls.__aggregate_fields__:
        if name not in instance.__dict__:
            raise AggregateError(f"the constructor of {cls.__name__} did not set the field '{name}'")
        problem = _kind_problem(cls.__aggregate_annotations__[name], instance.__dict__[name])
        if problem:
            raise AggregateError(f"field '{name}' of {cls.__name__} {problem}")
    instance.__dict__["_initializing"] = False


def _kind_problem(annotation, value) -> Optional[str]:
    """Why ``value`` cannot be stored in a field annotated ``annotation`` (None if it can)."""
    if is_constexpr_annotation(annotation):
        if _has_tensor(value):
            return f"is annotated gl.constexpr but got a runtime value {value!r}"
        return None
    if annotation is tensor:
        if not isinstance(value, tensor):
            return (f"is annotated gl.tensor but got the compile-time value {value!r}; pass a tensor "
                    "(e.g. gl.to_tensor(value)) or annotate the field gl.constexpr")
        return None
    checked = isinstance(annotation, type) and (is_aggregate_class(annotation)
                                                or annotation.__module__.startswith("gluonkit."))
    if checked and not isinstance(value, annotation):
        return f"is annotated {annotation.__name__} but got {value!r}"
    return None


def _has_tensor(value) -> bool:
    if isinstance(value, tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_has_tensor(v) for v in value)
    if is_aggregate(value):
        return any(_has_tensor(v) for v in fields_of(value).values())
    return False


def aggregate_replace(instance, **changes):
    """A copy of the aggregate ``instance`` with the fields in ``changes`` replaced (like
    ``dataclasses.replace``); usable in kernels and on the host."""
    if not is_aggregate(instance):
        raise AggregateError(f"aggregate_replace expects an aggregate instance, got {instance!r}")
    cls = type(instance)
    for name in changes:
        if name not in cls.__aggregate_fields__:
            raise AggregateError(f"{cls.__name__} has no field '{name}'")
    copy = new_instance(cls)
    for name, value in {**fields_of(instance), **changes}.items():
        setattr(copy, name, value)
    finish_init(copy)
    return copy


def construct(cls: type, args: Sequence, kwargs: Dict[str, Any], call_jit: Callable) -> Any:
    """Build an instance of ``cls`` in a kernel; ``call_jit(fn, args, kwargs)`` inlines a
    ``@jit`` ``__init__`` (the instance is its first argument)."""
    instance = new_instance(cls)
    init = cls.__aggregate_init__
    if init is None:
        default_init(instance, args, kwargs)
    elif is_jit_function(init):
        result = call_jit(init, [instance, *args], kwargs)
        if result is not None:
            raise AggregateError(f"{cls.__name__}.__init__ must not return a value (got {result!r})")
    else:
        inspect.signature(init).bind(instance, *args, **kwargs)  # a TypeError names the mismatch
        init(instance, *(unwrap(a) for a in args), **{k: unwrap(v) for k, v in kwargs.items()})
    finish_init(instance)
    return instance
