"""One PTX statement emitted as LLVM inline assembly, for instructions LLVM has no intrinsic for.

The statement returns nothing, has side effects and clobbers memory, so LLVM neither drops
it nor moves loads and stores across it (barriers, fences, asynchronous copies, mbarrier
operations, ``setmaxnreg``).
"""

from __future__ import annotations

from typing import Sequence

import llvmlite.ir as lir

__all__ = ["emit_ptx", "CLUSTER_BARRIER", "cluster_barrier_text"]


def cluster_barrier_text(relaxed: bool = False) -> str:
    """A full barrier over the CTA cluster: every thread of every CTA arrives, then waits.

    Without ``relaxed`` the arrival releases and the wait acquires this thread's memory
    operations at cluster scope; ``.relaxed`` orders nothing (cheaper, for pure rendezvous)."""
    return f"barrier.cluster.arrive{'.relaxed' if relaxed else ''}.aligned;\nbarrier.cluster.wait.aligned;"


#: The ordering cluster barrier (``cluster_barrier_text()``).
CLUSTER_BARRIER = cluster_barrier_text()


def emit_ptx(builder: lir.IRBuilder, text: str, constraints: str = "", operands: Sequence[lir.Value] = ()) -> None:
    """Emit ``text`` with the input ``constraints`` (comma-separated, e.g. ``"r,l"``) for ``operands``."""
    fn_type = lir.FunctionType(lir.VoidType(), [v.type for v in operands])
    builder.asm(fn_type, text, ",".join(filter(None, [constraints, "~{memory}"])), list(operands), side_effect=True)
