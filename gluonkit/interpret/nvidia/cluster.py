"""Clusters in the interpreter: the CTAs of one program run together; ``cluster_barrier``.

A kernel launched with ``num_ctas > 1`` runs each program as a cluster of that many CTAs.
Every CTA is its own :class:`~..engine.Program` (own values, own shared memory, rank
``cta_rank``) and they run as cooperating tasks, with a baton passed between them as for
warp-specialize partitions (:mod:`..partitions`): a CTA that waits (an mbarrier phase, a
cluster barrier) lets the others run, and when every CTA that has not ended waits for
something that cannot happen, the deadlock report names each CTA and what it waits on.

Each cluster runs twice, CTA 0 first and then CTA ``n-1`` first (memory restored between
the runs), so a kernel whose result depends on which CTA runs first is caught.  A tensor
replicated on CTAs (``docs/clusters.rst``) is stored and updated by atomics from one of
them, as on the GPU (``memory_ops.py``, ``atomics.py``).  A reduction across the CTAs of a
split exchanges their partials here (:func:`exchange_across_ctas`).
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from ...layouts.distributed import replicated_cta_bits
from ..engine import Program, register_cluster_runner, rule
from ..errors import InterpreterError
from ..happens_before import acquire_phase, release
from ..partitions import Scheduler, Task, before_op
from ..schedules import Schedule
from ..shared_memory import SharedBuffer, SharedRef

__all__ = []

_SCHEDULES = (Schedule("forward"), Schedule("reverse"))


class Cluster:
    """What the CTAs of one running cluster share: how many cluster barriers each has reached,
    and each CTA's shared buffers (distributed shared memory: the same allocation in every CTA)."""

    def __init__(self, num_ctas: int):
        self.num_ctas = num_ctas
        self.arrivals: List[int] = [0] * num_ctas
        # (buffer, reader, leader): MMA operand reads their own CTA has released while the CTA that multicasts
        # into the buffer (``leader``) has not observed the MMA complete (nvidia/tcgen05.py, nvidia/tma.py).
        self._unobserved: List[tuple] = []
        self.tmem: Dict[int, object] = {}  # rank -> its tensor memory (a CTA pair's MMA writes both: tcgen05.py)
        self.clc_answers: List[object] = []  # the i-th try_cancel's response, the same for every CTA (clc.py)
        # (rank, number of the cluster barrier after it) -> partials a CTA publishes (exchange_across_ctas)
        self.published: Dict[Tuple[int, int], tuple] = {}
        self._buffers: Dict[Tuple[int, int], SharedBuffer] = {}  # (rank, id of the local_alloc op) -> latest
        self._origin: Dict[int, int] = {}  # id of a buffer -> id of the local_alloc op that made it

    def keep_unobserved(self, buffer: SharedBuffer, reader) -> None:
        """``reader`` (an in-flight MMA's read of ``buffer``) leaves the buffer's list because the
        buffer's CTA observed the MMA complete.  The CTA that multicasts into the buffer — the one of
        its class of replicas whose rank has none of the replicated bits — may not have: keep the
        read until it has (``reader.done_for``), for :meth:`unobserved_reads`."""
        bits = replicated_cta_bits(getattr(buffer.ty.layout, "cga_layout", None), self.num_ctas)
        leader = buffer.cta & ~bits
        if leader != buffer.cta and not reader.done_for(leader):
            self._unobserved.append((buffer, reader, leader))

    def unobserved_reads(self, buffer: SharedBuffer) -> list:
        """The reads of ``buffer`` kept by :meth:`keep_unobserved` whose multicasting CTA has still not
        observed their MMA complete."""
        self._unobserved = [e for e in self._unobserved if not e[1].done_for(e[2])]
        return [reader for b, reader, _ in self._unobserved if b is buffer]

    def register(self, rank: int, op, buffer: SharedBuffer) -> None:
        """CTA ``rank`` allocated ``buffer`` at ``op``."""
        self._buffers[(rank, id(op))] = buffer
        self._origin[id(buffer)] = id(op)

    def peer(self, ref: SharedRef, rank: int, op) -> SharedRef:
        """The view ``ref`` (of this CTA's memory) in CTA ``rank``'s shared memory (``mapa``)."""
        buffer = self._buffers.get((rank, self._origin[id(ref.buffer)]))
        if buffer is None:
            raise InterpreterError(f"{op.name}: CTA {rank} has not allocated {ref.buffer.describe()} yet", op.loc)
        return SharedRef(buffer, ref.base, ref.xor)


