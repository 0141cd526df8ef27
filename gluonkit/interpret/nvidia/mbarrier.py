"""Rules for mbarriers, fences and the program-wide barrier.

An mbarrier's state lives with its shared buffer (:class:`BarrierState`, keyed by byte
offset): the current phase's parity, the arrivals and transaction bytes it still waits
for, and where it was initialized.  A phase completes when both reach zero; the next
phase then expects ``count`` arrivals again.  ``wait(bar, p)`` returns once the phase of
parity ``p`` has completed, i.e. when the current phase's parity is not ``p``.

One program (or one warp-specialize partition, :mod:`..partitions`) runs as one sequential
agent here; a partition whose wait cannot return yet hands over to the others.  TMA loads (:mod:`.tma`) complete
transactions on their barrier asynchronously, at points a seeded scheduler picks, so the
barrier's actual phase depends on the seed.  Every check is therefore made against what
the program's order alone determines, and holds whichever way the copies land:

* A load counts towards the phase its program-order position gives it (:func:`issue_tx`):
  the phase of the latest arrival, or the next one when a wait already observed that phase
  complete.  Arrivals are synchronous, so this is fixed by the source.  When a phase's
  arrivals are all made and its loads bring more bytes than its ``mbarrier.expect`` calls
  announced, that is a transaction-bytes mismatch, reported at the expect (the load as a note)
  as soon as both have happened (on the GPU the phase would complete early, with a copy still
  in flight).
* A wait is judged against the latest phase it may observe for sure: the oldest phase with
  a load no wait has yet observed (or the actual phase when there is none).  A wait for
  that phase lets its loads land; if the phase still cannot complete it is a deadlock,
  reported with what the barrier still expects.  A wait for the parity of an earlier,
  completed phase while loads of that one are in flight is a wait on the wrong phase: it
  returns at once without waiting for them.  A successful wait releases the loads of the
  phases it observed (their buffers may be read from then on).
* Arriving on a phase while loads of an earlier phase were never observed by a wait is
  reported: on the GPU the arrival lands in whichever phase is current when it executes.

Misuse (use before ``init``, after ``invalidate``, a second ``init``, more arrivals than
the phase expects) is reported at the faulting line.  ``thread_barrier`` orders memory
between threads, which a sequential program already has; ``fence_async_shared`` is
recorded so TMA stores can check that generic writes were fenced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ...ir.diagnostics import Location
from ..engine import rule
from ..errors import InterpreterError
from ..happens_before import acquire, release
from ..shared_memory import SharedRef, element_addresses, note_fence
from ..trace import view_name

__all__ = ["BarrierState", "arrive", "barrier_in", "barrier_state", "complete_tx", "is_pair_barrier", "issue_tx", "pair_home"]


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
    arrivals: int = 0  # arrivals so far, in program order: arrival j belongs to phase j // count
    observed: int = 0  # phases a successful wait has seen complete
    ledger_phase: int = 0  # the phase that ``expected`` and ``issued`` describe
    expected: int = 0  # bytes announced by that phase's mbarrier.expect calls
    issued: int = 0  # bytes of the TMA loads issued into that phase
    issue_loc: Optional[Location] = None  # where the last of them was issued
    arrivers: Dict[str, int] = field(default_factory=dict)  # who arrived so far (a partition's name) -> last line
    name: str = ""  # how a trace names it (``ready[1]``); set only while recording one

    def outstanding(self) -> str:
        if self.tx >= 0:
            tx = f"{self.tx} transaction byte(s)"
        else:  # copies landed on a phase whose expect never came
            tx = f"no transaction bytes (its copies brought {-self.tx} byte(s) that no mbarrier.expect announced)"
        return f"{self.pending} of its {self.count} arrival(s) and {tx} are still missing in its current phase " \
               f"(parity {self.parity})"

    def arrived(self) -> str:
        """Who has arrived on the barrier so far, for deadlock reports."""
        if not self.arrivers:
            return "nothing has arrived on it yet"
        return "arrivals so far came from " + ", ".join(f"{who} (last at line {line})"
                                                        for who, line in self.arrivers.items())


def _where(ref: SharedRef, op, operand: int = 0) -> int:
    return int(element_addresses(ref, op.operands[operand].type, op).ravel()[0])


def is_pair_barrier(ty) -> bool:
    """A ``two_ctas`` barrier: one per CTA pair, living in the even CTA (``allocate_mbarrier``)."""
    return bool(getattr(ty.layout, "two_ctas", False))


def pair_home(program, ref: SharedRef, op, operand: int = 0) -> SharedRef:
    """Where the barrier operand ``operand`` of ``op`` lives: a pair barrier in the even CTA of
    this CTA's pair (distributed shared memory), any other in this CTA."""
    if program is None or program.cluster is None or not is_pair_barrier(op.operands[operand].type):
        return ref
    return program.cluster.peer(ref, program.cta_rank & ~1, op) if program.cta_rank & 1 else ref


