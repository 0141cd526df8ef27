"""A picture of an interpreter trace (:mod:`.trace`): one SVG, one lane per partition.

``render_svg(trace)`` draws every process of a trace (a program instance under one schedule)
as a group of lanes on a common step axis, one lane per partition (or per program without
partitions):

* a lane's grey band is where its partition exists (from the fork to its end; the program's
  whole run for lane 0);
* an ``mbarrier.wait`` is a box from its start to its return.  Its dark part is the partition
  *blocked*: the phase it waits for had not completed yet — a bubble.  Its light part (only a
  wait that blocked has one) runs from the phase's completion to the return: the partition
  could go on but the interpreter was running another one, an artefact of its schedule
  (one partition at a time), not of the kernel;
* copies and MMA groups in flight (TMA loads until they land, TMA stores until ``store_wait``
  retires them, cp.async copies, ``warpgroup_mma`` groups) are boxes in rows under the lane
  of the partition that issued them;
* arrivals, expects, completed phases, ``thread_barrier`` and the group waits are ticks.

Every shape has a tooltip (SVG ``<title>``) with the event, its steps, the source location
and the line's text.  The SVG is written as text, with no dependency: ``python -m
gluonkit.interpret.timeline trace.json -o trace.svg [--select "program (0, 0, 0)"]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from html import escape as _html_escape
from typing import Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["render_svg", "main"]


def _escape(text: str) -> str:
    """``&``, ``<`` and ``>`` escaped for SVG text (html's escaper: xml.sax's pulls in urllib and http)."""
    return _html_escape(text, quote=False)


_LEFT, _RIGHT, _TOP = 190, 16, 28
_LANE, _ROW, _GAP = 20, 11, 2
_COLOURS = {
    "blocked": "#d62728", "ready": "#f4b6b6", "wait.none": "#7f7f7f",
    "tma.load": "#1f77b4", "tma.store": "#2ca02c", "cp_async": "#17becf", "wgmma": "#9467bd",
    "tcgen05_mma": "#e377c2",
    "mbarrier.arrive": "#ff7f0e", "mbarrier.expect": "#8c564b", "mbarrier.phase": "#000000",
    "thread_barrier": "#bcbd22", "tma.store_wait": "#2ca02c", "wgmma.wait": "#9467bd", "wgmma.sync": "#9467bd",
    "cp_async.commit": "#17becf", "cp_async.wait": "#17becf",
}
_LEGEND = [("blocked", "wait, blocked (a bubble)"), ("ready", "wait, phase complete, not yet rescheduled"),
           ("tma.load", "TMA load in flight"), ("tma.store", "TMA store in flight"),
           ("cp_async", "cp.async copy in flight"), ("wgmma", "wgmma group in flight"),
           ("tcgen05_mma", "tcgen05 MMA in flight"),
           ("mbarrier.arrive", "arrive"), ("mbarrier.expect", "expect"), ("mbarrier.phase", "phase complete"),
           ("thread_barrier", "thread_barrier")]


@dataclass
class _Box:
    start: int
    end: int
    kind: str
    name: str
    args: dict
    open: bool = False  # never ended (the run failed, e.g. in a deadlock)
    ready: Optional[int] = None  # a blocked wait: when the phase it waited for completed


@dataclass
class _Lane:
    name: str
    extent: Optional[_Box] = None  # a partition's lane: from the fork to the partition's end
    waits: List[_Box] = field(default_factory=list)
    spans: List[_Box] = field(default_factory=list)
    ticks: List[_Box] = field(default_factory=list)


@dataclass
class _Process:
    name: str
    sort: int
    end: int = 0
    lanes: Dict[int, _Lane] = field(default_factory=dict)


def _processes(events: Sequence[dict]) -> Dict[int, _Process]:
    """Group the events by process and lane, pairing begins with ends."""
    procs: Dict[int, _Process] = {}

    def proc(pid: int) -> _Process:
        return procs.setdefault(pid, _Process(f"process {pid}", pid))

    def lane(pid: int, tid: int) -> _Lane:
        return proc(pid).lanes.setdefault(tid, _Lane(f"lane {tid}"))

    open_waits: Dict[Tuple[int, int], List[_Box]] = {}
    open_spans: Dict[int, _Box] = {}
    phases: Dict[int, List[Tuple[int, str, int]]] = {}  # pid -> (ts, barrier, parity) of completed phases
    for e in events:
        ph, pid = e.get("ph"), e.get("pid", 0)
        if ph == "M":
            if e["name"] == "process_name":
                proc(pid).name = e["args"]["name"]
            elif e["name"] == "process_sort_index":
                proc(pid).sort = e["args"]["sort_index"]
            elif e["name"] == "thread_name":
                lane(pid, e.get("tid", 0)).name = e["args"]["name"]
            continue
        ts, tid, args = int(e.get("ts", 0)), e.get("tid", 0), e.get("args", {})
        p = proc(pid)
        p.end = max(p.end, ts)
        kind = args.get("kind", e.get("cat", ""))
        if ph == "B":
            open_waits.setdefault((pid, tid), []).append(_Box(ts, ts, kind, e["name"], dict(args)))
        elif ph == "E" and open_waits.get((pid, tid)):
            box = open_waits[(pid, tid)].pop()
            box.end = ts
            box.args.update(args)
            _add_slice(lane(pid, tid), box, tid)
        elif ph == "b":
            box = open_spans[e["id"]] = _Box(ts, ts, kind, e["name"], dict(args))
            lane(pid, tid).spans.append(box)
        elif ph == "e" and e.get("id") in open_spans:
            open_spans.pop(e["id"]).end = ts
        elif ph == "i":
            lane(pid, tid).ticks.append(_Box(ts, ts, kind, e["name"], dict(args)))
            if kind == "mbarrier.phase":
                phases.setdefault(pid, []).append((ts, args.get("barrier"), args.get("parity")))
    for (pid, tid), boxes in open_waits.items():
        for box in boxes:
            box.end, box.open = procs[pid].end, True
            _add_slice(lane(pid, tid), box, tid)
    for box in open_spans.values():
        box.open = True
    for pid, p in procs.items():
        for ln in p.lanes.values():
            for box in ln.spans:
                if box.open:
                    box.end = p.end
            for box in ln.waits:
                if box.args.get("blocked"):
                    box.ready = next((ts for ts, bar, parity in phases.get(pid, ())
                                      if bar == box.args.get("barrier") and parity == box.args.get("parity")
                                      and box.start <= ts <= box.end), None)
    return procs


def _add_slice(lane: _Lane, box: _Box, tid: int) -> None:
    """A slice: a wait, or a partition's extent (lane 0 is the whole program's anyway)."""
    if box.kind != "partition":
        lane.waits.append(box)
    elif tid != 0:
        lane.extent = box


def _pack(spans: List[_Box]) -> List[List[_Box]]:
    """Rows of non-overlapping spans (greedy, by start)."""
    rows: List[List[_Box]] = []
    for box in sorted(spans, key=lambda b: (b.start, b.end)):
        for row in rows:
            if row[-1].end < box.start or (row[-1].end == box.start and row[-1].start < row[-1].end):
                row.append(box)
                break
        else:
            rows.append([box])
    return rows


def _tooltip(box: _Box) -> str:
    steps = f"step {box.start}" if box.start == box.end and not box.open else \
        f"steps {box.start}–{'…' if box.open else box.end}"
    lines = [f"{box.name} ({steps})"]
    if box.open:
        lines.append("never ended: the run stopped here (see the interpreter's error)")
    if box.ready is not None:
        lines.append(f"blocked until step {box.ready} (phase complete), then waited for the schedule")
    extra = {k: v for k, v in box.args.items() if k not in ("kind", "op", "location", "source")}
    if extra:
        lines.append(", ".join(f"{k}={v}" for k, v in extra.items()))
    if "location" in box.args:
        lines.append(f"{box.args.get('op', '')} at {box.args['location']}")
    if box.args.get("source"):
        lines.append(f"    {box.args['source']}")
    return "<title>" + _escape("\n".join(lines)) + "</title>"


def _nice_step(span: int, target: int = 10) -> int:
    raw = max(1, span / target)
    base = 10 ** math.floor(math.log10(raw))
    return int(next(m * base for m in (1, 2, 5, 10) if m * base >= raw))


def render_svg(trace: Union[dict, object], select: Optional[str] = None, width: int = 960,
               title: Optional[str] = None) -> str:
    """The SVG text of a trace (a :class:`~.trace.Trace` or its JSON object).

    ``select``: keep only processes whose name contains it (``"program (0, 0, 0)"``,
    ``"forward"``).  ``width``: the picture's width in pixels.
    """
    data = trace.to_json() if hasattr(trace, "to_json") else trace
    procs = sorted(_processes(data.get("traceEvents", [])).values(), key=lambda p: p.sort)
    procs = [p for p in procs if p.lanes and (select is None or select in p.name)]
    end = max([p.end for p in procs] + [1])
    scale = (width - _LEFT - _RIGHT) / end

    def x(ts: float) -> float:
        return _LEFT + ts * scale

    body: List[str] = []
    y = _TOP
    if title:
        body.append(f'<text x="8" y="18" font-weight="bold">{_escape(title)}</text>')
    for p in procs:
        y += 6
        body.append(f'<text x="8" y="{y + 12}" font-weight="bold">{_escape(p.name)}</text>')
        y += 18
        for tid in sorted(p.lanes):
            y = _draw_lane(body, p.lanes[tid], y, x, p.end)
    y += 10
    axis_y = y
    step = _nice_step(end)
    body.append(f'<line x1="{_LEFT}" y1="{axis_y}" x2="{x(end):.1f}" y2="{axis_y}" stroke="#444"/>')
    for t in range(0, end + 1, step):
        body.append(f'<line x1="{x(t):.1f}" y1="{_TOP}" x2="{x(t):.1f}" y2="{axis_y + 4}" stroke="#ddd"/>'
                    f'<text x="{x(t):.1f}" y="{axis_y + 16}" text-anchor="middle" fill="#444">{t}</text>')
    unit = "ns" if data.get("displayTimeUnit") == "ns" else "interpreter step"  # model output is in ns
    body.append(f'<text x="{_LEFT - 8}" y="{axis_y + 16}" text-anchor="end" fill="#444">{unit}</text>')
    y = axis_y + 30
    y = _legend(body, y, width, _kinds_drawn(procs))
    height = y + 8
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" style="max-width: 100%; height: auto" font-family="sans-serif" '
            'font-size="11">\n'
            f'<rect width="100%" height="100%" fill="#ffffff"/>\n' + "\n".join(_grid_first(body)) + "\n</svg>\n")


def _grid_first(body: List[str]) -> List[str]:
    grid = [s for s in body if 'stroke="#ddd"' in s]
    return grid + [s for s in body if 'stroke="#ddd"' not in s]


def _draw_lane(body: List[str], lane: _Lane, y: float, x, end: int) -> float:
    """Draw one lane (its waits and ticks, then its copies' rows) from ``y``; return the next ``y``."""
    body.append(f'<text x="{_LEFT - 8}" y="{y + 14}" text-anchor="end">{_escape(lane.name)}</text>')
    start, stop = (lane.extent.start, lane.extent.end) if lane.extent is not None else (0, end)
    body.append(f'<rect x="{x(start):.1f}" y="{y + 2}" width="{x(stop) - x(start):.1f}" height="{_LANE - 4}" '
                'fill="#ebebeb"/>')
    for box in lane.waits:
        _draw_wait(body, box, y, x)
    for box in lane.ticks:
        colour = _COLOURS.get(box.kind, "#555")
        top, bottom = (y, y + _LANE) if box.kind == "mbarrier.phase" else (y + 3, y + _LANE - 3)
        width = 2 if box.kind in ("mbarrier.phase", "mbarrier.arrive", "mbarrier.expect") else 1.5
        body.append(f'<line x1="{x(box.start):.1f}" y1="{top}" x2="{x(box.start):.1f}" y2="{bottom}" '
                    f'stroke="{colour}" stroke-width="{width}">{_tooltip(box)}</line>')
    y += _LANE
    for row in _pack(lane.spans):
        y += _GAP
        for box in row:
            colour = _COLOURS.get(box.kind, "#555")
            w = max(x(box.end) - x(box.start), 1.5)
            dash = ' stroke="#000" stroke-dasharray="3 2"' if box.open else ""
            body.append(f'<rect x="{x(box.start):.1f}" y="{y}" width="{w:.1f}" height="{_ROW}" fill="{colour}" '
                        f'fill-opacity="0.75"{dash}>{_tooltip(box)}</rect>')
            _label(body, box.name, x(box.start), w, y + _ROW - 2, "#fff")
        y += _ROW
    return y + 6


def _draw_wait(body: List[str], box: _Box, y: float, x) -> None:
    if box.end == box.start and not box.open:  # returned at once
        body.append(f'<line x1="{x(box.start):.1f}" y1="{y + 5}" x2="{x(box.start):.1f}" y2="{y + _LANE - 5}" '
                    f'stroke="{_COLOURS["wait.none"]}" stroke-width="1">{_tooltip(box)}</line>')
        return
    blocked_end = box.ready if box.ready is not None else box.end
    dash = ' stroke="#000" stroke-dasharray="3 2"' if box.open else ""
    w = max(x(blocked_end) - x(box.start), 1.0)
    body.append(f'<rect x="{x(box.start):.1f}" y="{y + 3}" width="{w:.1f}" height="{_LANE - 6}" '
                f'fill="{_COLOURS["blocked"]}"{dash}>{_tooltip(box)}</rect>')
    if box.ready is not None and box.end > box.ready:
        body.append(f'<rect x="{x(box.ready):.1f}" y="{y + 3}" width="{x(box.end) - x(box.ready):.1f}" '
                    f'height="{_LANE - 6}" fill="{_COLOURS["ready"]}">{_tooltip(box)}</rect>')
    _label(body, box.name, x(box.start), w, y + _LANE - 6, "#fff")


def _label(body: List[str], text: str, left: float, width: float, baseline: float, colour: str) -> None:
    """``text`` inside a box, when it fits (about 6 px per character)."""
    if width >= 6 * len(text) + 6:
        body.append(f'<text x="{left + 3:.1f}" y="{baseline:.1f}" fill="{colour}" font-size="9">{_escape(text)}</text>')


def _kinds_drawn(procs: List[_Process]) -> set:
    """The legend's keys for what the picture shows."""
    kinds = set()
    for p in procs:
        for ln in p.lanes.values():
            kinds.update(b.kind for b in ln.spans + ln.ticks)
            for box in ln.waits:
                if box.end > box.start or box.open:
                    kinds.add("blocked")
                if box.ready is not None and box.end > box.ready:
                    kinds.add("ready")
    return kinds


def _legend(body: List[str], y: float, width: int, kinds: set) -> float:
    left = 8
    for kind, text in [(k, t) for k, t in _LEGEND if k in kinds]:
        item = 22 + 6 * len(text)
        if left + item > width:
            left, y = 8, y + 16
        colour = _COLOURS[kind]
        if kind in ("blocked", "ready") or kind in ("tma.load", "tma.store", "cp_async", "wgmma",
                                                                         "tcgen05_mma"):
            body.append(f'<rect x="{left}" y="{y - 9}" width="14" height="10" fill="{colour}"/>')
        else:
            body.append(f'<line x1="{left + 7}" y1="{y - 10}" x2="{left + 7}" y2="{y + 2}" stroke="{colour}" '
                        'stroke-width="2"/>')
        body.append(f'<text x="{left + 18}" y="{y}">{_escape(text)}</text>')
        left += item
    return y + 8


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m gluonkit.interpret.timeline trace.json [-o out.svg] [--select TEXT]``."""
    parser = argparse.ArgumentParser(prog="python -m gluonkit.interpret.timeline", description=__doc__.split("\n")[0])
    parser.add_argument("trace", help="a trace written by GLUONKIT_INTERPRET_TRACE (Chrome JSON)")
    parser.add_argument("-o", "--output", help="the SVG file to write (default: standard output)")
    parser.add_argument("--select", help="draw only processes whose name contains this text")
    parser.add_argument("--width", type=int, default=960)
    args = parser.parse_args(argv)
    with open(args.trace) as f:
        svg = render_svg(json.load(f), args.select, args.width)
    if args.output:
        with open(args.output, "w") as f:
            f.write(svg)
    else:
        sys.stdout.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
