"""Verifier rules of the cp.async ops (Ampere's ``async_copy``): copy, commit, wait, mbarrier arrive.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  A copy moves one element per pointer: the pointer tensor has the shared view's
shape and points to its element type; the mask, when present, is an int1 tensor of the same
shape and layout.
"""

from __future__ import annotations

from .core import Operation
from .types import PointerType, SharedMemoryDescType, TensorType, element_type, int1
from .verifier import rule
from .verify_checks import fail, one_mbarrier, same_shape_and_layout

__all__ = ["ASYNC_COPY_CACHE_MODIFIERS", "ASYNC_COPY_EVICTION_POLICIES"]

ASYNC_COPY_CACHE_MODIFIERS = ("", ".ca", ".cg")
ASYNC_COPY_EVICTION_POLICIES = ("", "evict_normal", "evict_first", "evict_last")


def _no_results(op: Operation) -> None:
    if op.results or op.regions:
        fail(op, "has no results and no regions")


@rule("async_copy_global_to_shared")
def _copy(op):
    _no_results(op)
    n = 2 + bool(op.attrs.get("has_mask"))
    if len(op.operands) != n:
        fail(op, f"expects {n} operands, got {len(op.operands)}")
    smem, ptr = op.operands[0].type, op.operands[1].type
    if not isinstance(smem, SharedMemoryDescType):
        fail(op, f"the destination must be a shared memory descriptor, got {smem}")
    if not isinstance(ptr, TensorType) or not isinstance(ptr.element, PointerType):
        fail(op, f"the source must be a tensor of pointers, got {ptr}")
    if ptr.shape != smem.shape or ptr.element.element != smem.element:
        fail(op, f"the pointers {ptr} must match the shared view {smem} in shape and element type")
    same_shape_and_layout(op, op.operands[1:], "pointer and mask")
    if op.attrs.get("has_mask") and element_type(op.operands[2].type) != int1:
        fail(op, f"the mask must be int1, got {element_type(op.operands[2].type)}")
    if op.attrs.get("cache_modifier") not in ASYNC_COPY_CACHE_MODIFIERS:
        fail(op, f"cache_modifier must be one of {ASYNC_COPY_CACHE_MODIFIERS}, got {op.attrs.get('cache_modifier')!r}")
    if op.attrs.get("eviction_policy") not in ASYNC_COPY_EVICTION_POLICIES:
        fail(op, f"eviction_policy must be one of {ASYNC_COPY_EVICTION_POLICIES}, "
                 f"got {op.attrs.get('eviction_policy')!r}")


@rule("async_commit_group")
def _commit(op):
    _no_results(op)
    if op.operands:
        fail(op, "takes no operands")


@rule("async_wait_group")
def _wait(op):
    _no_results(op)
    n = op.attrs.get("num_outstanding")
    if op.operands or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        fail(op, f"takes no operands and a non-negative num_outstanding, got {n!r}")


@rule("async_copy_mbarrier_arrive")
def _arrive(op):
    _no_results(op)
    if len(op.operands) != 1:
        fail(op, f"expects the mbarrier only, got {len(op.operands)} operands")
    one_mbarrier(op, op.operands[0])
    if not isinstance(op.attrs.get("increment_count"), bool):
        fail(op, "increment_count must be a bool")
