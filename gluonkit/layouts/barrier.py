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
    """The layout of mbarrier allocations (Gluon's ``mbarrier.MBarrierLayout``)."""

    def __init__(self):
        super().__init__(vec=1, per_phase=1, max_phase=1, order=[0])

    def __repr__(self) -> str:
        return "MBarrierLayout()"
