"""Recording a program's event schedule in the interpreter, for the simulation.

A :class:`Recorder` stands where the interpreter expects a :class:`~gluonkit.interpret.trace.Trace`
(the same hooks: ``program_run``, lanes with ``advance``/``partition``/``instant``/``begin``/
``end``/``start``, spans with ``finish``) and turns what the interpreter does into *steps*,
one list per agent (a partition of a program, or a program without partitions), in program
order:

* every op's issue cost, summed into ``("c", cycles)`` steps (:class:`~.tables.CostTable`);
* ``("arrive", signal)``: an arrival or an expect on an mbarrier phase — a *signal*, named
  ``(barrier, phase)`` (the barrier by its trace name and how often it was initialized), that
  completes when all its contributions are in;
* ``("wait", signal)``: an ``mbarrier.wait``, resolved to the phase it observed (the latest
  completed phase of its parity when it returned);
* ``("load", bytes, signal)``: a TMA load, which contributes to its barrier's phase when it lands;
* ``("mma", id, (m, n, k, dtype))`` / ``("store", id, bytes)`` / ``("cpasync", id, bytes)``: asynchronous
  work, and ``("await", id)`` where the program retires it (``warpgroup_mma_wait``,
  ``tma.store_wait``, ``cp.async`` waits);
* ``("commit", signal)``: a ``tcgen05`` commit, which arrives when the agent's MMAs so far are done;
* ``("gload", bytes)`` / ``("gstore", bytes)``: global loads and stores through the registers;
* fork and join of ``warp_specialize`` as signals too.

The interpreter runs one schedule (the forward one): which phase each wait observes does not
depend on it for a kernel whose protocol is correct, and the recorded dependencies are
then the kernel's own, whatever the GPU's timing.
"""

from __future__ import annotations

import itertools
from typing import Dict, List, Tuple

from ...interpret.trace import view_name
from ...ir.types import TensorType
from .tables import CostTable

__all__ = ["Recorder", "Agent", "RunRecord"]


class Agent:
    """One partition of one recorded program (or the program): its steps and names."""

    __slots__ = ("run", "tid", "name", "num_warps", "steps", "pending", "start_signal")

    def __init__(self, run: "RunRecord", tid: int, name: str, num_warps: int):
        self.run, self.tid, self.name, self.num_warps = run, tid, name, num_warps
        self.steps: List[tuple] = []
        self.pending = 0.0  # issue cycles not yet put into a step
        self.start_signal = None  # a worker partition starts when its fork signal completes

    def add(self, step: tuple) -> None:
        if self.pending:
            self.steps.append(("c", self.pending))
            self.pending = 0.0
        self.steps.append(step)


class RunRecord:
    """One recorded program instance: its agents and its barriers' completed phases."""

    def __init__(self, recorder: "Recorder", index: int, pid):
        self.recorder, self.index, self.pid = recorder, index, tuple(pid)
        self.agents: Dict[int, Agent] = {}
        self.completed: Dict[tuple, List[Tuple[int, int]]] = {}  # barrier -> [(phase, parity)] in order
        self.inits: Dict[str, int] = {}  # barrier name -> how many times it was initialized so far
        self.forks = 0

    def barrier(self, name: str) -> tuple:
        """A barrier's identity: its name and its initialization (phases restart at an ``mbarrier.init``)."""
        return name, self.inits.get(name, 0)

    def agent(self, tid: int, name: str = "program", num_warps: int = 4) -> Agent:
        agent = self.agents.get(tid)
        if agent is None:
            agent = self.agents[tid] = Agent(self, tid, name, num_warps)
        return agent