def barrier_in(program, ref: SharedRef, op, operand: int, rank: int) -> BarrierState:
    """The state of barrier operand ``operand`` of ``op`` as CTA ``rank`` of the cluster has it (a
    multicast copy's destination): that CTA's barrier at the same offset, or, for a pair barrier,
    the one of that CTA's pair (in its even CTA)."""
    home = rank & ~1 if is_pair_barrier(op.operands[operand].type) else rank
    return barrier_state(ref if home == program.cta_rank else program.cluster.peer(ref, home, op), op, operand)


def barrier_state(ref: SharedRef, op, operand: int = 0, program=None) -> BarrierState:
    """The state of the mbarrier that operand ``operand`` of ``op`` (with runtime value ``ref``) names
    (with ``program``: a pair barrier's, in the even CTA)."""
    ref = pair_home(program, ref, op, operand)
    state = ref.buffer.barriers.get(_where(ref, op, operand))
    if state is None:
        raise InterpreterError(f"{op.name}: the mbarrier is used before mbarrier.init", op.loc)
    if state.invalidated_at is not None:
        raise InterpreterError(f"{op.name}: the mbarrier was invalidated at line {state.invalidated_at.line}; "
                               "initialize it again before using it", op.loc)
    return state


def _ledger(state: BarrierState, phase: int) -> None:
    """Start counting expected and issued bytes afresh when ``phase`` is a new phase."""
    if phase != state.ledger_phase:
        state.ledger_phase, state.expected, state.issued, state.issue_loc = phase, 0, 0, None


