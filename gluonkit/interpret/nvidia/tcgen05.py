"""Rules for Blackwell's tensor-core MMA: ``tcgen05_mma`` and ``tcgen05_commit``.

``acc = a @ b (+ acc where use_acc)``, with the products of the inputs formed exactly
(float16, bfloat16 and fp8 values are exact in float64; float32 is read as tf32, its low 13
mantissa bits ignored, as :mod:`.wgmma` does), summed in float64 and rounded once into the
accumulator's element type in tensor memory.

The hardware runs an MMA in the background; it is complete only when a ``tcgen05.commit``
issued after it arrives on its mbarrier and a wait observes that phase.  Here each program
keeps its MMAs in issue order (:class:`_Unit`).  A commit (``tcgen05_commit``, or an MMA's
``mbarriers=``) becomes a completion on its barrier, a member of the barrier's ``copies`` as
TMA loads are (:mod:`.mbarrier`): the wait that needs its phase *lands* it — every MMA
issued before the commit is computed, in order, and the commit arrives — and then
*releases* it.  The shared operands are read at issue (by the issuing partition, for the
race checks between partitions); they cannot change before completion without a report.
Until the wait, the checker reports, with both lines:

* writing shared bytes an MMA in flight reads (a stage refilled too early): the MMA's operands
  are registered as :class:`~..shared_memory.AsyncRead` from issue until released;
* reading or writing the accumulator in tensor memory while an MMA on it is in flight (no wait
  on its commit's barrier yet): ``tmem_load``/``tmem_store`` are checked against the
  accumulators of unreleased MMAs of every partition (they share the CTA's tensor memory;
  commits, like the hardware's, cover the MMAs of the partition that issues them);
* an MMA reading shared bytes written by generic stores with no ``fence_async_shared`` since;
* an MMA that no commit ever covers, at the end of the kernel, and a wait on a commit's barrier
  that nothing will arrive on (the usual deadlock report of :mod:`.mbarrier`).

A synchronous MMA (no ``mbarriers``) completes every earlier MMA and itself on the spot.
"""

from __future__ import annotations

from typing import List, Optional
from weakref import WeakKeyDictionary

import numpy as np

from ...ir.types import TensorMemoryDescType
from ..engine import RULES, rule
from ..errors import InterpreterError
from ..happens_before import release
from ..shared_memory import AsyncRead, byte_mask, read, unfenced_write
from .tmem import TensorMemory, TmemRef, read_tile, write_tile  # (its rules exist before _checked wraps them)
from .mbarrier import arrive, barrier_state
from .wgmma import _TF32_MASK

__all__: List[str] = []

#: Per tensor memory (one CTA's, shared by its partitions): the MMAs whose completion no wait has observed yet.
_IN_FLIGHT: "WeakKeyDictionary[TensorMemory, List[_Mma]]" = WeakKeyDictionary()


def _footprint(ref: TmemRef, ty: TensorMemoryDescType, op) -> np.ndarray:
    """Which bytes of tensor memory the MMA result of view ``ty`` at ``ref`` occupies (a bool mask).

    Exactly the cells :func:`.tmem.write_tile` writes: found by writing into an empty copy.
    """
    memory = ref.memory
    scratch = TensorMemory(np.zeros_like(memory.data), np.zeros_like(memory.written), memory.plan)
    write_tile(TmemRef(scratch, ref.lane, ref.column), ty, np.zeros(ty.shape), op)
    return scratch.written


class _Mma:
    """One issued MMA: its operands, and the shared bytes it reads until released."""

    def __init__(self, program, op, operands):
        self.op = op
        self.a, self.b, self.acc, self.use_acc = operands[:4]
        self.types = [v.type for v in op.operands[:3]]
        self.what = f"the tcgen05_mma at line {op.loc.line}"
        self.done = False
        self.acc_mask = _footprint(self.acc, self.types[2], op)
        fix = "wait on the mbarrier its commit arrives on (mbarrier.wait) first"
        # The operands are read at issue, by the issuing partition (so races between partitions are judged
        # there); writing them before the MMA is known complete is reported, so the values cannot change.
        self.values = [_multiplicand(read(ref, ty, op), ty) for ref, ty in ((self.a, self.types[0]),
                                                                            (self.b, self.types[1]))]
        self.reads = []
        for ref, ty in ((self.a, self.types[0]), (self.b, self.types[1])):
            reader = AsyncRead(byte_mask(ref, ty, op), self.what, fix)
            ref.buffer.async_reads.append(reader)
            self.reads.append((ref.buffer, reader))
        _IN_FLIGHT.setdefault(self.acc.memory, []).append(self)

    def compute(self) -> None:
        """Run the MMA now: update acc in tensor memory."""
        acc_ty = self.types[2]
        product = self.values[0] @ self.values[1]
        if bool(self.use_acc):
            product += read_tile(self.acc, acc_ty, self.op).astype(np.float64)
        write_tile(self.acc, acc_ty, product, self.op)
        self.done = True

    def release(self) -> None:
        for buffer, reader in self.reads:
            buffer.async_reads.remove(reader)
        self.reads = []
        _IN_FLIGHT[self.acc.memory].remove(self)


def _multiplicand(values: np.ndarray, ty) -> np.ndarray:
    """Operand values as the float64 numbers the tensor cores multiply (float32 truncated to tf32)."""
    if ty.element.name == "float32":
        values = (np.ascontiguousarray(values, np.float32).view(np.uint32) & _TF32_MASK).view(np.float32)
    return values.astype(np.float64)


