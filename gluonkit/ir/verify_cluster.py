"""Verifier rules of the cluster ops (``cluster_barrier``).

A cluster barrier (``barrier.cluster``) waits for every thread of every CTA of the cluster.
In a kernel with ``warp_specialize`` the workers' warps are parked while the kernel's warps
run the code outside partitions, and they join each cluster barrier the kernel's warps pass
before the next fork (``lower/ops/warp_specialize.py``).  So a cluster barrier before a
``warp_specialize`` sits at the kernel's top level: the number the workers join is then
fixed by the source (Triton 3.9 counts at run time instead; ``docs/decisions.rst``).  One
inside a partition is refused by the frontend (``sync/fence.py``).
"""

from __future__ import annotations

from .verifier import rule
from .verify_checks import count_parts, fail

__all__ = []


@rule("cluster_barrier")
def _cluster_barrier(op):
    count_parts(op, 0, 0)
    if not isinstance(op.attrs.get("relaxed"), bool):
        fail(op, f"relaxed must be a bool, got {op.attrs.get('relaxed')!r}")
    top = op
    while top.parent is not None and top.parent.parent_op is not None:
        top = top.parent.parent_op
    if top is not op and top.parent is not None:
        later = top.parent.ops[top.parent.ops.index(top) + 1:]
        if any(o.name == "warp_specialize" for o in later):
            fail(op, "a cluster barrier before a warp_specialize must be at the kernel's top level, not inside a "
                     f"runtime loop or branch (line {top.loc.line}): the worker warps join every cluster barrier "
                     "the kernel's warps pass before the fork, so their number must be fixed by the source; "
                     "move it out of the loop or branch (a gl.static_range loop is fine)")
