"""Gluon's ``mbarrier`` namespace: :mod:`gluonkit.sync.mbarrier`'s ops plus ``allocate_mbarrier``.

``allocate_mbarrier`` needs :func:`~gluonkit.lang.shared_memory.allocate_shared_memory`,
which ``sync/`` may not import, so the namespace users import lives here.
"""

from __future__ import annotations

from ...ir.types import int64
from ...sync.mbarrier import *  # noqa: F401,F403
from ...sync.mbarrier import MBarrierLayout, __all__ as _sync_names
from ..errors import ArgumentError
from ..shared_memory import allocate_shared_memory
from ..tensor import builtin
from ..unsupported import UnsupportedFeatureError

__all__ = list(_sync_names) + ["allocate_mbarrier"]


@builtin
def allocate_mbarrier(batch=None, two_ctas=False, _semantic=None):
    """A new mbarrier (shape ``[1]``), or ``batch`` of them (shape ``[batch, 1]``: ``bars.index(i)``).

    Gluon allocates one barrier per CTA of the cluster (every other CTA with ``two_ctas``);
    gluonkit launches one CTA per cluster, so that is one.  Initialize it with
    ``mbarrier.init`` before use.
    """
    sem = _semantic
    if sem.require_constexpr(two_ctas, "allocate_mbarrier's two_ctas"):
        sem.error("allocate_mbarrier(two_ctas=True) shares barriers between the two CTAs of a cluster, which "
                  "gluonkit does not launch yet", UnsupportedFeatureError)
    shape = [1]
    if batch is not None:
        batch = sem.require_int(batch, "allocate_mbarrier's batch")
        if batch < 1:
            sem.error(f"allocate_mbarrier's batch must be a positive int, got {batch}", ArgumentError)
        shape = [batch, 1]
    return allocate_shared_memory(int64, shape, MBarrierLayout(), _semantic=sem)
