"""Timelines of interpreted kernels: the partitions' events as a Chrome / Perfetto trace.

While a :class:`Trace` records, every program instance the interpreter runs (once per
schedule of its warp-specialize partitions, :mod:`.schedules`) becomes a *process* of the
trace, and the program's warps — or each of its partitions — a *thread* (a lane): the
default partition shares lane 0 with the code before and after ``warp_specialize``,
worker partition ``k`` is lane ``k + 1``.  The rules of the asynchronous units record:

* each partition as a slice on its lane, from the fork to the partition's end;
* ``mbarrier.wait`` as a slice (nested in its partition's) from the wait's start to its return (``blocked`` says whether
  the partition had to hand over meanwhile), with the barrier and the parity;
* ``mbarrier.arrive`` / ``mbarrier.expect`` and every completed barrier phase as instants;
* TMA loads and stores, cp.async copies and asynchronous ``warpgroup_mma`` groups as async
  spans from issue to landing (loads, copies) or retirement (``store_wait``,
  ``warpgroup_mma_wait``), those waits and ``thread_barrier`` as instants.

Every event's ``args`` hold its kind (``"mbarrier.wait"``, ``"tma.load"`` …), the op's name,
its ``location`` (``file:line``) and the source line's text.

**The clock is logical**: the interpreter has no notion of cycles.  ``ts`` counts the ops
the program has executed so far, all partitions together (one op, one step; viewers show a
step as 1 µs), so the axis is the order of the interpreter's schedule: one partition runs
at a time, and a wait's slice lasts until the schedule resumed its partition after the
phase completed.  A cycle model is a separate, later concern.

Recording is off unless asked for: ``GLUONKIT_INTERPRET_TRACE=path.json`` records every
interpreted launch of the process into ``path.json`` (rewritten after each launch, so a
launch that fails — a deadlock — is in it too), and :func:`recording` records the launches
inside a ``with`` block; :func:`~.engine.run_grid` takes a ``trace`` directly.  When off,
a rule pays one ``is None`` test per asynchronous op.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional

__all__ = ["Trace", "Lane", "Span", "recording", "active_trace", "view_name", "TRACE_ENV"]

TRACE_ENV = "GLUONKIT_INTERPRET_TRACE"
_ASSIGNED = re.compile(r"\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")


class Trace:
    """The events of the interpreted launches recorded so far (see the module docstring).

    ``path``: where :meth:`flush` writes the trace (None: kept in memory only).
    """

    def __init__(self, path: Optional[str] = None):
        self.path = path
        self.events: List[dict] = []
        self.metadata: List[dict] = []
        self.launches = 0
        self._launch = ""
        self._pids = itertools.count(1)
        self._ids = itertools.count(1)

    def start_launch(self, kernel: str, grid) -> None:
        """A launch of ``kernel`` over ``grid`` begins: its programs' processes are named after it."""
        self.launches += 1
        self._launch = f"#{self.launches} {kernel}"

    def program_run(self, pid, schedule: Optional[str]) -> "Lane":
        """A new process for one run of program ``pid`` (under ``schedule``); its lane 0."""
        run = _Run(self, next(self._pids))
        name = f"{self._launch} · program {tuple(pid)}" + (f" · {schedule}" if schedule else "")
        self._meta(run.pid, None, "process_name", name)
        self._meta(run.pid, None, "process_sort_index", run.pid)
        run.lane_names[0] = self._meta(run.pid, 0, "thread_name", "program")
        return Lane(run, 0)

    def _meta(self, pid: int, tid: Optional[int], what: str, value) -> dict:
        key = "sort_index" if what.endswith("sort_index") else "name"
        event = {"ph": "M", "name": what, "pid": pid, "args": {key: value}}
        if tid is not None:
            event["tid"] = tid
        self.metadata.append(event)
        return event

    def to_json(self) -> dict:
        """The trace as Chrome's trace-event JSON object (``{"traceEvents": [...], ...}``)."""
        return {
            "traceEvents": self.metadata + self.events,
            "otherData": {
                "producer": "gluonkit CPU interpreter",
                "clock": "logical: ts counts the ops each program has executed, all partitions together "
                         "(the interpreter's schedule order, not cycles); 1 step is shown as 1 us",
            },
        }

    def save(self, path: str) -> None:
        """Write the trace to ``path`` as JSON (load it in ui.perfetto.dev or chrome://tracing)."""
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=None, separators=(",", ":"))
            f.write("\n")

    def flush(self) -> None:
        """Write the trace to its ``path``, if it has one."""
        if self.path:
            self.save(self.path)


class _Run:
    """One process: a program instance under one schedule, with its logical clock."""

    __slots__ = ("trace", "pid", "clock", "lane_names")

    def __init__(self, trace: Trace, pid: int):
        self.trace, self.pid, self.clock = trace, pid, 0
        self.lane_names: Dict[int, dict] = {}  # lane -> its thread_name metadata event


