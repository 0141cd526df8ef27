"""Gluon's ``cluster`` namespace (``hopper.cluster.barrier``): CTA-cluster synchronization.

``barrier(relaxed=False)`` is :func:`gluonkit.sync.cluster_barrier` (``docs/clusters.rst``).
"""

from ...sync.fence import cluster_barrier
from ..tensor import builtin
from ..unsupported import CLUSTER, install


@builtin
def barrier(relaxed=False, _semantic=None):
    """A barrier over the CTA cluster: every thread of every CTA arrives, then waits for the
    others (``barrier.cluster.arrive[.relaxed]`` + ``barrier.cluster.wait``).  Without
    ``relaxed`` the arrival releases and the wait acquires memory at cluster scope."""
    cluster_barrier(relaxed, _semantic=_semantic)


__all__ = ["barrier"] + install(globals(), CLUSTER)
