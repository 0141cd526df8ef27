"""Races between warp-specialize partitions: happens-before through mbarrier phases (vector clocks).

While the partitions of one ``warp_specialize`` run, each has a vector clock.  Arriving on
an mbarrier (``arrive``, ``expect``, and a TMA load, whose bytes complete the phase it
counts towards) *releases*: the phase's clock takes in the partition's, and the
partition's own entry ticks.  A successful ``mbarrier.wait`` *acquires*: the partition's
clock takes in the clocks of the barrier's completed phases.  So an access by partition
``q`` happens before the current point of partition ``p`` exactly when ``p``'s clock has
caught up with the tick ``q`` had at that access.

Every shared-memory access while partitions run (``local_load``/``local_store``, the
reads of TMA stores and wgmma, the write of a TMA load at its issue) is recorded per byte:
the last write and, per partition, the last read.  A read of bytes another partition wrote,
or a write of bytes another partition read or wrote, that is not ordered after that access
is a race, reported at the second access with the first one's line.  Accesses outside
partitions are ordered by the fork and join and are not recorded.

Partitions run on threads of their own (:mod:`.partitions`), so the running partition is
found through a thread-local.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Optional

import numpy as np

from .errors import InterpreterError

__all__ = ["Clocks", "enter", "on_access", "release", "acquire", "acquire_phase"]

_current = threading.local()


class _Record:
    """Per byte of one buffer: the last writer (partition, tick, location) and each partition's last read."""

    def __init__(self, size: int, partitions: int):
        self.writer = np.full(size, -1, np.int16)
        self.write_tick = np.zeros(size, np.int64)
        self.write_loc = np.zeros(size, np.int32)
        self.read_tick = np.zeros((partitions, size), np.int64)
        self.read_loc = np.zeros((partitions, size), np.int32)


class Clocks:
    """The vector clocks and access records of one run of a ``warp_specialize``."""

    def __init__(self, names: List[str]):
        n = len(names)
        self.names = names
        self.clock = [[1 if i == j else 0 for j in range(n)] for i in range(n)]
        self.phases: Dict[int, Dict[int, List[int]]] = {}  # id(barrier state) -> phase -> released clock
        self.records: Dict[int, _Record] = {}  # id(buffer) -> record
        self.locs = [None]  # location index 0: none
        self._loc_index: Dict[int, int] = {}  # id(op) -> index into locs

    def _loc(self, op) -> int:
        if id(op) not in self._loc_index:
            self.locs.append(op.loc)
            self._loc_index[id(op)] = len(self.locs) - 1
        return self._loc_index[id(op)]

    def _join(self, p: int, other: List[int]) -> None:
        self.clock[p] = [max(a, b) for a, b in zip(self.clock[p], other)]


def enter(clocks: Optional[Clocks], partition: int) -> None:
    """Make the calling thread partition ``partition`` of ``clocks`` (``None``: outside partitions)."""
    _current.state = None if clocks is None else (clocks, partition)


def _state():
    return getattr(_current, "state", None)


def release(barrier, phase: int) -> None:
    """The running partition arrives on ``phase`` of ``barrier`` (an mbarrier's state)."""
    state = _state()
    if state is None:
        return
    clocks, p = state
    phases = clocks.phases.setdefault(id(barrier), {})
    old = phases.get(phase, [0] * len(clocks.names))
    phases[phase] = [max(a, b) for a, b in zip(old, clocks.clock[p])]
    clocks.clock[p][p] += 1


def acquire(barrier) -> None:
    """A wait of the running partition returned: it has seen every completed phase of ``barrier``."""
    state = _state()
    if state is None:
        return
    clocks, p = state
    for phase, released in clocks.phases.get(id(barrier), {}).items():
        if phase < barrier.completed:
            clocks._join(p, released)


def acquire_phase(barrier, phase: int) -> None:
    """The running partition passed ``phase`` of ``barrier`` (any object: a cluster barrier's
    cluster), which every partition released: its clock takes in theirs."""
    state = _state()
    if state is None:
        return
    clocks, p = state
    released = clocks.phases.get(id(barrier), {}).get(phase)
    if released is not None:
        clocks._join(p, released)


def on_access(buffer, index: np.ndarray, op, write: bool) -> None:
    """Record the running partition's access to bytes ``index`` of ``buffer``; report a race."""
    state = _state()
    if state is None:
        return
    clocks, p = state
    index = np.asarray(index).ravel()
    record = clocks.records.get(id(buffer))
    if record is None:
        record = clocks.records[id(buffer)] = _Record(buffer.data.size, len(clocks.names))
    seen = np.asarray(clocks.clock[p], np.int64)
    writers = record.writer[index]
    unordered = (writers >= 0) & (writers != p)
    if unordered.any():
        ticks = record.write_tick[index][unordered]
        late = ticks > seen[writers[unordered].astype(np.int64)]
        if late.any():
            k = int(np.flatnonzero(unordered)[np.flatnonzero(late)[0]])
            _report(clocks, op, buffer, p, int(writers[k]), int(record.write_loc[index[k]]),
                    "writes" if write else "reads", "wrote")
    if write:
        for q in range(len(clocks.names)):
            if q == p:
                continue
            late = record.read_tick[q][index] > seen[q]
            if late.any():
                k = int(np.flatnonzero(late)[0])
                _report(clocks, op, buffer, p, q, int(record.read_loc[q][index[k]]), "overwrites", "read")
        record.writer[index] = p
        record.write_tick[index] = seen[p]
        record.write_loc[index] = clocks._loc(op)
    else:
        record.read_tick[p][index] = seen[p]
        record.read_loc[p][index] = clocks._loc(op)


def _report(clocks: Clocks, op, buffer, p: int, q: int, loc_index: int, verb: str, their: str) -> None:
    me, other = clocks.names[p], clocks.names[q]
    loc = clocks.locs[loc_index]
    where = f" at line {loc.line}" if loc is not None else ""
    raise InterpreterError(
        f"race: {op.name} in {me} {verb} {buffer.describe()}, which {other} {their}{where}, and nothing orders "
        f"the two: no mbarrier.wait in {me} has observed an arrival that {other} made after that access. Make "
        f"{other} arrive on an mbarrier once it is done with the bytes, and wait for that phase in {me} first",
        op.loc, [(f"{other} {their} the bytes here", loc)] if loc is not None else [])
