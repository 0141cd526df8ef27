"""Lowering of ``cluster_barrier``: ``barrier.cluster.arrive[.relaxed].aligned`` then ``barrier.cluster.wait.aligned``.

Every thread executes both (they are ``.aligned``: all threads of a warp together), so the
op sits where the whole CTA runs, as ``thread_barrier`` does.  The same pair ends every
kernel launched with ``num_ctas > 1`` (``ops/control.py``).
"""

from __future__ import annotations

from ...ir import Operation
from ..context import KernelLowering
from ..inline_ptx import cluster_barrier_text, emit_ptx
from ..registry import lowering

__all__ = []


@lowering("cluster_barrier")
def _cluster_barrier(ctx: KernelLowering, op: Operation) -> None:
    emit_ptx(ctx.builder, cluster_barrier_text(op.attrs["relaxed"]))
