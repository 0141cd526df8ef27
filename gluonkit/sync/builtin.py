"""The calling convention of synchronization builtins.

Kernel builtins are functions marked ``__gluonkit_builtin__``: the frontend calls them
with its semantic layer as ``_semantic`` (see :func:`gluonkit.lang.tensor.builtin`, the
same protocol).  ``sync/`` may not import ``lang/``, so it marks its functions itself and
uses only the semantic layer's public methods (``create``, ``error``, ``to_tensor``,
``to_bool``, ``cast``, ``require_int``).
"""

from __future__ import annotations

import functools

__all__ = ["builtin", "barrier_type", "predicate", "descriptor_handle"]


def builtin(fn):
    """Mark ``fn`` as a kernel builtin that needs ``_semantic``."""

    @functools.wraps(fn)
    def wrapper(*args, _semantic=None, **kwargs):
        if _semantic is None:
            raise RuntimeError(f"{fn.__module__}.{fn.__qualname__} can only be used inside a @gluonkit.jit function")
        return fn(*args, _semantic=_semantic, **kwargs)

    wrapper.__gluonkit_builtin__ = True
    return wrapper


def descriptor_handle(sem, desc, what: str):
    """The IR value of a shared memory descriptor (an error naming ``what`` otherwise)."""
    from ..ir.types import SharedMemoryDescType

    handle = getattr(desc, "handle", None)
    if handle is None or not isinstance(handle.type, SharedMemoryDescType):
        sem.error(f"{what} must be a shared memory descriptor, got {desc!r}")
    return handle


def barrier_type(sem, bar, what: str = "the barrier"):
    """The IR value of ``bar``, which must be one mbarrier (a ``[1]`` int64 MBarrierLayout view)."""
    from ..ir.types import int64
    from ..layouts.barrier import MBarrierLayout

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
