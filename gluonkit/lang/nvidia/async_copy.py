"""Ampere's asynchronous copies (``cp.async``): Gluon 3.9's ``nvidia.ampere.async_copy`` module.

* ``async_load(smem, pointer, mask=None, cache_modifier=None, eviction_policy=None,
  volatile=False, cache_policy=None)``: every thread starts copying its elements of the
  pointer tensor (which has ``smem``'s shape) into ``smem``; masked-off elements are written
  as zeros.  The copies join the thread's open group.
* ``commit_group()`` closes the open group; ``wait_group(num_outstanding=0)`` waits until at
  most ``num_outstanding`` committed groups are still in flight, after which their bytes may
  be read (the compiler places the ``bar.sync`` that makes other threads' copies visible).
* ``mbarrier_arrive(mbarrier, increment_count=True)``: every thread arrives on the mbarrier
  once all its earlier copies have landed.  With ``increment_count`` the arrival is
  pre-counted, so the phase's expected count is unchanged and the phase just cannot complete
  before the copies; without it each thread's arrival counts (init the barrier with
  ``count`` = the number of threads).

``async_copy_global_to_shared`` is Gluon 3.9's removed name: calling it says to use
``async_load``.  ``cache_policy`` (Gluon's ``CachePolicy``) is not supported yet.
"""

from __future__ import annotations

from ...ir.types import SharedMemoryDescType
from ...ir.verify_async_copy import ASYNC_COPY_CACHE_MODIFIERS, ASYNC_COPY_EVICTION_POLICIES
from ...sync.builtin import barrier_type
from ..constexpr import unwrap
from ..errors import ArgumentError, ShapeMismatchError, TypeMismatchError
from ..tensor import builtin
from ..unsupported import refuse_parameter, removed

__all__ = ["async_copy_global_to_shared", "async_load", "mbarrier_arrive", "commit_group", "wait_group"]


def _cache_modifier(sem, value) -> str:
    value = unwrap(value) or ""
    value = value if value == "" or value.startswith(".") else "." + value
    if value not in ASYNC_COPY_CACHE_MODIFIERS:
        sem.error(f"async_load's cache_modifier must be 'ca' or 'cg' (cp.async has no other), got {value!r}",
                  ArgumentError)
    return value


@builtin
def async_load(smem, pointer, mask=None, cache_modifier=None, eviction_policy=None, volatile=False,
               cache_policy=None, _semantic=None):
    """Start copying ``*pointer`` into ``smem`` (element for element; masked-off elements become 0)."""
    sem = _semantic
    if unwrap(cache_policy) is not None:
        refuse_parameter(sem, "async_load", "cache_policy", "cache_policy", "pass cache_modifier / eviction_policy "
                         "instead")
    handle = getattr(smem, "handle", None)
    if handle is None or not isinstance(handle.type, SharedMemoryDescType):
        sem.error(f"async_load's smem must be a shared memory descriptor, got {smem!r}", TypeMismatchError)
    ptr = sem.require_pointer(pointer, "async_load")
    mask = sem.require_mask(unwrap(mask), "async_load")
    if mask is not None:
        ptr, mask = sem.broadcast_all([ptr, mask])
    view: SharedMemoryDescType = handle.type
    if not ptr.is_block() or tuple(ptr.shape) != tuple(view.shape):
        sem.error(f"async_load: the pointer shape {list(ptr.shape)} must match the shared view's shape "
                  f"{list(view.shape)}", ShapeMismatchError)
    if ptr.dtype.element != view.element:
        sem.error(f"async_load: the pointers point to {ptr.dtype.element} but the shared view holds {view.element}",
                  TypeMismatchError)
    eviction = unwrap(eviction_policy) or ""
    if eviction not in ASYNC_COPY_EVICTION_POLICIES:
        sem.error(f"async_load's eviction_policy must be one of {ASYNC_COPY_EVICTION_POLICIES[1:]}, got {eviction!r}",
                  ArgumentError)
    attrs = {"cache_modifier": _cache_modifier(sem, cache_modifier), "eviction_policy": eviction,
             "volatile": bool(unwrap(volatile)), "has_mask": mask is not None}
    sem.create("async_copy_global_to_shared", [handle, ptr] + ([mask] if mask is not None else []), [], attrs)


async_copy_global_to_shared = removed("async_copy_global_to_shared", "async_load")  # Gluon 3.9's rename


@builtin
def commit_group(_semantic=None):
    """Close the open group of this thread's ``async_load`` copies."""
    _semantic.create("async_commit_group", [], [])


@builtin
def wait_group(num_outstanding=0, _semantic=None):
    """Wait until at most ``num_outstanding`` (a compile-time int) committed groups are in flight."""
    n = _semantic.require_int(num_outstanding, "wait_group's num_outstanding")
    if n < 0:
        _semantic.error(f"wait_group's num_outstanding must be non-negative, got {n}", ArgumentError)
    _semantic.create("async_wait_group", [], [], {"num_outstanding": n})


@builtin
def mbarrier_arrive(mbarrier, increment_count=True, _semantic=None):
    """Every thread arrives on ``mbarrier`` once its earlier copies have landed (see the module docstring)."""
    bar = barrier_type(_semantic, mbarrier, "async_copy.mbarrier_arrive's mbarrier")
    increment = unwrap(increment_count)
    if not isinstance(increment, bool):
        _semantic.error(f"mbarrier_arrive's increment_count must be a compile-time bool, got {increment!r}",
                        ArgumentError)
    _semantic.create("async_copy_mbarrier_arrive", [bar], [], {"increment_count": increment})
