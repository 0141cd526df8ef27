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

__all__ = list(_sync_names) + ["allocate_mbarrier"]


@builtin
def allocate_mbarrier(batch=None, two_ctas=False, _semantic=None):
    """A new mbarrier (shape ``[1]``), or ``batch`` of them (shape ``[batch, 1]``: ``bars.index(i)``).

    Gluon's type has one barrier per CTA of the cluster (``[num_ctas]``, split by its
    ``MBarrierLayout.multicta`` layout); each CTA holds one of them, its own, which is what
    gluonkit allocates in every CTA: the shape is ``[1]`` whatever ``num_ctas`` is
    (``docs/clusters.rst``).  ``two_ctas=True``: one barrier per CTA pair, in the even CTA,
    that both CTAs' arrivals and TMA loads complete and only the even CTA waits on (what the
    loads feeding a ``cta_group::2`` MMA need; ``docs/blackwell_2cta.rst``).  Initialize it
    with ``mbarrier.init`` before use.
    """
    sem = _semantic
    pair = bool(sem.require_constexpr(two_ctas, "allocate_mbarrier's two_ctas"))
    if pair and sem.num_ctas % 2:
        sem.error(f"allocate_mbarrier(two_ctas=True) shares a barrier between the two CTAs of a pair, but the "
                  f"kernel runs {sem.num_ctas} CTA per cluster; launch it with num_ctas=2 (or 4, 8)", ArgumentError)
    shape = [1]
    if batch is not None:
        batch = sem.require_int(batch, "allocate_mbarrier's batch")
        if batch < 1:
            sem.error(f"allocate_mbarrier's batch must be a positive int, got {batch}", ArgumentError)
        shape = [batch, 1]
    return allocate_shared_memory(int64, shape, MBarrierLayout.multicta(2, True) if pair else MBarrierLayout(),
                                  _semantic=sem)
