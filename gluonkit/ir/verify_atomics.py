"""Verifier rules of the atomics (``atomic_rmw``, ``atomic_cas``, ``atomic_load``, ``atomic_store``).

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  Atomics are element-wise over a pointer tensor: pointer, value(s) and mask share
one shape and layout, the value type is the pointee type, and the element types are those
PTX ``atom`` supports for the operation (32- and 64-bit integers and floats; 16-bit floats
for ``add`` only; bitwise operations on integers only).  Atomic loads and stores take any
integer or float element (``int1`` as a byte) and the orderings a plain load or store can
have (``acquire``/``release`` or ``relaxed``).
"""

from __future__ import annotations

from .core import Operation
from .ops import ATOMIC_FNS, MEMORY_SCOPES, MEMORY_SEMANTICS
from .types import DType, PointerType, element_type, int1
from .verifier import rule
from .verify_checks import fail, same_shape_and_layout

__all__ = ["atomic_element_error", "LOAD_SEMANTICS", "STORE_SEMANTICS"]

LOAD_SEMANTICS = ("acquire", "relaxed")
STORE_SEMANTICS = ("release", "relaxed")


def atomic_element_error(fn: str, dtype) -> str:
    """Why ``atomic_{fn}`` cannot operate on ``dtype`` elements (empty when it can)."""
    if not isinstance(dtype, DType) or dtype == int1:
        return f"atomic_{fn} does not support {dtype} elements"
    bits = dtype.primitive_bitwidth
    if dtype.is_floating():
        if fn in ("and", "or", "xor"):
            return f"atomic_{fn} is bitwise and needs integer elements, got {dtype}"
        if bits == 16 and fn != "add":
            return f"atomic_{fn} does not support {dtype} (16-bit floats support atomic_add only)"
        if bits < 16 or dtype.name.startswith("float8"):
            return f"atomic_{fn} does not support {dtype}"
        return ""
    if bits not in (32, 64):
        return f"atomic_{fn} supports 32- and 64-bit integers, not {dtype}"
    return ""


def _sem_scope(op: Operation) -> None:
    if op.attrs.get("sem") not in MEMORY_SEMANTICS:
        fail(op, f"sem must be one of {MEMORY_SEMANTICS}, got {op.attrs.get('sem')!r}")
    if op.attrs.get("scope") not in MEMORY_SCOPES:
        fail(op, f"scope must be one of {MEMORY_SCOPES}, got {op.attrs.get('scope')!r}")


def _pointer_and_values(op: Operation, values, n_results: int = 1) -> DType:
    if len(op.results) != n_results or op.regions:
        fail(op, f"has {n_results} result(s) and no regions")
    same_shape_and_layout(op, list(op.operands) + op.results, "pointer, values, mask and result")
    ptr = element_type(op.operands[0].type)
    if not isinstance(ptr, PointerType):
        fail(op, f"first operand must be a pointer, got {ptr}")
    for v in list(values) + op.results:
        if element_type(v.type) != ptr.element:
            fail(op, f"values and result must have the pointee type {ptr.element}, got {element_type(v.type)}")
    return ptr.element


@rule("atomic_rmw")
def _atomic_rmw(op):
    n = 2 + bool(op.attrs.get("has_mask"))
    if len(op.operands) != n:
        fail(op, f"expects {n} operands, got {len(op.operands)}")
    if op.attrs.get("fn") not in ATOMIC_FNS:
        fail(op, f"fn must be one of {ATOMIC_FNS}, got {op.attrs.get('fn')!r}")
    _sem_scope(op)
    elem = _pointer_and_values(op, op.operands[1:2])
    if op.attrs.get("has_mask") and element_type(op.operands[2].type) != int1:
        fail(op, f"the mask must be int1, got {element_type(op.operands[2].type)}")
    problem = atomic_element_error(op.attrs["fn"], elem)
    if problem:
        fail(op, problem)


@rule("atomic_cas")
def _atomic_cas(op):
    if len(op.operands) != 3:
        fail(op, f"expects 3 operands, got {len(op.operands)}")
    _sem_scope(op)
    elem = _pointer_and_values(op, op.operands[1:])
    if not isinstance(elem, DType) or elem.primitive_bitwidth not in (16, 32, 64) or elem == int1:
        fail(op, f"atomic_cas supports 16-, 32- and 64-bit elements, got {elem}")


def _load_store(op: Operation, n_values: int, orderings) -> None:
    n = 1 + n_values + bool(op.attrs.get("has_mask"))
    if len(op.operands) != n:
        fail(op, f"expects {n} operands, got {len(op.operands)}")
    _sem_scope(op)
    if op.attrs["sem"] not in orderings:
        fail(op, f"sem must be one of {orderings}, got {op.attrs['sem']!r}")
    elem = _pointer_and_values(op, op.operands[1:1 + n_values], 1 - n_values)
    if not isinstance(elem, DType) or elem.primitive_bitwidth not in (1, 8, 16, 32, 64):
        fail(op, f"atomic loads and stores need integer or float elements, got {elem}")
    if op.attrs.get("has_mask") and element_type(op.operands[-1].type) != int1:
        fail(op, f"the mask must be int1, got {element_type(op.operands[-1].type)}")


@rule("atomic_load")
def _atomic_load(op):
    _load_store(op, 0, LOAD_SEMANTICS)


@rule("atomic_store")
def _atomic_store(op):
    _load_store(op, 1, STORE_SEMANTICS)
