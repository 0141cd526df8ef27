"""Rules for cp.async (Ampere's ``async_copy``): copies, commit and wait groups, mbarrier arrivals.

A copy (``async_copy_global_to_shared``) lands at a point the seeded scheduler chooses
(as TMA copies do, :mod:`.tma`: before any later op with probability 1/4, and at the latest
when something waits for it): it then reads global memory and writes the whole view,
masked-off elements as zeros.  From issue until a wait releases it, the view's bytes are
registered as an :class:`~..shared_memory.AsyncWrite`, so reading or writing them — or
starting another asynchronous copy into them — is reported with both lines.

* Copies join the program's open group; ``async_commit_group`` closes it (an empty group is
  a group too), and ``async_wait_group(n)`` lands and releases the oldest committed groups
  until at most ``n`` remain.  Copies never committed are not waited for, as in PTX.
* ``async_copy_mbarrier_arrive`` lands every copy the program issued so far and arrives on
  the mbarrier: once per thread without ``increment_count`` (so the phase must expect
  ``32 * num_warps`` such arrivals), not at all with it (the pre-counted arrival cancels
  out).  The copies are released by the ``mbarrier.wait`` that observes that phase, through
  the barrier's list of copies (:mod:`.mbarrier`).
* The kernel may not return with copies unreleased: the CTA's shared memory would go away
  under them.
"""

from __future__ import annotations

import os
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, List

import numpy as np

from ..dtypes import numpy_dtype
from ..engine import rule
from ..errors import InterpreterError
from ..shared_memory import AsyncWrite, SharedRef, byte_mask, fill_view
from ..trace import view_name
from ..values import Tensor, element_text, to_logical
from .mbarrier import arrive, barrier_state

__all__ = []

_COMPLETE_PROBABILITY = 0.25
_FIX = "call async_copy.commit_group() and then async_copy.wait_group(n) until it has landed, first"


class _Copy:
    """One ``async_copy_global_to_shared``: lands (writes the view), then is released by a wait."""

    def __init__(self, program, op, ref: SharedRef, pointers: np.ndarray, active: np.ndarray):
        self.program, self.op, self.loc = program, op, op.loc
        self.ref, self.ty = ref, op.operands[0].type
        self.pointers, self.active = pointers, active
        self.what = f"the cp.async copy issued at line {op.loc.line}"
        self.writer = AsyncWrite(byte_mask(ref, self.ty, op), self.what, _FIX)
        self.landed = self.released = False
        self.span = None if program.trace is None else program.trace.start(
            f"cp.async → {view_name(ref, self.ty)}", "cp_async", op, destination=view_name(ref, self.ty),
            bytes=self.ty.nbytes)

    def land(self) -> None:
        if self.landed:
            return
        dtype = numpy_dtype(self.ty.element)
        values = np.zeros(self.ty.shape, dtype=dtype)
        where = np.flatnonzero(self.active.ravel())

        def describe(i: int) -> str:
            return (f"pointer {element_text(self.ty.shape, int(where[i]))} of the cp.async copy in program "
                    f"{tuple(self.program.pid)}")

        values.ravel()[where] = self.program.memory.read(self.pointers.ravel()[where], dtype, self.loc, describe)
        fill_view(self.ref, self.ty, values, self.op)
        self.landed = True
        if self.span is not None:
            self.span.finish()

    def release(self) -> None:
        if not self.released:
            self.land()
            self.ref.buffer.async_writes.remove(self.writer)
            self.released = True


@dataclass
class _BarrierRelease:
    """The copies an ``async_copy_mbarrier_arrive`` hands to an mbarrier phase, as the barrier's
    list of copies sees them: landed, counted towards phase ``issued_in``, released by its wait."""

    copies: List[_Copy]
    issued_in: int
    what: str
    loc: object
    landed: bool = True

    def release(self) -> None:
        for copy in self.copies:
            copy.release()


@dataclass
class _State:
    """This program's cp.async copies: the open group, committed groups, and the scheduler."""

    rng: random.Random
    open: List[_Copy] = field(default_factory=list)
    groups: Deque[List[_Copy]] = field(default_factory=deque)
    issued: List[_Copy] = field(default_factory=list)  # every copy not yet released


