"""Rules for mbarriers, fences and the program-wide barrier.

An mbarrier's state lives with its shared buffer (:class:`BarrierState`, keyed by byte
offset): the current phase's parity, the arrivals and transaction bytes it still waits
for, and where it was initialized.  A phase completes when both reach zero; the next
phase then expects ``count`` arrivals again.  ``wait(bar, p)`` returns once the phase of
parity ``p`` has completed, i.e. when the current phase's parity is not ``p``.

One program runs as one sequential agent here, and nothing completes asynchronously yet
(TMA and wgmma arrive in later slices), so a wait on a phase that is still in progress can
never return: it is reported as a deadlock with what the barrier still expects.  Misuse
(use before ``init``, after ``invalidate``, a second ``init``, more arrivals than the phase
expects) is reported at the faulting line.  Fences and ``thread_barrier`` order memory
between threads, which a sequential program already has: they do nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.diagnostics import Location
from .engine import rule
from .errors import InterpreterError
from .shared_memory import SharedRef, element_addresses

__all__ = ["BarrierState"]


@dataclass
class BarrierState:
    """One mbarrier: ``count`` arrivals per phase; ``pending`` arrivals and ``tx`` bytes to go."""

    count: int
    pending: int
    tx: int
    parity: int
    init_loc: Location
    invalidated_at: Optional[Location] = None

    def outstanding(self) -> str:
        return (f"{self.pending} of its {self.count} arrival(s) and {self.tx} transaction byte(s) are still "
                f"missing in its current phase (parity {self.parity})")


def _where(ref: SharedRef, op) -> int:
    return int(element_addresses(ref, op.operands[0].type, op).ravel()[0])


def _state(ref: SharedRef, op) -> BarrierState:
    state = ref.buffer.barriers.get(_where(ref, op))
    if state is None:
        raise InterpreterError(f"{op.name}: the mbarrier is used before mbarrier.init", op.loc)
    if state.invalidated_at is not None:
        raise InterpreterError(f"{op.name}: the mbarrier was invalidated at line {state.invalidated_at.line}; "
                               "initialize it again before using it", op.loc)
    return state


def _arrive(state: BarrierState, count: int, op) -> None:
    if count > state.pending:
        raise InterpreterError(
            f"{op.name}: arrives {count} time(s) but the mbarrier (initialized at line {state.init_loc.line} "
            f"with count {state.count}) expects only {state.pending} more arrival(s) in this phase", op.loc)
    state.pending -= count
    if state.pending == 0 and state.tx == 0:
        state.parity ^= 1
        state.pending = state.count


@rule("mbarrier_init")
def _mbarrier_init(program, op, operands):
    ref = operands[0]
    where = _where(ref, op)
    old = ref.buffer.barriers.get(where)
    if old is not None and old.invalidated_at is None:
        raise InterpreterError(f"mbarrier_init: the mbarrier was already initialized at line {old.init_loc.line}; "
                               "invalidate it before initializing it again", op.loc)
    count = op.attrs["count"]
    ref.buffer.barriers[where] = BarrierState(count, count, 0, 0, op.loc)
    return []


@rule("mbarrier_expect")
def _mbarrier_expect(program, op, operands):
    ref, pred = operands
    if bool(pred):
        state = _state(ref, op)
        state.tx += op.attrs["bytes"]
        _arrive(state, 1, op)
    return []


@rule("mbarrier_arrive")
def _mbarrier_arrive(program, op, operands):
    ref, pred = operands
    if bool(pred):
        _arrive(_state(ref, op), op.attrs["count"], op)
    return []


@rule("mbarrier_wait")
def _mbarrier_wait(program, op, operands):
    ref, phase, pred = operands[:3]
    if not bool(pred):
        return []
    state = _state(ref, op)
    parity = int(phase) & 1
    if state.parity == parity:
        raise InterpreterError(
            f"deadlock: mbarrier.wait for the phase of parity {parity} of the mbarrier initialized at line "
            f"{state.init_loc.line}, which can never complete: {state.outstanding()}, and nothing else is "
            "running that could arrive (no other partition, no asynchronous copy in flight)", op.loc)
    return []


@rule("mbarrier_invalidate")
def _mbarrier_invalidate(program, op, operands):
    _state(operands[0], op).invalidated_at = op.loc
    return []


@rule("fence_async_shared", "thread_barrier")
def _ordering_only(program, op, operands):
    return []
