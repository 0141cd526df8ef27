"""Gluon's ``cluster`` namespace (``hopper.cluster.barrier``): CTA-cluster synchronization.

gluonkit launches one CTA per cluster and has no cluster operations yet; the names are
stubs (:mod:`gluonkit.lang.unsupported`).
"""

from ..unsupported import CLUSTER, install

__all__ = install(globals(), CLUSTER)
