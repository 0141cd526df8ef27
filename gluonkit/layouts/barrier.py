"""The shared layout of mbarriers.

An mbarrier is one 8-byte word of shared memory.  Gluon allocates ``n`` of them as
``allocate_shared_memory(int64, [n, 1], MBarrierLayout())``: the layout has rank 1 and
places one barrier per tile, so the leading dimension is a stage dimension and
``bars.index(i)`` is barrier ``i`` (a view of shape ``[1]``).  It is the plain
(unswizzled) rank-1 layout, kept as its own class so types and errors say "mbarrier".
"""

from __future__ import annotations

from .shared import SwizzledSharedLayout

__all__ = ["MBarrierLayout"]


class MBarrierLayout(SwizzledSharedLayout):
    """The layout of mbarrier allocations (Gluon's ``mbarrier.MBarrierLayout``).

    Gluon's ``cga_layout`` spreads barriers over the CTAs of a cluster (one each); gluonkit
    gives each CTA its own barrier without it (``allocate_mbarrier``, ``docs/clusters.rst``),
    so it must be empty.
    """

    def __init__(self, cga_layout=None):
        if cga_layout:
            raise ValueError(f"MBarrierLayout: cga_layout {[list(b) for b in cga_layout]} spreads barriers over "
                             "a CTA cluster, which gluonkit does not support; use MBarrierLayout() or "
                             "mbarrier.allocate_mbarrier(), which give every CTA of a cluster its own barrier")
        super().__init__(vec=1, per_phase=1, max_phase=1, order=[0])

    @staticmethod
    def multicta(num_ctas: int, two_cta: bool = False) -> "MBarrierLayout":
        """Gluon's layout of barriers for ``num_ctas`` CTAs (every other one with ``two_cta``):
        ``MBarrierLayout()`` for one CTA; more are refused (see :meth:`__init__`)."""
        if not isinstance(num_ctas, int) or num_ctas < 1 or num_ctas & (num_ctas - 1):
            raise ValueError(f"MBarrierLayout.multicta: num_ctas must be a positive power of two, got {num_ctas!r}")
        if num_ctas != 1 or two_cta:
            raise ValueError(f"MBarrierLayout.multicta(num_ctas={num_ctas}, two_cta={two_cta}) spreads barriers "
                             "over a CTA cluster, which gluonkit does not support; use mbarrier.allocate_mbarrier(), "
                             "which gives every CTA of a cluster its own barrier")
        return MBarrierLayout()

    def __repr__(self) -> str:
        return "MBarrierLayout()"