class _Units:
    """A program's MMAs not yet known complete, in issue order."""

    def __init__(self):
        self.issued: List[_Mma] = []
        self.committed = 0  # how many of ``issued`` some commit covers

    def land(self, upto: int) -> None:
        for mma in self.issued[:upto]:
            if not mma.done:
                mma.compute()

    def release(self, upto: int) -> None:
        for mma in self.issued[:upto]:
            mma.release()
        del self.issued[:upto]
        self.committed -= upto


def _units(program) -> _Units:
    units = program.async_state.get("tcgen05")
    if units is None:
        units = program.async_state["tcgen05"] = _Units()
        program.at_exit["tcgen05"] = _at_exit
    return units


class _Commit:
    """A ``tcgen05.commit`` as a completion on its barrier (the protocol of :mod:`.mbarrier`'s copies)."""

    def __init__(self, program, op, state, mma: _Mma):
        self.program, self.op, self.loc, self.state, self.last = program, op, op.loc, state, mma
        self.what = f"the tcgen05 commit at line {op.loc.line}"
        self.landed = False
        # The phase its arrival counts towards: after the arrivals made and those of earlier commits still to land.
        earlier = sum(1 for c in state.copies if isinstance(c, _Commit) and not c.landed)
        self.issued_in = (state.arrivals + earlier) // state.count

    def _upto(self) -> int:
        units = _units(self.program)
        return units.issued.index(self.last) + 1 if self.last in units.issued else 0

    def land(self) -> None:
        _units(self.program).land(self._upto())
        self.landed = True
        arrive(self.program, self.state, 1, self.op)

    def release(self) -> None:
        _units(self.program).release(self._upto())


def _commit(program, op, bar_ref, operand: int) -> None:
    units = _units(program)
    state = barrier_state(bar_ref, op, operand)
    if not units.issued:  # nothing in flight: the arrival is immediate
        _trace_commit(program, op, state, state.arrivals // state.count)
        arrive(program, state, 1, op)
        return
    units.committed = len(units.issued)
    commit = _Commit(program, op, state, units.issued[-1])
    _trace_commit(program, op, state, commit.issued_in)
    state.copies.append(commit)
    release(state, commit.issued_in)  # what this partition did so far happens before the arrival


def _trace_commit(program, op, state, phase: int) -> None:
    """On a trace: the commit, issued here, arrives on ``state``'s ``phase`` when the MMAs so far are done
    (its arrival itself is recorded where the interpreter lands it)."""
    if program.trace is not None:
        program.trace.instant(f"commit → {state.name}", "tcgen05.commit", op, barrier=state.name, phase=phase)


@rule("tcgen05_mma")
def _tcgen05_mma(program, op, operands):
    if not bool(operands[4]):
        return []
    for ref, value in ((operands[0], op.operands[0]), (operands[1], op.operands[1])):
        unfenced = unfenced_write(program, ref, value.type, op)
        if unfenced is not None:
            raise InterpreterError(f"tcgen05_mma reads {ref.buffer.describe()}, which the store at line "
                                   f"{unfenced.line} wrote through the generic proxy with no fence_async_shared() "
                                   "since; call fence_async_shared() between the store and the MMA", op.loc)
    units = _units(program)
    mma = _Mma(program, op, operands)
    units.issued.append(mma)
    if program.trace is not None:
        program.trace.instant("tcgen05_mma", "tcgen05.mma", op, shape=list(op.operands[2].type.shape),
                              sync=not op.attrs["is_async"])
    n = op.attrs["num_barriers"]
    if not op.attrs["is_async"]:  # synchronous: everything issued so far completes now
        units.land(len(units.issued))
        units.release(len(units.issued))
        return []
    for i in range(n):
        if bool(operands[5 + n + i]):
            _commit(program, op, operands[5 + i], 5 + i)
    return []


@rule("tcgen05_commit")
def _tcgen05_commit(program, op, operands):
    if bool(operands[1]):
        _commit(program, op, operands[0], 0)
    return []


def _in_flight(ref, ty, op) -> Optional[_Mma]:
    """An MMA of any partition, its completion not yet observed, whose accumulator overlaps view ``ty`` at ``ref``."""
    in_flight = _IN_FLIGHT.get(ref.memory)
    if not in_flight:
        return None
    mask = _footprint(ref, ty, op)
    return next((m for m in in_flight if (m.acc_mask & mask).any()), None)


def _checked(name: str, verb: str):
    """``name``'s rule, first reporting an access to an accumulator an MMA may still be updating."""
    plain = RULES[name]

    def checked(program, op, operands):
        mma = _in_flight(operands[0], op.operands[0].type, op)
        if mma is not None:
            raise InterpreterError(
                f"{name} {verb} tensor memory that {mma.what} may still be updating (its completion has not been "
                "observed); commit the MMA (mbarriers=[bar] or tcgen05_commit(bar)) and mbarrier.wait on that "
                "barrier first", op.loc, notes=[("the MMA in flight", mma.op.loc)])
        return plain(program, op, operands)

    checked.__doc__ = f"{name}, checked against MMAs in flight."
    rule(name)(checked)


_checked("tmem_load", "reads")
_checked("tmem_store", "writes")


def _at_exit(program, op) -> None:
    units = program.async_state["tcgen05"]
    uncommitted = units.issued[units.committed:]
    if uncommitted:
        raise InterpreterError(f"the kernel ends with {uncommitted[0].what} never committed: its result is never "
                               "known complete; pass mbarriers=[bar] (or call tcgen05_commit(bar)) and wait on bar",
                               uncommitted[0].op.loc)
