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
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence

import numpy as np

from ..lower.instrument import DEFAULT_CAPACITY, ENTRY_BYTES, GLOBAL_NAME, SMID_SHIFT, VALID, timeline_options
from . import driver

__all__ = ["MeasuredTimeline", "measure", "measuring", "active_recorder"]

# plot(): waits are boxes and other events ticks, coloured by kind like the interpreter's picture.
_PLOT_COLOURS = {
    "mbarrier.wait": "#d62728", "thread_barrier": "#bcbd22", "tma.store_wait": "#2ca02c", "cp_async.wait": "#17becf",
    "wgmma.wait": "#9467bd", "tma.load": "#1f77b4", "tma.store": "#2ca02c", "wgmma": "#9467bd", "cp_async": "#17becf",
    "mbarrier.arrive": "#ff7f0e", "mbarrier.expect": "#8c564b", "kernel.start": "#000000", "kernel.end": "#000000",
    "partition.start": "#000000", "partition.end": "#000000",
}
_STARTS, _ENDS = ("kernel.start", "partition.start"), ("kernel.end", "partition.end")
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


class Slice(NamedTuple):
    """One wait of a warp: its kind, begin and end (ns) and the begin's event-table entry."""

    kind: str
    start: float
    end: float
    info: dict


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
    def decode(cls, kernel: str, grid: Sequence[int], metadata: dict, raw: np.ndarray,
               capacity: Optional[int] = None) -> "MeasuredTimeline":
        """From the compiled kernel's ``metadata`` and the buffer's bytes ``raw`` of ``capacity`` entries per
        warp (by default the capacity the kernel was compiled with)."""
        capacity = capacity or metadata["timeline"]["capacity"]
        warps_per_cta = metadata["num_threads"] // 32
        entries = raw.view(_ENTRY).reshape(capacity, -1).T  # interleaved: entry slot * rows + row
        result = cls(kernel, tuple(grid), metadata["timeline"]["events"], list(metadata.get("partitions") or []),
                     warps_per_cta)
        written = [int(((row["tag"] & VALID) != 0).sum()) for row in entries]
        rows = [_used(row) for row in entries]
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
            sm = (int(used["tag"][first]) & (VALID - 1)) >> SMID_SHIFT  # anchors carry %smid
            result.warps.append(WarpEvents(cta, warp, sm, times, used["tag"] & ((1 << SMID_SHIFT) - 1),
                                           written[index] == capacity))
        return result

    def to_json(self, ctas: Optional[Sequence[int]] = None, start_ns: float = 0.0,
                end_ns: float = math.inf) -> dict:
        """A JSON-ready copy of the selected CTAs' events (all by default) from ``start_ns`` to
        ``end_ns``, times rounded to the nanosecond: a measurement kept to be drawn again without
        the GPU (:meth:`from_json`)."""
        warps = []
        for w in self.warps:
            keep = (w.times >= start_ns) & (w.times <= end_ns)
            if (ctas is None or w.cta in ctas) and keep.any():
                warps.append({"cta": w.cta, "warp": w.warp, "sm": w.sm, "full": bool(w.full),
                              "times": np.rint(w.times[keep]).astype(np.int64).tolist(),
                              "events": w.events[keep].astype(np.int64).tolist()})
        return {"kernel": self.kernel, "grid": list(self.grid), "table": self.table, "partitions": self.partitions,
                "warps_per_cta": self.warps_per_cta, "clock_ghz": self.clock_ghz, "warps": warps}

    @classmethod
    def from_json(cls, data: dict) -> "MeasuredTimeline":
        """The timeline :meth:`to_json` wrote."""
        result = cls(data["kernel"], tuple(data["grid"]), data["table"], data["partitions"], data["warps_per_cta"],
                     clock_ghz=data["clock_ghz"])
        result.warps = [WarpEvents(w["cta"], w["warp"], w["sm"], np.array(w["times"], np.float64),
                                   np.array(w["events"], np.int64), w["full"]) for w in data["warps"]]
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
                                   "source": info["source"], "blocked": True}}
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
        from ..interpret.timeline import render_svg  # the interpreter loads on first use, not with gluonkit

        events = [e for e in self.chrome_events(ctas, unit_ns=1.0)
                  if e["ph"] == "M" or start_ns <= e["ts"] <= end_ns]
        return render_svg({"traceEvents": events}, width=width)

    def plot(self, ax=None, ctas: Sequence[int] = (0,), start_ns: float = 0.0, end_ns: float = math.inf,
             legend: bool = True):
        """Draw the selected CTAs with matplotlib (an optional dependency, ``pip install gluonkit[plot]``;
        :meth:`svg` needs none) and return the axes: one row per warp, named with its CTA and
        partition; each wait a box coloured by its kind, each other event a tick; the time axis in µs,
        cropped to ``start_ns``–``end_ns``.  ``ax``: the axes to draw into (a new figure by default)."""
        try:
            import matplotlib.pyplot as plt
            from matplotlib.patches import Patch
        except ImportError:
            raise ImportError("MeasuredTimeline.plot needs matplotlib (pip install matplotlib, or gluonkit[plot]); "
                              "MeasuredTimeline.svg draws the same picture without it") from None
        warps = [w for w in self.warps if w.cta in set(ctas)]
        if ax is None:
            _, ax = plt.subplots(figsize=(12, 1.2 + 0.32 * len(warps)))
        end_ns = min(end_ns, max((float(w.times[-1]) for w in warps), default=start_ns))
        us = 1e-3
        kinds = set()
        for row, w in enumerate(warps):
            y = len(warps) - 1 - row
            inside = (w.times >= start_ns) & (w.times <= end_ns)
            if inside.any():
                ax.broken_barh([(max(float(w.times[0]), start_ns) * us,
                                 (min(float(w.times[-1]), end_ns) - max(float(w.times[0]), start_ns)) * us)],
                               (y - 0.4, 0.8), color="#eeeeee")
            for s in self.slices(w):
                if s.end >= start_ns and s.start <= end_ns:
                    lo, hi = max(s.start, start_ns), min(s.end, end_ns)
                    ax.broken_barh([(lo * us, max(hi - lo, 1.0) * us)], (y - 0.35, 0.7),
                                   color=_PLOT_COLOURS.get(s.kind, "#7f7f7f"))
                    kinds.add(s.kind)
            ticks = [(float(t), self.table[int(e)]["kind"]) for t, e in zip(w.times[inside], w.events[inside])
                     if self.table[int(e)]["phase"] == "instant"]
            for kind in {k for _, k in ticks}:
                ax.vlines([t * us for t, k in ticks if k == kind], y - 0.45, y + 0.45, linewidth=0.8,
                          color=_PLOT_COLOURS.get(kind, "#000000"))
                kinds.add(kind)
        ax.set_yticks(range(len(warps)))
        ax.set_yticklabels([f"CTA {w.cta} · warp {w.warp} ({self.partition_of(w.warp)})" for w in reversed(warps)],
                           fontsize=7)
        ax.set_ylim(-0.6, len(warps) - 0.4)
        ax.set_xlim(start_ns * us, end_ns * us)
        ax.set_xlabel("µs from the launch's first event")
        ax.set_title(f"{self.kernel} (measured, {self.clock_ghz:.2f} GHz)", fontsize=9)
        if legend and kinds:
            ax.legend(handles=[Patch(color=_PLOT_COLOURS.get(k, "#7f7f7f"), label=k) for k in sorted(kinds)],
                      fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return ax

    def problems(self) -> List[str]:
        """What is wrong with the events (an empty list when they are well-formed): every warp starts
        and ends at an anchor, its times never go back, every wait's begin is followed at once by its
        end (a wait holds no other record), every partition of the kernel has warps, no row filled up."""
        found = []
        if self.dropped:
            found.append("some warp's row filled up: later events were dropped (raise the capacity)")
        missing = {p["partition"] for p in self.partitions} - {self.partition_of(w.warp) for w in self.warps}
        if missing:
            found.append(f"no events from {sorted(missing)}")
        for w in self.warps:
            where = f"CTA {w.cta} warp {w.warp}"
            info = [self.table[int(e)] for e in w.events]
            if info[0]["kind"] not in _STARTS or info[-1]["kind"] not in _ENDS:
                found.append(f"{where}: starts with {info[0]['kind']}, ends with {info[-1]['kind']}")
            back = np.flatnonzero(np.diff(w.times) < 0)
            if len(back):
                found.append(f"{where}: time goes back after event {int(back[0])}")
            for i, event in enumerate(info):
                if event["phase"] == "begin":
                    after = info[i + 1] if i + 1 < len(info) else None
                    if after is None or after["phase"] != "end" or after["location"] != event["location"]:
                        found.append(f"{where}: the {event['kind']} at {event['location']} (event {i}) has no end")
                elif event["phase"] == "end" and (i == 0 or info[i - 1]["phase"] != "begin"):
                    found.append(f"{where}: an end of {event['kind']} at {event['location']} (event {i}) "
                                 "has no begin")
        return found

    def slices(self, w: WarpEvents) -> List[Slice]:
        """Warp ``w``'s waits: each begin paired with the next end of its kind (an end without a begin,
        or a begin whose end was dropped, is left out)."""
        out: List[Slice] = []
        open_at: Dict[str, tuple] = {}
        for t, event in zip(w.times, w.events):
            info = self.table[int(event)]
            if info["phase"] == "begin":
                open_at[info["kind"]] = (float(t), info)
            elif info["phase"] == "end" and info["kind"] in open_at:
                start, begin = open_at.pop(info["kind"])
                out.append(Slice(info["kind"], start, float(t), begin))
        return out

    def summary(self) -> Dict[str, Dict[str, float]]:
        """Per partition: mean ns per warp spent in each kind of wait, and the warp's span."""
        totals: Dict[str, Dict[str, List[float]]] = {}
        for w in self.warps:
            per_kind: Dict[str, float] = {}
            for s in self.slices(w):
                per_kind[s.kind] = per_kind.get(s.kind, 0.0) + s.end - s.start
            per_kind["span"] = float(w.times[-1] - w.times[0])
            group = totals.setdefault(self.partition_of(w.warp), {})
            for kind, ns in per_kind.items():
                group.setdefault(kind, []).append(ns)
        return {part: {kind: float(np.mean(v)) for kind, v in kinds.items()} for part, kinds in totals.items()}


def _used(row: np.ndarray) -> np.ndarray:
    """The events a warp wrote (entries whose tag has :data:`VALID` set), in slot order, a wait's
    entry split into its begin and end (see :func:`_split_pairs`)."""
    return _split_pairs(row[(row["tag"] & VALID) != 0])


def _split_pairs(used: np.ndarray) -> np.ndarray:
    """Each wait's entry ``{begin clock, begin tag | VALID, end clock, end tag}`` (its first eight bytes have bit
    63 set, which no ``%globaltimer`` has) as two events, the begin then the end; other entries as they are."""
    pair = (used["globaltimer"] >> np.uint64(63)).astype(bool)
    if not pair.any():
        return used
    ends = np.cumsum(1 + pair) - 1
    out = np.zeros(len(used) + int(pair.sum()), used.dtype)
    out[ends] = used
    out["globaltimer"][ends[pair]] = 0
    first_half = used["globaltimer"][pair]
    out["clock"][ends[pair] - 1] = (first_half & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    out["tag"][ends[pair] - 1] = (first_half >> np.uint64(32)).astype(np.uint32)
    return out


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

    def __init__(self, capacity: int, events: str):
        self.options = timeline_options((capacity, events))
        # The instrumented code does not depend on the capacity (the host writes the limit before each
        # launch), so every capacity shares one build per level.
        self.build = events
        self.timelines: List[MeasuredTimeline] = []

    def launch(self, entry, grid: Sequence[int], values: Sequence) -> None:
        """Launch the loaded instrumented ``entry`` with a fresh event buffer, then decode the buffer."""
        metadata = entry.compiled.metadata
        ctas = math.prod(tuple(grid)) * entry.num_ctas  # a cluster launch has num_ctas CTAs per program
        rows = ctas * (metadata["num_threads"] // 32)
        limit = rows * self.options.capacity
        if limit + rows >= 1 << 32:
            raise ValueError(f"measuring: {rows} warps x capacity {self.options.capacity} is more than the 2**32 "
                             "events one launch can record: lower the capacity or measure a smaller grid")
        nbytes = limit * ENTRY_BYTES
        buffer = driver.DeviceBuffer(max(nbytes, ENTRY_BYTES))
        try:
            buffer.zero()
            address = entry.kernel.module.global_address(GLOBAL_NAME)
            driver.copy_to_device(address, np.array([buffer.ptr, rows | limit << 32], np.uint64))
            entry.run(grid, values)
            driver.synchronize()
            raw = np.empty(nbytes, np.uint8)
            buffer.copy_to_host(raw)
        finally:
            buffer.free()
        self.timelines.append(MeasuredTimeline.decode(entry.compiled.name, grid, metadata, raw, self.options.capacity))


_active: Optional[Recorder] = None


def active_recorder() -> Optional[Recorder]:
    """The recorder of the innermost :func:`measuring` block, or ``None``."""
    return _active


@contextmanager
def measuring(capacity: int = DEFAULT_CAPACITY, events: str = "waits") -> Iterator[List[MeasuredTimeline]]:
    """Measure every GPU launch inside the block; yields the list their timelines are appended to.

    ``capacity`` is the number of events each warp can record (16 bytes each); a warp with more
    keeps its first ``capacity`` (:attr:`MeasuredTimeline.dropped` says so).  ``events``:
    ``"anchors"`` records each warp's and partition's start and end, ``"waits"`` (the default)
    also the barrier waits, ``"all"`` also the MMA waits, TMA and MMA issues, arrivals and
    expects (:data:`gluonkit.lower.instrument.LEVELS`; the cost of each: ``docs/timelines.rst``).
    """
    global _active
    outer, _active = _active, Recorder(capacity, events)
    try:
        yield _active.timelines
    finally:
        _active = outer


def measure(kernel, grid, *args, capacity: int = DEFAULT_CAPACITY, events: str = "waits",
            **kwargs) -> MeasuredTimeline:
    """Launch ``kernel[grid](*args, **kwargs)`` once, instrumented (:func:`measuring`'s ``capacity``
    and ``events``), and return its timeline."""
    with measuring(capacity, events) as timelines:
        kernel[grid](*args, **kwargs)
    if not timelines:
        raise RuntimeError(f"measure: {kernel.__name__} did not run on the GPU (an empty grid, or the interpreter: "
                           "measured timelines need a GPU; the interpreter writes its own, see "
                           "gluonkit.interpret.trace)")
    return timelines[-1]
