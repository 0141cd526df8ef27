"""Measured timelines: run a kernel once with event records on the GPU and get its trace back.

``measure(kernel, grid, *args, **kwargs)`` launches ``kernel[grid](*args, **kwargs)`` built with the
compiler's instrumentation (:mod:`gluonkit.lower.instrument`): every warp stamps its waits
(begin/end), TMA and wgmma issues, arrivals and its start/end with ``%globaltimer`` and ``%clock``
into a device buffer, which comes back as a :class:`MeasuredTimeline`::

    tl = measure(ws_gemm_kernel, grid, a_desc, b_desc, c_desc, M, N, K, STAGES=4, ...)
    tl.save_chrome("gemm.json")        # Perfetto / chrome://tracing
    open("gemm.svg", "w").write(tl.svg(ctas=[0, 1]))
    print(tl.summary())                # per partition: time in each kind of wait

The trace uses the interpreter's event vocabulary (:mod:`gluonkit.interpret.trace`): one
process per CTA (named with its SM), one lane per warp (named with its partition), waits as
slices, issues and arrivals as instants, each with the source location and line, so the
interpreter's picture (:func:`gluonkit.interpret.timeline.render_svg`) draws both kinds.
Inside ``with measuring() as timelines:`` every GPU launch is measured.

Time: each warp's events are placed by ``%globaltimer`` (nanoseconds, common to all SMs) at its
first anchor (its start) plus its ``%clock`` cycles since, converted with the SM clock rate that the
anchors' (globaltimer, clock) pairs of the whole launch give.  Only anchors read ``%globaltimer``:
it is slow to read and, on some GPUs, ticks too coarsely to separate a pipeline's events.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

from ..interpret.timeline import render_svg
from ..lower.instrument import DEFAULT_CAPACITY, ENTRY_BYTES, GLOBAL_NAME, SMID_SHIFT, VALID, timeline_capacity
from . import driver

__all__ = ["MeasuredTimeline", "measure", "measuring", "active_recorder"]

_ENTRY = np.dtype([("globaltimer", "<u8"), ("clock", "<u4"), ("tag", "<u4")])
assert _ENTRY.itemsize == ENTRY_BYTES


@dataclass
class WarpEvents:
    """One warp's decoded events: times in ns from the launch's first event, table ids, its SM."""

    cta: int
    warp: int
    sm: int
    times: np.ndarray
    events: np.ndarray
    full: bool  # the row filled up: later events were dropped


@dataclass
class MeasuredTimeline:
    """The decoded event buffer of one instrumented launch (see the module docstring)."""

    kernel: str
    grid: tuple
    table: List[dict]
    partitions: List[dict]
    warps_per_cta: int
    warps: List[WarpEvents] = field(default_factory=list)
    clock_ghz: float = float("nan")

    # ------------------------------------------------------------------ decoding
    @classmethod
    def decode(cls, kernel: str, grid: Sequence[int], metadata: dict, raw: np.ndarray) -> "MeasuredTimeline":
        """From the compiled kernel's ``metadata`` and the buffer's bytes ``raw``."""
        capacity = metadata["timeline"]["capacity"]
        warps_per_cta = metadata["num_threads"] // 32
        entries = raw.view(_ENTRY).reshape(-1, warps_per_cta, capacity)
        result = cls(kernel, tuple(grid), metadata["timeline"]["events"], list(metadata.get("partitions") or []),
                     warps_per_cta)
        rows = [_used(row) for row in entries.reshape(-1, capacity)]
        result.clock_ghz = _clock_rate(rows)
        start = min((int(row["globaltimer"][_anchors(row)[0]]) for row in rows if len(_anchors(row))), default=0)
        for index, used in enumerate(rows):
            anchors = _anchors(used)
            if not len(anchors):
                continue
            first = anchors[0]
            cycles = (used["clock"].astype(np.int64) - int(used["clock"][first]) + (1 << 31)) % (1 << 32) - (1 << 31)
            times = (int(used["globaltimer"][first]) - start) + cycles / result.clock_ghz
            cta, warp = divmod(index, warps_per_cta)
            result.warps.append(WarpEvents(cta, warp, int((int(used["tag"][0]) & (VALID - 1)) >> SMID_SHIFT), times,
                                           used["tag"] & ((1 << SMID_SHIFT) - 1), len(used) == capacity))
        return result

    def partition_of(self, warp: int) -> str:
        """The partition physical warp ``warp`` runs ("default", "worker 0" …), or "kernel"."""
        for p in self.partitions:
            if p["first_warp"] <= warp < p["first_warp"] + p["num_warps"]:
                return p["partition"]
        return "kernel"

    @property
    def dropped(self) -> bool:
        """Whether some warp recorded more events than its row holds (raise ``capacity``)."""
        return any(w.full for w in self.warps)

    # ------------------------------------------------------------------ outputs
    def chrome_events(self, ctas: Optional[Sequence[int]] = None, unit_ns: float = 1000.0) -> List[dict]:
        """Chrome trace events (``ts`` in µs by default; ``unit_ns=1`` gives ns) for ``ctas`` (all by default)."""
        out: List[dict] = []
        wanted = None if ctas is None else set(ctas)
        for w in self.warps:
            if wanted is not None and w.cta not in wanted:
                continue
            if not any(e["pid"] == w.cta and e["name"] == "process_name" for e in out if e["ph"] == "M"):
                out.append({"ph": "M", "pid": w.cta, "name": "process_name",
                            "args": {"name": f"CTA {w.cta} (SM {w.sm})"}})
                out.append({"ph": "M", "pid": w.cta, "name": "process_sort_index", "args": {"sort_index": w.cta}})
            out.append({"ph": "M", "pid": w.cta, "tid": w.warp, "name": "thread_name",
                        "args": {"name": f"warp {w.warp} ({self.partition_of(w.warp)})"}})
            for t, event in zip(w.times, w.events):
                info = self.table[int(event)]
                phase = {"begin": "B", "end": "E", "instant": "i"}[info["phase"]]
                record = {"ph": phase, "pid": w.cta, "tid": w.warp, "ts": float(t) / unit_ns,
                          "name": info["kind"], "cat": info["kind"],
                          "args": {"kind": info["kind"], "op": info["op"], "location": info["location"],
                                   "text": info["text"], "blocked": True}}
                if phase == "i":
                    record["s"] = "t"
                out.append(record)
        return out

    def save_chrome(self, path: str, ctas: Optional[Sequence[int]] = None) -> None:
        """Write the trace as a Chrome / Perfetto JSON file."""
        with open(path, "w") as f:
            json.dump({"traceEvents": self.chrome_events(ctas), "displayTimeUnit": "ns"}, f)

    def svg(self, ctas: Sequence[int] = (0,), width: int = 960, start_ns: float = 0.0,
            end_ns: float = math.inf) -> str:
        """The interpreter's picture of the selected CTAs, on a nanosecond axis, cropped to the events
        from ``start_ns`` to ``end_ns`` (a wait cut by the window's end is drawn as open)."""
        events = [e for e in self.chrome_events(ctas, unit_ns=1.0)
                  if e["ph"] == "M" or start_ns <= e["ts"] <= end_ns]
        return render_svg({"traceEvents": events}, width=width)

    def summary(self) -> Dict[str, Dict[str, float]]:
        """Per partition: mean ns per warp spent in each kind of wait, and the warp's span."""
        totals: Dict[str, Dict[str, List[float]]] = {}
        for w in self.warps:
            per_kind: Dict[str, float] = {}
            open_at: Dict[str, float] = {}
            for t, event in zip(w.times, w.events):
                info = self.table[int(event)]
                if info["phase"] == "begin":
                    open_at[info["kind"]] = float(t)
                elif info["phase"] == "end" and info["kind"] in open_at:
                    per_kind[info["kind"]] = per_kind.get(info["kind"], 0.0) + float(t) - open_at.pop(info["kind"])
            per_kind["span"] = float(w.times[-1] - w.times[0])
            group = totals.setdefault(self.partition_of(w.warp), {})
            for kind, ns in per_kind.items():
                group.setdefault(kind, []).append(ns)
        return {part: {kind: float(np.mean(v)) for kind, v in kinds.items()} for part, kinds in totals.items()}


def _used(row: np.ndarray) -> np.ndarray:
    """The entries a warp wrote (their tag has :data:`VALID` set), in slot order."""
    return row[(row["tag"] & VALID) != 0]


def _anchors(used: np.ndarray) -> np.ndarray:
    """Indices of the entries that carry ``%globaltimer`` (starts and ends)."""
    return np.flatnonzero(used["globaltimer"])


def _clock_rate(rows: List[np.ndarray]) -> float:
    """SM cycles per ns: (clock, globaltimer) of each warp's first and last anchors, pooled."""
    cycles, nanoseconds = 0, 0
    for used in rows:
        anchors = _anchors(used)
        if len(anchors) < 2:
            continue
        first, last = anchors[0], anchors[-1]
        cycles += (int(used["clock"][last]) - int(used["clock"][first])) % (1 << 32)
        nanoseconds += int(used["globaltimer"][last]) - int(used["globaltimer"][first])
    return cycles / nanoseconds if nanoseconds > 0 and cycles > 0 else 1.0


# ---------------------------------------------------------------------------- recording
class Recorder:
    """While active, :mod:`gluonkit.runtime.gpu` builds instrumented kernels and launches them here."""

    def __init__(self, capacity: int):
        self.capacity = timeline_capacity(capacity)
        self.timelines: List[MeasuredTimeline] = []

    def launch(self, entry, grid: Sequence[int], values: Sequence) -> None:
        """Launch the loaded instrumented ``entry`` with a fresh event buffer, then decode the buffer."""
        metadata = entry.compiled.metadata
        ctas = math.prod(tuple(grid)) * entry.num_ctas  # a cluster launch has num_ctas CTAs per program
        nbytes = ctas * (metadata["num_threads"] // 32) * self.capacity * ENTRY_BYTES
        buffer = driver.DeviceBuffer(max(nbytes, ENTRY_BYTES))
        try:
            buffer.zero()
            address = entry.kernel.module.global_address(GLOBAL_NAME)
            driver.copy_to_device(address, np.array([buffer.ptr], np.uint64))
            entry.run(grid, values)
            driver.synchronize()
            raw = np.empty(nbytes, np.uint8)
            buffer.copy_to_host(raw)
        finally:
            buffer.free()
        self.timelines.append(MeasuredTimeline.decode(entry.compiled.name, grid, metadata, raw))


_active: Optional[Recorder] = None


def active_recorder() -> Optional[Recorder]:
    """The recorder of the innermost :func:`measuring` block, or ``None``."""
    return _active


@contextmanager
def measuring(capacity: int = DEFAULT_CAPACITY) -> Iterator[List[MeasuredTimeline]]:
    """Measure every GPU launch inside the block; yields the list their timelines are appended to.

    ``capacity`` is the number of events each warp can record (16 bytes each); a warp with more
    keeps its first ``capacity`` (:attr:`MeasuredTimeline.dropped` says so).
    """
    global _active
    outer, _active = _active, Recorder(capacity)
    try:
        yield _active.timelines
    finally:
        _active = outer


def measure(kernel, grid, *args, capacity: int = DEFAULT_CAPACITY, **kwargs) -> MeasuredTimeline:
    """Launch ``kernel[grid](*args, **kwargs)`` once, instrumented, and return its timeline."""
    with measuring(capacity) as timelines:
        kernel[grid](*args, **kwargs)
    if not timelines:
        raise RuntimeError(f"measure: {kernel.__name__} did not run on the GPU (an empty grid, or the interpreter: "
                           "measured timelines need a GPU; the interpreter writes its own, see "
                           "gluonkit.interpret.trace)")
    return timelines[-1]
