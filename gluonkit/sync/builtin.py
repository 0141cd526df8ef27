"""The calling convention of kernel builtins, and the operand checks of the synchronization ones.

Kernel builtins are functions marked ``__gluonkit_builtin__``: the frontend calls them
with its semantic layer as ``_semantic``.  :func:`builtin` is defined here, below ``lang/``,
because ``sync/`` may not import ``lang/``; ``lang`` uses the same decorator.  The sync
builtins use only the semantic layer's public methods (``create``, ``error``,
``to_tensor``, ``to_bool``, ``cast``, ``require_int``).
"""

from __future__ import annotations

import functools

from ..ir.types import SharedMemoryDescType, int64
from ..layouts.barrier import MBarrierLayout

__all__ = ["builtin", "barrier_type", "predicate", "descriptor_handle"]


def builtin(fn):
    """Mark ``fn`` as a kernel builtin: callable only from kernel code, with ``_semantic``."""

    @functools.wraps(fn)
    def wrapper(*args, _semantic=None, **kwargs):
        if _semantic is None:
            raise RuntimeError(
                f"{fn.__qualname__} can only be used inside a @gluonkit.jit function "
                "(it builds kernel IR; there is no Python-level implementation)")
        return fn(*args, _semantic=_semantic, **kwargs)

    wrapper.__gluonkit_builtin__ = True
    return wrapper


def descriptor_handle(sem, desc, what: str):
    """The IR value of a shared memory descriptor (an error naming ``what`` otherwise)."""
    handle = getattr(desc, "handle", None)
    if handle is None or not isinstance(handle.type, SharedMemoryDescType):
        sem.error(f"{what} must be a shared memory descriptor, got {desc!r}")
    return handle


def barrier_type(sem, bar, what: str = "the barrier"):
    """The IR value of ``bar``, which must be one mbarrier (a ``[1]`` int64 MBarrierLayout view)."""
    handle = descriptor_handle(sem, bar, what)
    ty = handle.type
    if not isinstance(ty.layout, MBarrierLayout) or ty.element != int64:
        sem.error(f"{what} must be allocated as gl.allocate_shared_memory(gl.int64, [n, 1], "
                  f"mbarrier.MBarrierLayout()), got {ty}")
    if ty.shape != (1,):
        sem.error(f"{what} must be one mbarrier of shape [1]; pick one with bars.index(i), got shape {list(ty.shape)}")
    return handle


def predicate(sem, pred):
    """``pred`` as a runtime int1 scalar, or ``None`` when it is the compile-time ``False``."""
    if pred is False:
        return None
    value = sem.to_bool(sem.to_tensor(pred), "the predicate")
    if value.is_block():
        sem.error(f"the predicate must be a scalar, got a tensor of shape {list(value.shape)}")
    return value
