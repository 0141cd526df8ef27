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
    so Gluon's per-CTA bases (``[[1], [2], …]``, ``multicta(n)``) equal ``MBarrierLayout()``.
    A first basis ``[0]`` (``multicta(n, two_cta=True)``) makes a *pair* barrier: one barrier
    per CTA pair, living in the even CTA, that both CTAs arrive on and only the even CTA
    waits on (``two_ctas``; ``docs/blackwell_2cta.rst``).
    """

    def __init__(self, cga_layout=None):
        bases = [list(b) for b in (cga_layout or [])]
        two_ctas = bool(bases) and bases[0] == [0]
        per_cta = bases[1:] if two_ctas else bases
        if per_cta != [[1 << i] for i in range(len(per_cta))]:
            raise ValueError(f"MBarrierLayout: cga_layout {bases} is not one of MBarrierLayout.multicta's layouts "
                             "([[1], [2], …]: a barrier in every CTA; [[0], [1], …]: one per CTA pair); use "
                             "mbarrier.allocate_mbarrier(two_ctas=…)")
        super().__init__(vec=1, per_phase=1, max_phase=1, order=[0])
        self.two_ctas = two_ctas

    @staticmethod
    def multicta(num_ctas: int, two_cta: bool = False) -> "MBarrierLayout":
        """Gluon's layout of barriers for ``num_ctas`` CTAs: one in every CTA, or with
        ``two_cta`` one per CTA pair (see the class docstring)."""
        if not isinstance(num_ctas, int) or num_ctas < 1 or num_ctas & (num_ctas - 1):
            raise ValueError(f"MBarrierLayout.multicta: num_ctas must be a positive power of two, got {num_ctas!r}")
        if two_cta and num_ctas < 2:
            raise ValueError("MBarrierLayout.multicta: two_cta needs num_ctas >= 2 (a CTA pair)")
        bits = (num_ctas.bit_length() - 1) - int(bool(two_cta))
        return MBarrierLayout(([[0]] if two_cta else []) + [[1 << i] for i in range(bits)])

    def _key(self) -> tuple:
        return super()._key() + (self.two_ctas,)

    def __repr__(self) -> str:
        return "MBarrierLayout(cga_layout=[[0]])" if self.two_ctas else "MBarrierLayout()"
