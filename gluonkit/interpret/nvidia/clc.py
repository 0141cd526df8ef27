"""Rules for cluster launch control: ``clc_try_cancel`` and ``clc_load_result``.

The interpreter starts a launch's programs one after another in grid order
(:class:`~..engine.GridLaunch`).  ``try_cancel`` takes the next program that has not
started, marks it cancelled (the launch skips it) and answers with its id; when none is
left it answers "not cancelled".  This is one schedule the hardware allows (it may cancel
any not-yet-launched cluster), chosen so runs are deterministic.

The response is an async write of the 16-byte buffer, like a TMA load: its 16 transaction
bytes count towards the barrier phase the program's order gives it and it lands (buffer
written, bytes completed) when a wait on that barrier needs it.  Reading the buffer
(``load_result``) before a wait observed that phase, or issuing another ``try_cancel`` into
it meanwhile, is reported.  The buffer holds the interpreter's own encoding (word 0: 1 if
cancelled; word 1: x | y << 21 | z << 42); the hardware's is opaque, read it only with
``load_result``.
"""

from __future__ import annotations

import numpy as np

from ..engine import rule
from ..errors import InterpreterError
from ..happens_before import on_access, release
from ..shared_memory import AsyncWrite, byte_mask, fill_view, read
from .mbarrier import barrier_state, complete_tx, issue_tx

__all__ = []

_BYTES = 16


class _Response:
    """One try_cancel response in flight: lands (writes the buffer, completes 16 bytes), then a wait releases it."""

    def __init__(self, op, ref, ty, barrier, words):
        self.op, self.loc, self.ref, self.ty, self.barrier, self.words = op, op.loc, ref, ty, barrier, words
        self.what = f"the try_cancel issued at line {op.loc.line}"
        self.landed = False
        self.issued_in = -1
        self.writer = AsyncWrite(byte_mask(ref, ty, op), self.what,
                                 "wait on its mbarrier (mbarrier.wait(bar, phase)) first")

    def land(self) -> None:
        fill_view(self.ref, self.ty, self.words, self.op)
        self.landed = True
        complete_tx(self.barrier, _BYTES, self.loc, None, self.op)

    def release(self) -> None:
        self.ref.buffer.async_writes.remove(self.writer)


def _cancel(program) -> np.ndarray:
    """The response: the next program not started yet (now cancelled), or "not cancelled"."""
    launch = program.memory.launch
    if launch is None or launch.next >= len(launch.order):
        return np.zeros(2, dtype=np.int64)
    x, y, z = launch.order[launch.next]
    launch.next += 1
    return np.array([1, x | y << 21 | z << 42], dtype=np.int64)


def _answer(program) -> np.ndarray:
    """The response to this CTA's next try_cancel.  The CTAs of a cluster are replicas: the
    cluster is cancelled once, so the i-th try_cancel of every CTA gets the same answer."""
    count = program.async_state.get("clc", 0)
    program.async_state["clc"] = count + 1
    if program.cluster is None:
        return _cancel(program)
    answers = program.cluster.clc_answers
    if count == len(answers):
        answers.append(_cancel(program))
    return answers[count]


@rule("clc_try_cancel")
def _try_cancel(program, op, operands):
    ref, bar = operands
    ty = op.operands[0].type
    barrier = barrier_state(bar, op, operand=1)
    response = _Response(op, ref, ty, barrier, _answer(program))
    for other in ref.buffer.async_writes:
        if (other.mask & response.writer.mask).any():
            raise InterpreterError(f"try_cancel writes {ref.buffer.describe()} while {other.what} may still be "
                                   f"writing it; {other.fix}", op.loc)
    on_access(ref.buffer, np.flatnonzero(response.writer.mask), op, write=True)
    response.issued_in = issue_tx(barrier, _BYTES, op)
    release(barrier, response.issued_in)
    ref.buffer.async_writes.append(response.writer)
    barrier.copies.append(response)
    return []


@rule("clc_load_result")
def _load_result(program, op, operands):
    words = read(operands[0], op.operands[0].type, op)
    canceled, packed = bool(words[0] & 1), int(words[1])
    mask = (1 << 21) - 1
    return [np.bool_(canceled), np.int32(packed & mask), np.int32(packed >> 21 & mask), np.int32(packed >> 42 & mask)]
