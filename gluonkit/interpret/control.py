"""Rules for structured control flow: ``for``, ``if``, ``while`` and the terminators.

Conditions and loop bounds are program-uniform scalars.  Loop-carried values pass from one
iteration's ``yield`` to the next iteration's block arguments, then become the op's
results.  The induction variable has the type of the lower bound and steps by ``step``
(negative steps count down; a zero step is an error rather than a hang).
"""

from __future__ import annotations

import numpy as np

from ..ir.types import element_type
from .dtypes import from_python
from .engine import rule
from .errors import InterpreterError


def _uniform(op, value, what: str):
    if np.ndim(value) != 0:
        raise InterpreterError(
            f"{op.name}: the {what} differs between elements here (inside a reduce combine "
            "function); the interpreter runs control flow only on program-uniform scalars", op.loc)
    return value


@rule("for")
def _for(program, op, operands):
    lower, upper, step = (int(_uniform(op, v, "loop bound")) for v in operands[:3])
    if step == 0:
        raise InterpreterError("for: the step is 0, so the loop would never end", op.loc)
    iv_type = element_type(op.operands[0].type)
    carried = list(operands[3:])
    body = op.regions[0]
    iv = lower
    while (iv < upper) if step > 0 else (iv > upper):
        carried = program.run_block(body, [from_python(iv, iv_type)[()]] + carried)
        iv += step
    return carried


@rule("if")
def _if(program, op, operands):
    taken = op.regions[0] if bool(_uniform(op, operands[0], "condition")) else op.regions[1]
    return program.run_block(taken, [])


@rule("while")
def _while(program, op, operands):
    before, after = op.regions
    values = list(operands)
    while True:
        cond, *forwarded = program.run_block(before, values)
        if not bool(_uniform(op, cond, "condition")):
            return forwarded
        values = program.run_block(after, forwarded)


@rule("yield", "condition", "return")
def _terminator(program, op, operands):
    return list(operands)
