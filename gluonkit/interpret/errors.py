"""The error the interpreter raises when a kernel does something the hardware would not catch.

Out-of-bounds or misaligned accesses, replicated copies of an element that disagree,
racing stores, failed ``assume``/hint checks and layout mismatches in ops that move no
data all become an :class:`InterpreterError` at the op's source line: a
:class:`~gluonkit.ir.CompilationError`, so one ``except`` catches every kernel mistake.
"""

from __future__ import annotations

from ..ir.diagnostics import CompilationError

__all__ = ["InterpreterError"]


class InterpreterError(CompilationError):
    """A kernel fault found while interpreting it, located at the faulting op."""