class Recorder:
    """Records the steps of the programs the interpreter runs (see the module docstring)."""

    def __init__(self, table: CostTable):
        self.table = table
        self.runs: List[RunRecord] = []
        self.needed: Dict[tuple, int] = {}  # signal -> contributions recorded
        self.mma_flops = 0.0
        self.kernel = ""
        # ptxas serialized the kernel's wgmma (set by :func:`~.predict.predict_ir` from its notes): every
        # wgmma instruction then waits for the previous one's completion (:mod:`.simulate`)
        self.serialized_wgmma = False
        self._ids = itertools.count(1)

    # ---- the Trace interface the interpreter calls
    def start_launch(self, kernel: str, grid) -> None:
        self.kernel = kernel

    def program_run(self, pid, schedule) -> "_Lane":
        run = RunRecord(self, len(self.runs), pid)
        self.runs.append(run)
        return _Lane(run, 0)

    def flush(self) -> None:
        """Nothing to write: the simulation reads the record."""

    # ---- helpers
    def contribute(self, signal: tuple) -> None:
        self.needed[signal] = self.needed.get(signal, 0) + 1

    def next_id(self) -> int:
        return next(self._ids)


class _Lane:
    """A lane of a recorded program: where an agent's steps go."""

    __slots__ = ("run", "tid", "_wait")

    def __init__(self, run: RunRecord, tid: int):
        self.run, self.tid = run, tid
        self._wait = None

    @property
    def agent(self) -> Agent:
        return self.run.agent(self.tid)

    def _signal(self, barrier: str, phase: int) -> tuple:
        return ("phase", self.run.index, self.run.barrier(barrier), int(phase))

    def advance(self, program, op) -> None:
        agent = self.agent
        agent.num_warps = program.num_warps
        table = self.run.recorder.table
        cost = table.op_cycles.get(op.name)
        if cost is None:
            cost = _tensor_cost(table, op, program.num_warps)
        agent.pending += cost
        if op.name == "mbarrier_init":
            name = view_name(program.env[op.operands[0].uid], op.operands[0].type)
            self.run.inits[name] = self.run.inits.get(name, 0) + 1
        elif op.name == "load" and isinstance(op.results[0].type, TensorType):
            agent.add(("gload", op.results[0].type.numel * op.results[0].type.element.itemsize, op))
        elif op.name == "store" and isinstance(op.operands[1].type, TensorType):
            ty = op.operands[1].type
            agent.add(("gstore", ty.numel * ty.element.itemsize, op))

    def partition(self, index: int, name: str, num_warps: int, op) -> "_Lane":
        run = self.run
        label = f"{name.removeprefix('the ')} ({num_warps} warp{'s' if num_warps != 1 else ''})"
        if index == 0:
            run.forks += 1
            fork = ("fork", run.index, run.forks)
            self.agent.add(("arrive", fork, op))
            run.recorder.contribute(fork)
            agent = run.agent(0)
            agent.name, agent.num_warps = label, num_warps
        else:
            agent = run.agent(index, label, num_warps)
            agent.add(("wait", ("fork", run.index, run.forks), op, "fork"))
        return _Lane(run, index)

    def partition_end(self, op) -> None:
        join = ("join", self.run.index, self.run.forks)
        self.agent.add(("arrive", join, op))
        self.run.recorder.contribute(join)
        if self.tid == 0:  # the code after warp_specialize runs when every partition has ended
            self.agent.add(("wait", join, op, "join"))

    def instant(self, name: str, kind: str, op, **args) -> None:
        agent, recorder = self.agent, self.run.recorder
        if kind in ("mbarrier.arrive", "mbarrier.expect"):
            if op.name.startswith("tcgen05"):
                return  # a commit's arrival: its time is the MMAs' (the "tcgen05.commit" step)
            signal = self._signal(args["barrier"], args["phase"])
            agent.add(("arrive", signal, op))
            recorder.contribute(signal)
        elif kind == "mbarrier.phase":
            self.run.completed.setdefault(self.run.barrier(args["barrier"]), []).append((args["phase"], args["parity"]))
        elif kind == "tcgen05.commit":
            signal = self._signal(args["barrier"], args["phase"])
            agent.add(("commit", signal, op))
            recorder.contribute(signal)
        elif kind == "wgmma.sync":
            ident = recorder.next_id()
            agent.add(("mma", ident, _mma_cycles(recorder, op, args["shape"]), op, "wgmma"))
            agent.add(("await", ident, op))

    def begin(self, name: str, kind: str, op, **args) -> None:
        if kind == "mbarrier.wait":
            self._wait = (args["barrier"], args["parity"])

    def end(self, name: str, kind: str, op, **args) -> None:
        if kind != "mbarrier.wait" or self._wait is None:
            return
        barrier, parity = self._wait
        self._wait = None
        completed = self.run.completed.get(self.run.barrier(barrier), ())
        phase = next((p for p, par in reversed(completed) if par == parity), None)
        signal = None if phase is None else self._signal(barrier, phase)
        self.agent.add(("wait", signal, op, barrier))

    def start(self, name: str, kind: str, op, **args) -> "_Span":
        recorder = self.run.recorder
        ident = recorder.next_id()
        agent = self.agent
        if kind == "tma.load":
            signal = self._signal(args["barrier"], args["phase"])
            agent.add(("load", args["bytes"], signal, op, args.get("destination", "")))
            recorder.contribute(signal)
        elif kind == "tma.store":
            agent.add(("store", ident, args["bytes"], op))
        elif kind == "wgmma":
            agent.add(("mma", ident, _mma_cycles(recorder, op, args["shape"]), op, "wgmma"))
        elif kind == "tcgen05_mma":  # completes through its commit; a synchronous one is awaited at once
            agent.add(("mma", ident, _mma_cycles(recorder, op, args["shape"]), op, "tcgen05"))
            if args.get("sync"):
                agent.add(("await", ident, op))
        elif kind == "cp_async":
            agent.add(("cpasync", ident, args.get("bytes", 0), op))
        return _Span(self, kind, ident)


