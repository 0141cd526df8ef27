"""Gluon's Ampere ``async_copy`` namespace (``cp.async`` copies from global to shared memory).

Not built yet: the names are stubs (:mod:`gluonkit.lang.unsupported`); Triton 3.6's
``async_copy_global_to_shared`` is the error naming ``async_load``, as in Gluon 3.9.
"""

from ..unsupported import ASYNC_COPY, install, removed

async_copy_global_to_shared = removed("async_copy_global_to_shared", "async_load")

__all__ = ["async_copy_global_to_shared"] + install(globals(), ASYNC_COPY)