class Lane:
    """One lane (thread) of a program run: where a partition's, or the program's, events go."""

    __slots__ = ("run", "tid")

    def __init__(self, run: _Run, tid: int):
        self.run, self.tid = run, tid

    def advance(self, program, op) -> None:
        """Before every op (a ``Program.progress`` hook): the clock moves one step."""
        self.run.clock += 1

    def partition(self, index: int, name: str, num_warps: int, op) -> "Lane":
        """The lane of partition ``index`` of the ``warp_specialize`` ``op`` in this run; the
        partition's slice on it begins (:meth:`partition_end` ends it), its waits nest inside."""
        label = f"{name.removeprefix('the ')} ({num_warps} warp{'s' if num_warps != 1 else ''})"
        named = self.run.lane_names.get(index)
        if named is not None:  # lane 0 becomes the default partition's once partitions exist
            named["args"]["name"] = label
        else:
            self.run.lane_names[index] = self.run.trace._meta(self.run.pid, index, "thread_name", label)
        lane = Lane(self.run, index)
        lane.begin(label, "partition", op, warps=num_warps)
        return lane

    def partition_end(self, op) -> None:
        """The partition on this lane has ended (returned from its function)."""
        self.end(self.run.lane_names[self.tid]["args"]["name"], "partition", op)

    def _event(self, ph: str, name: str, kind: str, op, args: dict) -> dict:
        loc = op.loc
        event = {"ph": ph, "name": name, "cat": kind.split(".")[0], "pid": self.run.pid, "tid": self.tid,
                 "ts": self.run.clock,
                 "args": {"kind": kind, "op": op.name, "location": f"{loc.file}:{loc.line}",
                          "source": loc.source_line.strip(), **args}}
        self.run.trace.events.append(event)
        return event

    def instant(self, name: str, kind: str, op, **args) -> None:
        """A point event (an arrival, an expect, a completed phase, a wait on a group …)."""
        self._event("i", name, kind, op, args)["s"] = "t"

    def begin(self, name: str, kind: str, op, **args) -> None:
        """The start of a slice on this lane (a wait); :meth:`end` closes it."""
        self._event("B", name, kind, op, args)

    def end(self, name: str, kind: str, op, **args) -> None:
        self._event("E", name, kind, op, args)

    def start(self, name: str, kind: str, op, **args) -> "Span":
        """An asynchronous operation issued here (a copy, an MMA group): its span until :meth:`Span.finish`."""
        span = Span(self, name, kind, op, next(self.run.trace._ids))
        self._event("b", name, kind, op, args)["id"] = span.id
        return span


class Span:
    """One asynchronous operation in flight, from issue to :meth:`finish`."""

    __slots__ = ("lane", "name", "kind", "op", "id")

    def __init__(self, lane: Lane, name: str, kind: str, op, span_id: int):
        self.lane, self.name, self.kind, self.op, self.id = lane, name, kind, op, span_id

    def finish(self, **args) -> None:
        """It landed or retired now (in the clock of the program that issued it)."""
        self.lane._event("e", self.name, self.kind, self.op, args)["id"] = self.id


def view_name(ref, ty) -> str:
    """A readable name for a shared-memory view: the variable its allocation was assigned to
    and the indices of the leading dimensions the view dropped (``ready[1]``, ``bufs[0]``),
    else ``smem@line N``."""
    buffer = ref.buffer
    match = _ASSIGNED.match(buffer.loc.source_line or "")
    name = match.group(1) if match else f"smem@line {buffer.loc.line}"
    shape = buffer.ty.shape
    dropped = len(shape) - len(ty.shape)
    if dropped <= 0:
        return name
    stride = math.prod(shape[dropped:])  # leading dimensions stack whole tiles, row-major
    offset = ref.base // ty.element.itemsize
    index = []
    for size in reversed(shape[:dropped]):
        index.append(offset // stride % size)
        stride *= size
    return f"{name}[{', '.join(str(i) for i in reversed(index))}]"


_recording: List[Trace] = []
_by_path: Dict[str, Trace] = {}


@contextmanager
def recording(path: Optional[str] = None) -> Iterator[Trace]:
    """Record the interpreted launches inside the ``with`` block; the trace is written to
    ``path`` (if given) after each launch and when the block ends::

        with recording("producer_consumer.json") as trace:
            kernel[grid](...)
    """
    trace = Trace(path)
    _recording.append(trace)
    try:
        yield trace
    finally:
        _recording.remove(trace)
        trace.flush()


def active_trace() -> Optional[Trace]:
    """The trace an interpreted launch records into: the innermost :func:`recording`, else the
    one ``GLUONKIT_INTERPRET_TRACE`` names (one per path, for the whole process), else None."""
    if _recording:
        return _recording[-1]
    path = os.environ.get(TRACE_ENV, "").strip()
    if not path:
        return None
    trace = _by_path.get(path)
    if trace is None:
        trace = _by_path[path] = Trace(path)
    return trace
