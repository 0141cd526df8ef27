"""The rule for ``inline_asm_elementwise``: PTX cannot run on the CPU, so it is reported.

Emulating arbitrary PTX would be a PTX simulator; guessing at it would be worse than a clear
stop.  The error names the line and the two ways forward (see docs/decisions.rst).
"""

from __future__ import annotations

from .engine import rule
from .errors import InterpreterError

__all__ = []


@rule("inline_asm_elementwise")
def _inline_asm(program, op, operands):
    first = op.attrs["asm"].strip().splitlines()[0] if op.attrs["asm"].strip() else ""
    raise InterpreterError(
        f"inline_asm_elementwise cannot run in the interpreter: it executes PTX ({first!r}…), which the CPU "
        "interpreter does not emulate; run the kernel on the GPU, or, to interpret it, express the computation "
        "with gl.* operations (for instance a @jit function applied with gl.map_elementwise where available)",
        op.loc)
