"""The discrete-event simulation: recorded steps (:mod:`.recorder`) to times on one SM.

Every agent (a partition of a program; the programs recorded together share the SM) has
a clock.  Repeatedly, the agent whose next step can start earliest runs that step:

* ``("c", cycles)`` advances its clock;
* an arrival contributes its time to a signal (an mbarrier phase, a fork or join); a signal
  completes at the latest of its contributions once all of them are in;
* a wait can run only once its signal is complete, and returns at
  ``max(clock, signal) + wait_cycles`` (plus ``wake_cycles`` if it blocked);
* a TMA load, TMA store, ``cp.async`` or global load/store takes the SM's memory server
  (first come, first served) for ``bytes / mem_bytes_per_cycle`` cycles; a load lands
  ``load_latency`` after its transfer and contributes to its barrier's phase then;
* an MMA takes the SM's tensor cores (one server, in issue order) for its cycles
  (:meth:`~.tables.CostTable.mma_cycles`); ``await`` waits until the work it names is done,
  a ``tcgen05`` commit arrives on its signal when the agent's MMAs so far are done.  When ptxas
  serialized the kernel's wgmma (:attr:`~.recorder.Recorder.serialized_wgmma`), a wgmma is
  synchronous and slower: each warpgroup's instructions (one ``64 × n × 16``-element slice
  each) wait for the previous one's completion, ``wgmma_latency`` after its tensor-core
  cycles, while the agent's other warpgroups' instructions fill the tensor cores meanwhile.

The result holds each agent's end time and, for pictures, the events in the trace-event
vocabulary of :mod:`gluonkit.interpret.trace` (``mbarrier.wait`` slices with ``blocked``,
``tma.load``/``tma.store``/``wgmma`` spans, arrivals and completed phases), on a nanosecond
axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .recorder import Agent, Recorder
from .tables import CostTable

__all__ = ["simulate", "Simulation"]


@dataclass
class Simulation:
    """What a simulation found: ``cycles`` until the last agent ended, per-agent ends, events."""

    cycles: float
    ends: Dict[str, float]
    events: List[dict] = field(default_factory=list)
    busy: Dict[str, float] = field(default_factory=dict)  # cycles each shared unit was busy


class _Server:
    """A unit that serves one request at a time, in the order they come (the memory system, the tensor cores)."""

    __slots__ = ("free", "busy")

    def __init__(self):
        self.free = 0.0
        self.busy = 0.0

    def take(self, at: float, cycles: float) -> float:
        start = max(at, self.free)
        self.free = start + cycles
        self.busy += cycles
        return self.free


class _Signal:
    __slots__ = ("needed", "got", "time", "where")

    def __init__(self, needed: int):
        self.needed, self.got, self.time, self.where = needed, 0, 0.0, None


class _State:
    __slots__ = ("agent", "i", "t", "last_mma", "pid", "tid")

    def __init__(self, agent: Agent):
        self.agent, self.i, self.t, self.last_mma = agent, 0, 0.0, 0.0
        self.pid, self.tid = agent.run.index + 1, agent.tid


def simulate(recorder: Recorder, table: Optional[CostTable] = None, events: bool = True) -> Simulation:
    """Simulate the programs ``recorder`` holds, all on one SM (see the module docstring)."""
    table = table or recorder.table
    signals = {key: _Signal(n) for key, n in recorder.needed.items()}
    mem, tc = _Server(), _Server()
    done: Dict[int, float] = {}
    out: List[dict] = [] if events else None
    ns = 1.0 / table.clock_ghz
    states = [_State(a) for run in recorder.runs for a in sorted(run.agents.values(), key=lambda a: a.tid)]
    if out is not None:
        _metadata(out, recorder)

    def emit(st: _State, ph: str, name: str, kind: str, t: float, op=None, **args) -> dict:
        if out is None:
            return {}
        event = {"ph": ph, "name": name, "cat": kind.split(".")[0], "pid": st.pid, "tid": st.tid, "ts": t * ns,
                 "args": {"kind": kind, **_where(op), **args}}
        if ph == "i":
            event["s"] = "t"
        out.append(event)
        return event

    def contribute(st: _State, key: tuple, at: float, op) -> None:
        sig = signals[key]
        sig.got += 1
        if at >= sig.time:
            sig.time, sig.where = at, st
        if sig.got == sig.needed and key[0] == "phase":
            emit(sig.where, "i", f"{key[2][0]} phase {key[3]} complete", "mbarrier.phase", sig.time, op,
                 barrier=key[2][0], phase=key[3])

    def ready_at(st: _State) -> Optional[float]:
        """When the agent's next step can start; None: it waits on an incomplete signal."""
        step = st.agent.steps[st.i]
        if step[0] == "wait" and step[1] is not None:
            sig = signals.get(step[1])
            if sig is None or sig.got < sig.needed:
                return None
            return max(st.t, sig.time)
        return st.t

    ids = 0
    live = [st for st in states if st.agent.steps]
    while live:
        best, best_t = None, None
        for st in live:
            at = ready_at(st)
            if at is not None and (best_t is None or at < best_t):
                best, best_t = st, at
        if best is None:
            raise RuntimeError("the cost model's simulation found every agent waiting on a signal that never "
                               "completes; the recorded schedule is inconsistent (please report it)")
        st = best
        step = st.agent.steps[st.i]
        st.i += 1
        kind = step[0]
        t = st.t
        if kind == "c":
            st.t = t + step[1]
        elif kind == "arrive":
            contribute(st, step[1], t, step[2])
            if step[1][0] == "phase":
                emit(st, "i", f"arrive {step[1][2][0]}", "mbarrier.arrive", t, step[2], barrier=step[1][2][0])
        elif kind == "wait":
            ready = best_t
            blocked = ready > t
            end = ready + table.wait_cycles + (table.wake_cycles if blocked else 0.0)
            if step[3] == "fork":
                emit(st, "B", st.agent.name, "partition", end)
            elif step[3] != "join":
                emit(st, "B", f"wait {step[3]}", "mbarrier.wait", t, step[2], barrier=step[3])
                emit(st, "E", f"wait {step[3]}", "mbarrier.wait", end, step[2], blocked=blocked)
            st.t = end
        elif kind == "load":
            landed = mem.take(t, step[1] / table.mem_bytes_per_cycle) + table.load_latency
            ids += 1
            emit(st, "b", f"TMA load → {step[4]}", "tma.load", t, step[3], bytes=step[1])["id"] = -ids
            emit(st, "e", f"TMA load → {step[4]}", "tma.load", landed, step[3])["id"] = -ids
            contribute(st, step[2], landed, step[3])
        elif kind in ("store", "cpasync"):
            finished = mem.take(t, step[2] / table.mem_bytes_per_cycle) + table.store_latency
            done[step[1]] = finished
            name, what = ("TMA store", "tma.store") if kind == "store" else ("cp.async", "cp_async")
            emit(st, "b", name, what, t, step[3], bytes=step[2])["id"] = step[1]
            emit(st, "e", name, what, finished, step[3])["id"] = step[1]
        elif kind == "mma" and step[4] == "wgmma" and recorder.serialized_wgmma:
            finished = _serialized_wgmma(tc, max(t, st.last_mma), step[2], st.agent.num_warps, table)
            st.last_mma = st.t = finished
            done[step[1]] = finished
            emit(st, "b", "wgmma (serialized)", "wgmma", t, step[3])["id"] = step[1]
            emit(st, "e", "wgmma (serialized)", "wgmma", finished, step[3])["id"] = step[1]
        elif kind == "mma":
            finished = tc.take(max(t, st.last_mma if step[4] == "wgmma" else t), table.mma_cycles(*step[2]))
            st.last_mma = max(st.last_mma, finished)
            done[step[1]] = finished
            name = "wgmma" if step[4] == "wgmma" else "tcgen05_mma"
            emit(st, "b", name, "wgmma", t, step[3])["id"] = step[1]
            emit(st, "e", name, "wgmma", finished, step[3])["id"] = step[1]
        elif kind == "await":
            st.t = max(t, done[step[1]])
        elif kind == "commit":
            contribute(st, step[1], max(t, st.last_mma), step[2])
        elif kind == "gload":
            st.t = mem.take(t, step[1] / table.mem_bytes_per_cycle) + table.load_latency
        elif kind == "gstore":
            mem.take(t, step[1] / table.mem_bytes_per_cycle)
        if st.i == len(st.agent.steps):
            live.remove(st)
            if st.agent.tid:
                emit(st, "E", st.agent.name, "partition", st.t)
    ends = {f"{a.agent.run.pid} {a.agent.name}": a.t for a in states}
    # the SM is done when its agents are and its memory traffic is (a CTA's last stores drain after it ends)
    cycles = max([a.t for a in states] + [mem.free])
    if out is not None:
        out.sort(key=lambda e: (e.get("ts", 0.0), 0 if e["ph"] == "M" else 1))
    return Simulation(cycles, ends, out or [], {"memory": mem.busy, "tensor cores": tc.busy})