class _Span:
    __slots__ = ("lane", "kind", "ident")

    def __init__(self, lane: _Lane, kind: str, ident: int):
        self.lane, self.kind, self.ident = lane, kind, ident

    def finish(self, **args) -> None:
        """The program retires the operation here (a TMA load's landing is the simulation's to time)."""
        if self.kind not in ("tma.load", "tcgen05_mma"):  # (a tcgen05 MMA is retired by its commit)
            self.lane.agent.add(("await", self.ident, None))


def _mma_cycles(recorder: Recorder, op, shape) -> tuple:
    """``(m, n, k, dtype)`` of an MMA: the simulation prices it with its table."""
    a_ty = op.operands[0].type
    m, n = int(shape[0]), int(shape[1])
    k = int(a_ty.shape[-1])
    recorder.mma_flops += 2.0 * m * n * k
    return m, n, k, a_ty.element.name


def _tensor_cost(table: CostTable, op, num_warps: int) -> float:
    """Issue cycles of an op without a table entry: its warp instructions over the schedulers,
    plus shared-memory traffic for ops that move a tile through it."""
    ty = next((r.type for r in op.results if isinstance(r.type, TensorType)), None)
    if ty is None:
        ty = next((v.type for v in op.operands if isinstance(v.type, TensorType)), None)
    if ty is None:
        return table.default_op_cycles
    schedulers = min(num_warps, table.schedulers)
    cycles = table.default_op_cycles + ty.numel / 32.0 / schedulers * table.alu_per_warp_op
    nbytes = ty.numel * ty.element.itemsize
    if op.name in ("local_load", "local_store") or (op.name == "convert_layout" and _crosses_warps(op)):
        cycles += nbytes / table.smem_bytes_per_cycle * (2 if op.name == "convert_layout" else 1)
    elif op.name in ("tmem_load", "tmem_store"):
        cycles += nbytes / (2 * table.smem_bytes_per_cycle)
    elif op.name == "dot_fma":
        m, n = ty.shape[-2], ty.shape[-1]
        k = op.operands[0].type.shape[-1]
        cycles += 2.0 * m * n * k / (256.0 * min(num_warps, table.schedulers) / table.schedulers)
    return cycles


def _crosses_warps(op) -> bool:
    """Whether a layout conversion goes through shared memory (assumed unless both layouts are equal)."""
    src, dst = op.operands[0].type, op.results[0].type
    return getattr(src, "layout", None) != getattr(dst, "layout", None)
