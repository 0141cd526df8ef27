"""One PTX statement emitted as LLVM inline assembly, for instructions LLVM has no intrinsic for.

The statement returns nothing, has side effects and clobbers memory, so LLVM neither drops
it nor moves loads and stores across it (barriers, fences, asynchronous copies, mbarrier
operations, ``setmaxnreg``).
"""

from __future__ import annotations

from typing import Sequence

import llvmlite.ir as lir

__all__ = ["emit_ptx"]


def emit_ptx(builder: lir.IRBuilder, text: str, constraints: str = "", operands: Sequence[lir.Value] = ()) -> None:
    """Emit ``text`` with the input ``constraints`` (comma-separated, e.g. ``"r,l"``) for ``operands``."""
    fn_type = lir.FunctionType(lir.VoidType(), [v.type for v in operands])
    builder.asm(fn_type, text, ",".join(filter(None, [constraints, "~{memory}"])), list(operands), side_effect=True)