def _serialized_wgmma(tc: _Server, at: float, shape: tuple, num_warps: int, table: CostTable) -> float:
    """When a serialized wgmma of ``shape`` (the agent's whole tile) issued at ``at`` completes.

    The agent's ``num_warps // 4`` warpgroups each run a chain of ``64 × n × 16``-element
    instructions, one at a time: an instruction completes ``wgmma_latency`` after its own
    tensor-core cycles, and the warpgroups' instructions share the tensor cores, so a link of
    the chain takes the longer of the two."""
    m, n, k, dtype = shape
    groups = max(1, min(num_warps // 4, m // 64))
    slices = table.k_slices(k, dtype)
    per_group = max(1, m // 64 // groups) * slices  # the chain of one warpgroup
    instr = table.mma_cycles(64, n, k, dtype) / slices  # one instruction's tensor-core cycles
    link = max(groups * instr, instr + table.wgmma_latency)
    start = max(at, tc.free)
    tc.free = start + per_group * link
    tc.busy += groups * per_group * instr
    return tc.free


def _where(op) -> dict:
    if op is None:
        return {}
    loc = op.loc
    return {"op": op.name, "location": f"{loc.file}:{loc.line}", "source": (loc.source_line or "").strip()}


def _metadata(out: List[dict], recorder: Recorder) -> None:
    for run in recorder.runs:
        pid = run.index + 1
        out.append({"ph": "M", "name": "process_name", "pid": pid,
                    "args": {"name": f"model: {recorder.kernel} · program {run.pid}"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
        for agent in run.agents.values():
            out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": agent.tid, "args": {"name": agent.name}})
