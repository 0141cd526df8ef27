"""Fences and the program-wide barrier.

``fence_async_shared()`` makes the program's earlier generic-proxy writes to shared memory
(``store``) visible to later async-proxy readers (TMA stores, wgmma, tcgen05), as
``fence.proxy.async.shared::cta`` does; ``thread_barrier()`` (Gluon 3.9: ``gl.barrier()``)
is ``bar.sync 0``: no thread continues until every thread of the program has reached it.
"""

from __future__ import annotations

from ..ir.diagnostics import UnsupportedFeatureError
from .builtin import builtin

__all__ = ["fence_async_shared", "thread_barrier", "barrier"]


@builtin
def fence_async_shared(cluster=False, _semantic=None) -> None:
    """Order earlier shared-memory writes before later async-proxy accesses (CTA scope)."""
    if cluster:
        _semantic.error("fence_async_shared(cluster=True) needs CTA clusters, which gluonkit does not launch yet",
                        UnsupportedFeatureError)
    _semantic.create("fence_async_shared", [], [])


@builtin
def thread_barrier(_semantic=None) -> None:
    """Every thread of the program reaches this point before any continues."""
    _semantic.create("thread_barrier", [], [])


@builtin
def barrier(*, cluster=False, _semantic=None) -> None:
    """Gluon 3.9's name for :func:`thread_barrier` (``cluster=True`` would synchronize a CTA cluster)."""
    if cluster:
        _semantic.error("gl.barrier(cluster=True) needs CTA clusters, which gluonkit does not launch yet",
                        UnsupportedFeatureError)
    _semantic.create("thread_barrier", [], [])
