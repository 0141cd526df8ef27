"""Rules for mbarriers, fences and the program-wide barrier.

An mbarrier's state lives with its shared buffer (:class:`BarrierState`, keyed by byte
offset): the current phase's parity, the arrivals and transaction bytes it still waits
for, and where it was initialized.  A phase completes when both reach zero; the next
phase then expects ``count`` arrivals again.  ``wait(bar, p)`` returns once the phase of
parity ``p`` has completed, i.e. when the current phase's parity is not ``p``.

One program runs as one sequential agent here.  TMA loads (:mod:`.tma`) complete
transactions on their barrier asynchronously: they are kept in ``BarrierState.copies``;
a wait on an incomplete phase first lets the copies in flight to that barrier land, and if
the phase still cannot complete it is reported as a deadlock with what the barrier still
expects.  A successful wait releases the copies whose phase it observed (their buffers may
be read from then on).  Byte mismatches are errors: a phase whose arrivals are done but
that received more bytes than were expected, and a phase that completes while a copy
counted on it is still in flight.  Misuse (use before ``init``, after ``invalidate``, a
second ``init``, more arrivals than the phase expects) is reported at the faulting line.
``thread_barrier`` orders memory between threads, which a sequential program already has;
``fence_async_shared`` is recorded so TMA stores can check that generic writes were fenced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from ..ir.diagnostics import Location
from .engine import rule
from .errors import InterpreterError
from .shared_memory import SharedRef, element_addresses, note_fence

__all__ = ["BarrierState", "barrier_state", "complete_tx"]


@dataclass
class BarrierState:
    """One mbarrier: ``count`` arrivals per phase; ``pending`` arrivals and ``tx`` bytes to go."""

    count: int
    pending: int
    tx: int
    parity: int
    init_loc: Location
    invalidated_at: Optional[Location] = None
    completed: int = 0  # phases completed so far
    copies: List[object] = field(default_factory=list)  # TMA loads counted on this barrier, not yet released
    expect_loc: Optional[Location] = None  # the last mbarrier.expect

    def outstanding(self) -> str:
        return (f"{self.pending} of its {self.count} arrival(s) and {self.tx} transaction byte(s) are still "
                f"missing in its current phase (parity {self.parity})")


def _where(ref: SharedRef, op, operand: int = 0) -> int:
    return int(element_addresses(ref, op.operands[operand].type, op).ravel()[0])


def barrier_state(ref: SharedRef, op, operand: int = 0) -> BarrierState:
    """The state of the mbarrier that operand ``operand`` of ``op`` (with runtime value ``ref``) names."""
    state = ref.buffer.barriers.get(_where(ref, op, operand))
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
    _maybe_complete(state, op.loc)


def complete_tx(state: BarrierState, nbytes: int, loc: Location) -> None:
    """``nbytes`` of an async copy issued at ``loc`` arrived (``complete_tx``)."""
    state.tx -= nbytes
    _maybe_complete(state, loc)


def _maybe_complete(state: BarrierState, loc: Location) -> None:
    if state.pending:
        return
    expected = f"mbarrier.expect at line {state.expect_loc.line}" if state.expect_loc else "no mbarrier.expect"
    if state.tx < 0:
        raise InterpreterError(
            f"transaction bytes mismatch: the copies into the mbarrier initialized at line {state.init_loc.line} "
            f"brought {-state.tx} byte(s) more than its phase expected ({expected}); expect exactly the bytes "
            "the phase's copies bring (desc.block_type.nbytes per copy)", loc)
    if state.tx:
        return
    in_flight = [c for c in state.copies if not c.landed]
    if in_flight:
        raise InterpreterError(
            f"transaction bytes mismatch: a phase of the mbarrier initialized at line {state.init_loc.line} "
            f"completed ({expected}) while {in_flight[0].what} counted on it was still in flight; expect the "
            "bytes of every copy the phase waits for", in_flight[0].loc)
    state.parity ^= 1
    state.pending = state.count
    state.completed += 1


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
        state = barrier_state(ref, op)
        state.tx += op.attrs["bytes"]
        state.expect_loc = op.loc
        _arrive(state, 1, op)
    return []


@rule("mbarrier_arrive")
def _mbarrier_arrive(program, op, operands):
    ref, pred = operands
    if bool(pred):
        _arrive(barrier_state(ref, op), op.attrs["count"], op)
    return []


@rule("mbarrier_wait")
def _mbarrier_wait(program, op, operands):
    ref, phase, pred = operands[:3]
    if not bool(pred):
        return []
    state = barrier_state(ref, op)
    parity = int(phase) & 1
    for copy in list(state.copies):  # copies in flight land before the wait could block
        if state.parity != parity:
            break
        if not copy.landed:
            copy.land()
    if state.parity == parity:
        raise InterpreterError(
            f"deadlock: mbarrier.wait for the phase of parity {parity} of the mbarrier initialized at line "
            f"{state.init_loc.line}, which can never complete: {state.outstanding()}, and nothing else is "
            "running that could arrive (no other partition, no asynchronous copy in flight)", op.loc)
    for copy in [c for c in state.copies if c.landed and c.phase < state.completed]:
        copy.release()
        state.copies.remove(copy)
    return []


@rule("mbarrier_invalidate")
def _mbarrier_invalidate(program, op, operands):
    barrier_state(operands[0], op).invalidated_at = op.loc
    return []


@rule("fence_async_shared")
def _fence_async_shared(program, op, operands):
    note_fence(program)
    return []


@rule("thread_barrier")
def _ordering_only(program, op, operands):
    return []