def arrive(program, state: BarrierState, count: int, op, nbytes: int = 0) -> None:
    """``count`` arrivals (the first announcing ``nbytes`` transaction bytes, as ``mbarrier.expect``)."""
    state.arrivers[program.partition_name or _cta_name(program)] = op.loc.line
    release(state, state.arrivals // state.count)
    phase = state.arrivals // state.count
    unobserved = [c for c in state.copies if c.issued_in < phase]
    if unobserved:
        raise InterpreterError(
            f"{op.name}: arrives on the next phase of the mbarrier initialized at line {state.init_loc.line}, but no "
            f"mbarrier.wait has observed the phase that {unobserved[0].what} completes, so that copy may still be "
            "in flight and the arrival may count towards its phase; wait for that phase (mbarrier.wait(bar, "
            f"phase)) before arming the barrier again{_partition_hint(program)}", op.loc)
    if count > state.pending:
        raise InterpreterError(
            f"{op.name}: arrives {count} time(s) but the mbarrier (initialized at line {state.init_loc.line} "
            f"with count {state.count}) expects only {state.pending} more arrival(s) in this phase", op.loc)
    _ledger(state, phase)
    state.expected += nbytes
    state.tx += nbytes
    state.arrivals += count
    state.pending -= count
    if state.ledger_phase == phase and state.issue_loc is not None:
        _check_ledger(state, phase, op.loc if op.name == "mbarrier_expect" else state.expect_loc or op.loc)
    if program.trace is not None:
        kind = "mbarrier.expect" if op.name == "mbarrier_expect" else "mbarrier.arrive"
        program.trace.instant(f"{kind.split('.')[1]} {state.name}", kind, op, barrier=state.name, count=count,
                              bytes=nbytes, phase=phase)
    _maybe_complete(state, op.loc, program.trace, op)


def _cta_name(program) -> str:
    return "the program" if program.cluster is None else f"CTA {program.cta_rank}"


def _partition_hint(program) -> str:
    if program.partition_name is None:
        return ""
    return (f" (in {program.partition_name}, usually: wait until the partition that consumes the stage has "
            "released it, e.g. on an 'empty' mbarrier, before refilling it)")


def issue_tx(state: BarrierState, nbytes: int, op) -> int:
    """A TMA load of ``nbytes`` issued at ``op`` counts on the barrier: the phase it counts towards.

    That is the phase of the latest arrival, or the next phase if a wait has already observed
    that one (a load issued before its phase's ``mbarrier.expect``).  Reports a phase whose
    arrivals are all made and whose loads bring more bytes than it expects.
    """
    phase = max(state.arrivals - 1, 0) // state.count
    if state.arrivals % state.count == 0 and phase < state.observed:
        phase += 1
    _ledger(state, phase)
    state.issued += nbytes
    state.issue_loc = op.loc
    _check_ledger(state, phase, state.expect_loc if state.expect_loc is not None else op.loc)
    return phase


def _check_ledger(state: BarrierState, phase: int, expect: Location) -> None:
    """Report a phase whose arrivals are all made (armed) and whose loads bring more bytes than its
    expects announced: checked when a load is issued and when the arrival that arms it comes (whichever
    is last), so both lines are named whatever the order (the expect at ``expect``)."""
    armed = state.arrivals >= (phase + 1) * state.count
    if armed and state.issued > state.expected:
        raise InterpreterError(
            f"transaction bytes mismatch: this phase of the mbarrier initialized at line {state.init_loc.line} "
            f"expects {state.expected} byte(s) (mbarrier.expect at line {expect.line}), but the TMA loads issued "
            f"into it bring {state.issued}, {state.issued - state.expected} byte(s) more, so the phase would "
            f"complete while a copy is still in flight; expect exactly the bytes the phase's copies bring "
            "(desc.block_type.nbytes per copy)", expect, notes=[("the load that brings more bytes than expected",
                                                                 state.issue_loc)])


def complete_tx(state: BarrierState, nbytes: int, loc: Location, lane=None, op=None) -> None:
    """``nbytes`` of an async copy issued at ``loc`` (by ``op``, traced on ``lane``) arrived (``complete_tx``)."""
    state.tx -= nbytes
    _maybe_complete(state, loc, lane, op)


def _maybe_complete(state: BarrierState, loc: Location, lane=None, op=None) -> None:
    """Complete the current phase if nothing is missing; ``lane`` records it on a trace."""
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
    in_flight = [c for c in state.copies if not c.landed and c.issued_in <= state.completed]
    if in_flight:
        raise InterpreterError(
            f"transaction bytes mismatch: a phase of the mbarrier initialized at line {state.init_loc.line} "
            f"completed ({expected}) while {in_flight[0].what} counted on it was still in flight; expect the "
            "bytes of every copy the phase waits for", in_flight[0].loc)
    if lane is not None:
        lane.instant(f"{state.name} phase {state.completed} complete", "mbarrier.phase", op, barrier=state.name,
                     phase=state.completed, parity=state.parity)
    state.parity ^= 1
    state.pending = state.count
    state.completed += 1


@rule("mbarrier_init")
def _mbarrier_init(program, op, operands):
    ref = operands[0]
    pair = is_pair_barrier(op.operands[0].type)
    if pair and program.cta_rank & 1:  # a pair barrier lives in the even CTA, which initializes it
        return []
    where = _where(ref, op)
    old = ref.buffer.barriers.get(where)
    if old is not None and old.invalidated_at is None:
        raise InterpreterError(f"mbarrier_init: the mbarrier was already initialized at line {old.init_loc.line}; "
                               "invalidate it before initializing it again", op.loc)
    count = op.attrs["count"] * (2 if pair else 1)  # a pair barrier: each CTA's arrivals
    state = ref.buffer.barriers[where] = BarrierState(count, count, 0, 0, op.loc)
    if program.trace is not None:
        state.name = view_name(ref, op.operands[0].type)
    return []


@rule("mbarrier_expect")
def _mbarrier_expect(program, op, operands):
    ref, pred = operands
    if bool(pred):
        for state in _routed_states(program, ref, op):
            arrive(program, state, 1, op, op.attrs["bytes"])
            state.expect_loc = op.loc
    return []


@rule("mbarrier_arrive")
def _mbarrier_arrive(program, op, operands):
    ref, pred = operands
    if bool(pred):
        for state in _routed_states(program, ref, op):
            arrive(program, state, op.attrs["count"], op)
    return []


def _routed_states(program, ref: SharedRef, op) -> List[BarrierState]:
    """The barriers an arrival at ``op`` lands on: its own, or, routed by ``from_cta``, the
    same barrier in each CTA of the cluster that the mask selects (none when this CTA's rank
    has a bit outside the mask).  See ``docs/clusters.rst``."""
    if "from_cta" not in op.attrs:
        return [barrier_state(ref, op, program=program)]
    cluster, rank = program.cluster, program.cta_rank
    free = (len(cluster.arrivals) - 1) & ~op.attrs["from_cta"]
    if rank & free:
        return []
    states = []
    for target in range(len(cluster.arrivals)):
        if target & ~free == rank:
            try:
                states.append(barrier_state(cluster.peer(ref, target, op), op))
            except InterpreterError as e:
                e.notes.append((f"CTA {rank} arrives on the barrier of CTA {target} here (from_cta="
                                f"{op.attrs['from_cta']}): every CTA must allocate and initialize its "
                                "barriers, and a cluster.barrier() must follow, before other CTAs arrive on them", None))
                e.args = (e._format(),)
                raise
    return states


@rule("mbarrier_wait")
def _mbarrier_wait(program, op, operands):
    ref, phase, pred = operands[:3]
    if not bool(pred) or is_pair_barrier(op.operands[0].type) and program.cta_rank & 1:
        return []  # (the odd CTA of a pair does not wait on the pair's barrier, as in Triton 3.9)
    state = barrier_state(ref, op)
    parity = int(phase) & 1
    trace = program.trace
    if trace is not None:
        trace.begin(f"wait {state.name}", "mbarrier.wait", op, barrier=state.name, parity=parity)
    if _wait_done(state, parity, op):
        acquire(state)
        if trace is not None:
            trace.end(f"wait {state.name}", "mbarrier.wait", op, blocked=False)
        return []
    if program.blocker is None:
        raise InterpreterError(
            f"deadlock: mbarrier.wait for the phase of parity {parity} of the mbarrier initialized at line "
            f"{state.init_loc.line}, which can never complete: {state.outstanding()}, and nothing else is "
            f"running that could arrive (no other partition, no asynchronous copy in flight){_bytes_note(state)}",
            op.loc)
    # In a warp-specialize partition: other partitions may still arrive; hand over until the phase completes.
    # The scheduler polls every blocked task when it hands over and may run another first: once the wait
    # has succeeded (observing the phase and releasing its copies), it stays done, whatever arrives next.
    succeeded = []

    def ready() -> bool:
        if not succeeded and _wait_done(state, parity, op):
            succeeded.append(True)
        return bool(succeeded)

    program.blocker(ready,
                    lambda: (f"mbarrier.wait at line {op.loc.line} for parity {parity} of the mbarrier initialized "
                             f"at line {state.init_loc.line}: {state.outstanding()}; {state.arrived()}"
                             f"{_bytes_note(state)}"))
    acquire(state)
    if trace is not None:
        trace.end(f"wait {state.name}", "mbarrier.wait", op, blocked=True)
    return []


def _wait_done(state: BarrierState, parity: int, op) -> bool:
    """Whether a wait for ``parity`` may return now (landing the copies it needs); False: it must block."""
    # The phase this wait may observe for sure: the oldest one with a load no wait has observed.
    target = min((c.issued_in for c in state.copies), default=state.completed)
    if target & 1 != parity:
        if state.copies:
            copy = state.copies[0]
            which = "precedes its first phase" if target == 0 else f"completed before (phase {target - 1})"
            raise InterpreterError(
                f"mbarrier.wait on the wrong phase: it waits for parity {parity} of the mbarrier initialized at line "
                f"{state.init_loc.line}, whose phase of that parity {which}, so it returns at once without "
                f"waiting for {copy.what}, which counts towards the phase of parity {target & 1}; the parity "
                "flips each time the barrier completes a phase: pass the parity of the phase whose copies you need "
                "(for a ring of STAGES barriers, (step // STAGES) & 1)", op.loc)
        state.observed = max(state.observed, target)
        return True
    for copy in [c for c in state.copies if c.issued_in == target]:  # its loads land before the wait could block
        if state.completed > target:
            break
        if not copy.landed:
            copy.land()
    if state.completed <= target:
        return False
    state.observed = max(state.observed, target + 1)
    for copy in [c for c in state.copies if c.landed and c.issued_in < state.completed]:
        copy.release()
        state.copies.remove(copy)
    return True


def _bytes_note(state: BarrierState) -> str:
    """For a deadlock: the current phase's expected and issued bytes, when they differ."""
    if state.tx <= 0 or state.expect_loc is None or state.ledger_phase != state.completed:
        return ""
    return (f"; its mbarrier.expect at line {state.expect_loc.line} announced {state.expected} byte(s) but the TMA "
            f"loads issued into the phase bring {state.issued}: expect exactly the bytes the phase's copies bring")


@rule("mbarrier_invalidate")
def _mbarrier_invalidate(program, op, operands):
    if not (is_pair_barrier(op.operands[0].type) and program.cta_rank & 1):
        barrier_state(operands[0], op).invalidated_at = op.loc
    return []


@rule("fence_async_shared")
def _fence_async_shared(program, op, operands):
    note_fence(program)
    return []


@rule("thread_barrier")
def _thread_barrier(program, op, operands):
    if program.trace is not None:
        program.trace.instant("thread_barrier", "thread_barrier", op)
    return []
