"""Global-memory atomics: ``gl.atomic_add`` … ``gl.atomic_xchg``, ``gl.atomic_cas``,
``gl.atomic_load`` and ``gl.atomic_store``.

Gluon 3.9 takes these from Triton with the same parameters: ``(pointer, val, mask=None,
sem=None, scope=None)`` (``atomic_cas(pointer, cmp, val, sem=None, scope=None)`` has no
mask).  ``sem`` defaults to ``"acq_rel"`` and may be ``"relaxed"``, ``"acquire"``,
``"release"`` or ``"acq_rel"``; ``scope`` defaults to ``"gpu"`` and may be ``"cta"`` or
``"sys"``.  Pointer, value and mask broadcast together (the pointer's shape may not grow);
the value is converted to the pointee type.  Each returns the values memory held before.
Every element is updated exactly once, even where the layout holds it in several threads.
``atomic_load(pointer, mask=None, sem=None, scope=None)`` (``sem`` ``"acquire"`` by default,
or ``"relaxed"``) and ``atomic_store(pointer, val, mask=None, sem=None, scope=None)``
(``"release"`` by default, or ``"relaxed"``) are untorn loads and stores with that ordering.
"""

from __future__ import annotations

from ..ir.ops import MEMORY_SCOPES, MEMORY_SEMANTICS
from ..ir.types import int1
from ..ir.verify_atomics import LOAD_SEMANTICS, STORE_SEMANTICS, atomic_element_error
from .constexpr import unwrap
from .errors import ArgumentError, ShapeMismatchError, TypeMismatchError
from .tensor import builtin, tensor

__all__ = ["atomic_add", "atomic_and", "atomic_or", "atomic_xor", "atomic_max", "atomic_min", "atomic_xchg",
           "atomic_cas", "atomic_load", "atomic_store"]


def _ordering(sem, what: str, order, scope, default: str = "acq_rel", allowed=MEMORY_SEMANTICS):
    order = unwrap(order) or default
    scope = unwrap(scope) or "gpu"
    if order not in allowed:
        sem.error(f"{what}: memory semantic {order!r} is not supported; use one of {allowed}", ArgumentError)
    if scope not in MEMORY_SCOPES:
        sem.error(f"{what}: memory scope {scope!r} is not supported; use one of {MEMORY_SCOPES}", ArgumentError)
    return {"sem": order, "scope": scope}


def _operands(sem, what: str, pointer, values, mask):
    """Pointer, values (converted to the pointee type) and mask, broadcast to one shape."""
    ptr = sem.require_pointer(pointer, what)
    elem = ptr.dtype.element
    values = [sem.cast(sem.to_tensor(v, elem) if not isinstance(v, tensor) else v, elem) for v in values]
    mask = sem.require_mask(unwrap(mask), what)
    parts = [ptr] + values + ([mask] if mask is not None else [])
    if not ptr.is_block():
        for p in parts[1:]:
            if p.is_block():
                sem.error(f"{what}: the pointer is a scalar but an operand is a tensor of shape {list(p.shape)}; "
                          "make the pointer a tensor (e.g. ptr + offsets)", ShapeMismatchError)
        return parts[0], parts[1:1 + len(values)], mask
    parts = sem.broadcast_all(parts)
    if parts[0].shape != ptr.shape:
        sem.error(f"{what}: the operands broadcast to shape {list(parts[0].shape)}, but the pointer has shape "
                  f"{list(ptr.shape)}; an atomic updates each pointed-to element once", ShapeMismatchError)
    return parts[0], parts[1:1 + len(values)], (parts[-1] if mask is not None else None)


def _rmw(sem, fn: str, pointer, val, mask, order, scope) -> tensor:
    what = f"atomic_{fn}"
    attrs = _ordering(sem, what, order, scope)
    ptr, (val,), mask = _operands(sem, what, pointer, [val], mask)
    problem = atomic_element_error(fn, ptr.dtype.element)
    if problem:
        sem.error(problem, TypeMismatchError)
    attrs.update(fn=fn, has_mask=mask is not None)
    operands = [ptr, val] + ([mask] if mask is not None else [])
    return sem.create1("atomic_rmw", operands, val.type, attrs)


def _define(fn: str):
    @builtin
    def atomic(pointer, val, mask=None, sem=None, scope=None, _semantic=None):
        return _rmw(_semantic, fn, pointer, val, mask, sem, scope)

    atomic.__name__ = atomic.__qualname__ = f"atomic_{fn}"
    atomic.__doc__ = (f"Atomically {fn} ``val`` into ``*pointer`` where ``mask`` holds; returns the old values "
                      "(see the module docstring for ``sem`` and ``scope``).")
    return atomic


atomic_add = _define("add")
atomic_and = _define("and")
atomic_or = _define("or")
atomic_xor = _define("xor")
atomic_max = _define("max")
atomic_min = _define("min")
atomic_xchg = _define("xchg")


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None, _semantic=None):
    """Where ``*pointer == cmp``, atomically store ``val``; returns the old values."""
    attrs = _ordering(_semantic, "atomic_cas", sem, scope)
    ptr, (cmp, val), _ = _operands(_semantic, "atomic_cas", pointer, [cmp, val], None)
    elem = ptr.dtype.element
    if elem == int1 or elem.primitive_bitwidth not in (16, 32, 64):
        _semantic.error(f"atomic_cas supports 16-, 32- and 64-bit elements, got {elem}", TypeMismatchError)
    return _semantic.create1("atomic_cas", [ptr, cmp, val], val.type, attrs)


def _load_store_element(sem, what: str, ptr) -> None:
    elem = ptr.dtype.element
    if not (elem.is_int() or elem.is_floating() or elem.is_bool()):
        sem.error(f"{what} needs integer or float elements, got {elem}", TypeMismatchError)


@builtin
def atomic_load(pointer, mask=None, sem=None, scope=None, _semantic=None):
    """Untorn load of ``*pointer`` where ``mask`` holds (``sem`` ``"acquire"`` or ``"relaxed"``)."""
    attrs = _ordering(_semantic, "atomic_load", sem, scope, "acquire", LOAD_SEMANTICS)
    ptr, _, mask = _operands(_semantic, "atomic_load", pointer, [], mask)
    _load_store_element(_semantic, "atomic_load", ptr)
    attrs["has_mask"] = mask is not None
    operands = [ptr] + ([mask] if mask is not None else [])
    return _semantic.create1("atomic_load", operands, _semantic.retype(ptr, ptr.dtype.element), attrs)


@builtin
def atomic_store(pointer, val, mask=None, sem=None, scope=None, _semantic=None):
    """Untorn store of ``val`` to ``*pointer`` where ``mask`` holds (``sem`` ``"release"`` or ``"relaxed"``)."""
    attrs = _ordering(_semantic, "atomic_store", sem, scope, "release", STORE_SEMANTICS)
    ptr, (val,), mask = _operands(_semantic, "atomic_store", pointer, [val], mask)
    _load_store_element(_semantic, "atomic_store", ptr)
    attrs["has_mask"] = mask is not None
    _semantic.create("atomic_store", [ptr, val] + ([mask] if mask is not None else []), [], attrs)