def _state(program) -> _State:
    state = program.async_state.get("cp_async")
    if state is None:
        seed = os.environ.get("GLUONKIT_INTERPRET_SEED", "0")
        state = program.async_state["cp_async"] = _State(random.Random(f"cp.async/{seed}/{program.pid}"))
        program.progress["cp_async"] = _progress
        program.at_exit["cp_async"] = _at_exit
    return state


def _unreleased(state: _State) -> List[_Copy]:
    state.issued = [c for c in state.issued if not c.released]
    return state.issued


def _progress(program, op) -> None:
    """Before ``op``: land some copies in flight (the seeded scheduler's choice)."""
    state = program.async_state["cp_async"]
    for copy in _unreleased(state):
        if not copy.landed and state.rng.random() < _COMPLETE_PROBABILITY:
            copy.land()


def _at_exit(program, op) -> None:
    pending = _unreleased(program.async_state["cp_async"])
    if pending:
        raise InterpreterError(f"the kernel returns while {pending[0].what} is in flight (no wait_group or mbarrier "
                               "wait retired it); call async_copy.commit_group() and async_copy.wait_group(0) "
                               "before the kernel ends", pending[0].loc)


def _logical(program, op, value, what: str) -> np.ndarray:
    if isinstance(value, Tensor):
        return to_logical(value, program.threads, op.loc, what)
    return np.asarray(value)


@rule("async_copy_global_to_shared")
def _copy(program, op, operands):
    ref = operands[0]
    pointers = _logical(program, op, operands[1], "the pointer").astype(np.int64)
    active = (_logical(program, op, operands[2], "the mask").astype(bool) if op.attrs.get("has_mask")
              else np.ones(pointers.shape, bool))
    copy = _Copy(program, op, ref, pointers, np.broadcast_to(active, pointers.shape))
    for other in ref.buffer.async_reads:
        if (other.mask & copy.writer.mask).any():
            raise InterpreterError(f"{op.name} overwrites {ref.buffer.describe()} while {other.what} is still "
                                   f"reading it; {other.fix}", op.loc)
    for other in ref.buffer.async_writes:
        if (other.mask & copy.writer.mask).any():
            raise InterpreterError(f"{op.name} copies into {ref.buffer.describe()} while {other.what} may still be "
                                   f"writing it; {other.fix}", op.loc)
    ref.buffer.async_writes.append(copy.writer)
    state = _state(program)
    state.open.append(copy)
    state.issued.append(copy)
    return []


@rule("async_commit_group")
def _commit(program, op, operands):
    state = _state(program)
    if program.trace is not None:
        program.trace.instant("commit_group", "cp_async.commit", op, copies=len(state.open))
    state.groups.append(state.open)
    state.open = []
    return []


@rule("async_wait_group")
def _wait(program, op, operands):
    state = _state(program)
    if program.trace is not None:
        program.trace.instant("wait_group", "cp_async.wait", op, num_outstanding=op.attrs["num_outstanding"],
                              retires=max(0, len(state.groups) - op.attrs["num_outstanding"]))
    while len(state.groups) > op.attrs["num_outstanding"]:
        for copy in state.groups.popleft():
            copy.release()
    return []


@rule("async_copy_mbarrier_arrive")
def _mbarrier_arrive(program, op, operands):
    barrier = barrier_state(operands[0], op)
    copies = list(_unreleased(_state(program)))
    for copy in copies:
        copy.land()
    phase = barrier.arrivals // barrier.count
    if copies:
        barrier.copies.append(_BarrierRelease(copies, phase, f"the cp.async copies that the arrive at line "
                                              f"{op.loc.line} waits for", op.loc))
    if not op.attrs["increment_count"]:
        threads = 32 * program.num_warps
        if threads > barrier.pending:
            raise InterpreterError(
                f"async_copy.mbarrier_arrive(increment_count=False): every thread arrives ({threads} arrivals with "
                f"{program.num_warps} warps), but the mbarrier initialized at line {barrier.init_loc.line} expects "
                f"only {barrier.pending} more in this phase; initialize it with count={threads} (times the arrivals "
                "per phase) or pass increment_count=True", op.loc)
        arrive(program, barrier, threads, op)
    return []
