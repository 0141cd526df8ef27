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

    Gluon's type has one barrier per CTA of the cluster (``[num_ctas]``, split by its
    ``MBarrierLayout.multicta`` layout); each CTA holds one of them, its own, which is what
    gluonkit allocates in every CTA: the shape is ``[1]`` whatever ``num_ctas`` is
    (``docs/clusters.rst``).  ``two_ctas`` (one barrier per CTA pair, for ``cta_group::2``
    MMAs) is not supported yet.  Initialize it with ``mbarrier.init`` before use.
    """
    sem = _semantic
    if sem.require_constexpr(two_ctas, "allocate_mbarrier's two_ctas"):
        sem.error("allocate_mbarrier(two_ctas=True) shares one barrier between the two CTAs of a pair "
                  "(for cta_group::2 MMAs), which gluonkit does not support yet; leave two_ctas=False",
                  UnsupportedFeatureError)
    shape = [1]
    if batch is not None:
        batch = sem.require_int(batch, "allocate_mbarrier's batch")
        if batch < 1:
            sem.error(f"allocate_mbarrier's batch must be a positive int, got {batch}", ArgumentError)
        shape = [batch, 1]
    return allocate_shared_memory(int64, shape, MBarrierLayout(), _semantic=sem)