@register_cluster_runner
def run_cluster(func, pid, grid, values, memory, trace) -> None:
    """Run program ``pid`` as a cluster of ``func.num_ctas`` CTAs, under each schedule."""
    for i, schedule in enumerate(_SCHEDULES):
        last = i == len(_SCHEDULES) - 1
        saved = None if last else [a.data.copy() for a in memory.allocations]
        started = memory.launch.next if memory.launch is not None else None
        try:
            _run_once(func, pid, grid, values, memory, trace, schedule)
        except InterpreterError as e:
            e.notes.append((f"found under the {schedule} of the cluster's CTAs (the forward one runs CTA 0 "
                            "first, the reverse one the last CTA first)", None))
            e.args = (e._format(),)
            raise
        if saved is not None:
            for allocation, data in zip(memory.allocations, saved):
                allocation.data[:] = data
            if started is not None:  # the next schedule cancels the same programs again (nvidia/clc.py)
                memory.launch.next = started


def _run_once(func, pid, grid, values, memory, trace, schedule: Schedule) -> None:
    cluster = Cluster(func.num_ctas)
    tasks = []
    for rank in range(func.num_ctas):
        lane = None if trace is None else trace.program_run(pid, f"CTA {rank} · {schedule}")
        program = Program(func, pid, grid, memory, None, lane)
        program.cta_rank, program.cluster = rank, cluster
        tasks.append(Task(rank, f"CTA {rank}", program, lambda p=program: p.run_kernel(values) or []))
    scheduler = Scheduler(schedule, tasks, f"CTA of the cluster of program {tuple(pid)}")
    for task in tasks:
        task.program.blocker = (lambda ready, describe, t=task:
                                scheduler.block(t, ready, describe, t.current_op.loc))
        task.program.progress["cluster"] = lambda prog, op, t=task: before_op(scheduler, t, op)
    scheduler.run()


@rule("cluster_barrier")
def _cluster_barrier(program, op, operands):
    if program.cluster is None:  # a one-CTA cluster: the CTA's own threads are already in step
        return []
    _rendezvous(program, op)
    return []


def _rendezvous(program, op) -> int:
    """This CTA reaches a cluster barrier (at ``op``) and waits until every CTA has; what each
    CTA did before it happens before what any does after it.  Returns the barrier's number."""
    cluster = program.cluster
    cluster.arrivals[program.cta_rank] += 1
    count = cluster.arrivals[program.cta_rank]
    release(cluster, count)  # what this CTA did so far happens before every CTA leaves this barrier

    def ready() -> bool:
        return all(a >= count for a in cluster.arrivals)

    def describe() -> str:
        missing = [r for r, a in enumerate(cluster.arrivals) if a < count]
        return (f"cluster barrier number {count} (line {op.loc.line}), which CTA(s) {missing} have not reached; "
                "every CTA of the cluster must reach each cluster barrier")

    if not ready():
        program.blocker(ready, describe)
    acquire_phase(cluster, count)
    return count


def exchange_across_ctas(program, op, value, ranks: List[int]) -> list:
    """The ``value`` that each CTA of ``ranks`` publishes at ``op``, in that order: what a
    reduction whose ``cga_layout`` splits its axis does through distributed shared memory
    (``lower/ops/reduce_across_ctas.py``).  As there, this CTA publishes its value, passes a
    cluster barrier, reads the others' and passes a second one, so the exchange orders the
    CTAs' memory accesses like two ``cluster.barrier()`` calls.  (Every CTA of a cluster runs
    the same ops: its scalars, which alone steer control flow, are the same in every CTA.)"""
    cluster = program.cluster
    number = cluster.arrivals[program.cta_rank] + 1
    cluster.published[(program.cta_rank, number)] = value
    _rendezvous(program, op)
    values = [cluster.published[(rank, number)] for rank in ranks]
    _rendezvous(program, op)
    del cluster.published[(program.cta_rank, number)]  # every CTA read it before the second barrier
    return values
