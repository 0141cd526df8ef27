"""Fences and the program-wide barrier.

``fence_async_shared()`` makes the program's earlier generic-proxy writes to shared memory
(``store``) visible to later async-proxy readers (TMA stores, wgmma, tcgen05), as
``fence.proxy.async.shared::cta`` does; ``thread_barrier()`` (Gluon 3.9: ``gl.barrier()``)
is ``bar.sync 0``: no thread continues until every thread of the program has reached it;
``cluster_barrier()`` (Gluon: ``cluster.barrier()``, ``gl.barrier(cluster=True)``) waits for
every thread of the CTA cluster.
"""

from __future__ import annotations

from .builtin import builtin

__all__ = ["fence_async_shared", "thread_barrier", "barrier", "cluster_barrier"]


@builtin
def fence_async_shared(cluster=False, _semantic=None) -> None:
    """Order earlier shared-memory writes before later async-proxy accesses (CTA scope; with
    ``cluster=True`` the cluster's shared memory, ``fence.proxy.async.shared::cluster``)."""
    if _semantic.require_constexpr(cluster, "fence_async_shared's cluster"):
        _semantic.create("fence_async_shared", [], [], {"cluster": True})
    else:
        _semantic.create("fence_async_shared", [], [])


@builtin
def thread_barrier(_semantic=None) -> None:
    """Every thread of the program reaches this point before any continues."""
    _semantic.create("thread_barrier", [], [])


@builtin
def barrier(*, cluster=False, _semantic=None) -> None:
    """Gluon 3.9's name for :func:`thread_barrier`; with ``cluster=True`` in a kernel launched
    with ``num_ctas > 1``, a barrier over the whole CTA cluster (:func:`cluster_barrier`)."""
    if _semantic.require_constexpr(cluster, "barrier's cluster") and _semantic.num_ctas > 1:
        cluster_barrier(_semantic=_semantic)
    else:
        _semantic.create("thread_barrier", [], [])


@builtin
def cluster_barrier(relaxed=False, _semantic=None) -> None:
    """Every thread of every CTA of the cluster reaches this point before any continues.

    The arrival releases and the wait acquires memory at cluster scope, so writes before
    it (to global or shared memory of any CTA) are visible after it; ``relaxed=True`` only
    synchronizes (``barrier.cluster.arrive.relaxed``).  Gluon's ``cluster.barrier``."""
    if _semantic.partition_warps is not None:  # its .aligned arrive/wait wait for every thread of the cluster
        _semantic.error("a cluster barrier inside a warp_specialize partition would wait for the warps of the other "
                        "partitions, which never reach it; synchronize the cluster outside warp_specialize")
    relaxed = _semantic.require_constexpr(relaxed, "cluster barrier's relaxed")
    if not isinstance(relaxed, bool):
        _semantic.error(f"cluster barrier's relaxed must be a bool, got {relaxed!r}")
    _semantic.create("cluster_barrier", [], [], {"relaxed": relaxed})
