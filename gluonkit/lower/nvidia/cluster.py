"""Lowering of ``cluster_barrier``: ``barrier.cluster.arrive[.relaxed].aligned`` then ``barrier.cluster.wait.aligned``.

Every thread executes both (they are ``.aligned``: all threads of a warp together), so the
op sits where the whole CTA runs, as ``thread_barrier`` does: outside ``warp_specialize``
partitions, where the parked workers' warps join it (``ops/warp_specialize.cluster_barrier``).
The same pair ends every kernel launched with ``num_ctas > 1`` (``ops/control.py``).
"""

from __future__ import annotations

from ...ir import Operation
from ..context import KernelLowering
from ..ops.warp_specialize import cluster_barrier
from ..registry import lowering

__all__ = []


@lowering("cluster_barrier")
def _cluster_barrier(ctx: KernelLowering, op: Operation) -> None:
    cluster_barrier(ctx, op.attrs["relaxed"])
