"""Lowering of ``warp_specialize``: one kernel whose warps dispatch on their warp id.

The CTA has the warps of :func:`gluonkit.ir.warp_specialize.plan_partitions`.  Its shape:

* **Entry.**  After the prologue every thread reads its warp id (made warp-uniform with a
  ``shfl.sync``).  The kernel's own warps (``warp < num_warps``) run the kernel body; the
  other warps go to their warpgroup's *worker chain*.  With register budgets, each warpgroup
  first sets its budget with ``setmaxnreg.inc``/``.dec`` (the kernel is compiled with
  ``.maxnreg`` = the budget every warp starts with: the launch's ``maxnreg`` if given, else
  the plan's share of the register file), workers' warpgroups by the largest budget of the
  partitions in them.
  Each workers' warpgroup has a chain of its own, which never merges with another's
  until the return: ptxas allocates registers by the ``setmaxnreg`` budget only in code that
  one budget reaches (measured: with one chain for all workers, ptxas allocated every
  partition within the launch's ``.maxnreg`` and spilled).
* **Fork and join.**  ``warp_specialize`` ops sit at the kernel's top level, so every one
  is reached once, in order, by the kernel's warps; the worker chain visits them in the
  same order.  At each, all threads meet at named barrier 1 (``barrier.sync 1, threads``: the
  fork, after which shared memory the body wrote before is visible to the workers); the
  kernel's warps run the default partition inline and the other warps branch on their warp
  id to their partition (padding warps to none); all meet at barrier 1 again (the join).
  After their last join the workers' warps return.
* **Cluster barriers.**  ``barrier.cluster`` waits for every thread of every CTA of the
  cluster that has not exited, the parked workers' warps included: each cluster barrier the
  kernel's warps pass before a fork (``cluster.barrier()``, the pair TMEM allocation's) is
  counted (:func:`cluster_barrier`) and the worker chains pass as many just before that
  fork.  The verifier keeps them countable (``ir/verify_cluster.py``: none inside a
  partition, none under runtime control flow before a fork).  Without this the kernel's
  warps wait at the barrier for the workers, which wait at the fork for them.
* **Inside a partition** warp ids count from the partition's first warp, so its layouts,
  its elected thread and its wgmma warpgroups are its own; ``bar.sync`` (``thread_barrier``,
  shared-memory ordering, conversions through scratch) is named barrier ``2 + i`` over worker
  ``i``'s threads, or barrier 0 over the kernel's warps in the default partition and the
  rest of the kernel.  Scratch memory used inside a partition never shares bytes with another
  partition's (the planner, :mod:`gluonkit.lower.memplan.liveness`, knows they run at once).
* **Captured values.**  Values the workers use from the code around the op
  (:func:`~gluonkit.lower.memplan.scratch_size.captured_values`) go through shared memory:
  thread 0 writes them to the op's planned scratch region before the fork, the workers read
  them after it.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, Value
from ...ir.warp_specialize import PartitionPlan, op_plan, WARPGROUP
from ..context import KernelLowering
from ..inline_ptx import CLUSTER_BARRIER, cluster_barrier_text, emit_ptx
from ..llvm_types import I1, I8, I32
from ..memplan.scratch import SHARED, barrier, shared_base
from ..memplan.scratch_size import CAPTURE_SLOT, captured_values
from .shared_memory import SharedPointer
from ..registry import lowering
from ..walk import lower_block

__all__ = ["prepare", "finish", "partition_report", "cluster_barrier"]

FORK_BARRIER = 1
FIRST_WORKER_BARRIER = 2
MAX_BARRIERS = 16


class _WarpSpecialization:
    """The kernel-wide state: the plan, the uniform warp id, where each workers' warpgroup's
    chain continues (by warpgroup) and how many cluster barriers the kernel's warps passed
    since the last fork (the workers pass as many before the next one)."""

    def __init__(self, plan: PartitionPlan, warp_id: lir.Value, chains: Dict[int, lir.IRBuilder]):
        self.plan = plan
        self.warp_id = warp_id
        self.chains = chains
        self.cluster_barriers = 0


def cluster_barrier(ctx: KernelLowering, relaxed: bool = False) -> None:
    """A barrier over the CTA cluster in the kernel's warps, outside partitions (module
    docstring): emitted here and, in a warp-specialized kernel, counted so that the parked
    workers' warps join it before the next fork."""
    emit_ptx(ctx.builder, cluster_barrier_text(relaxed))
    if ctx.warp_specialization is not None:
        ctx.warp_specialization.cluster_barriers += 1


def _setmaxnreg(builder: lir.IRBuilder, regs: Optional[int], initial: int) -> None:
    if regs is None or regs == initial:
        return
    emit_ptx(builder, f"setmaxnreg.{'inc' if regs > initial else 'dec'}.sync.aligned.u32 {regs};")


def prepare(ctx: KernelLowering) -> None:
    """Set up dispatch and register budgets when the kernel has ``warp_specialize`` ops (module docstring)."""
    ops = [op for op in ctx.func.body.ops if op.name == "warp_specialize"]
    if not ops:
        return
    plan = op_plan(ops[0], ctx.func.num_warps, ctx.func.maxnreg)
    for op in ops[1:]:
        if op.attrs["num_warps"] != ops[0].attrs["num_warps"] or op.attrs["num_regs"] != ops[0].attrs["num_regs"]:
            raise CompilationError(
                "warp_specialize: every warp_specialize of a kernel must use the same worker_num_warps and "
                f"worker_num_regs (the first, at line {ops[0].loc.line}, uses {list(ops[0].attrs['num_warps'][1:])} "
                f"and {ops[0].attrs['num_regs']}): the kernel's warps and registers are fixed at launch", op.loc)
    workers = len(plan.num_warps) - 1
    if FIRST_WORKER_BARRIER + workers > MAX_BARRIERS:
        raise CompilationError(f"warp_specialize: at most {MAX_BARRIERS - FIRST_WORKER_BARRIER} worker partitions "
                               f"fit in the {MAX_BARRIERS} named barriers, got {workers}", ops[0].loc)
    if plan.default_regs is not None and ctx.func.maxnreg is None:  # a launch's maxnreg is already there
        ctx.fn.attributes.add(f'"nvvm.maxnreg"="{plan.initial_regs}"')
    ctx.sync_group = (0, 32 * ctx.func.num_warps)
    # Replace the prologue's branch to the body by the dispatch on the warp id.
    block = ctx.prologue.block
    branch = block.instructions[-1]
    body = branch.operands[0]
    block.instructions.remove(branch)
    block.terminator = None
    entry = lir.IRBuilder(block)
    warp_id = entry.asm(lir.FunctionType(I32, [I32]), "shfl.sync.idx.b32 $0, $1, 0, 31, -1;", "=r,r",
                        [ctx.warp], side_effect=False, name="warp_id")
    default = ctx.fn.append_basic_block("ws.default")
    workers_entry = ctx.fn.append_basic_block("ws.workers")
    dispatch = entry.cbranch(entry.icmp_unsigned("<", warp_id, I32(ctx.func.num_warps)), default, workers_entry)
    ctx.prologue.position_before(dispatch)
    start = lir.IRBuilder(default)
    _setmaxnreg(start, plan.default_regs, plan.initial_regs)
    start.branch(body)
    ctx.warp_specialization = _WarpSpecialization(plan, warp_id, _worker_chains(ctx, workers_entry, plan, warp_id))


def _worker_chains(ctx: KernelLowering, block: lir.Block, plan: PartitionPlan, warp_id) -> Dict[int, lir.IRBuilder]:
    """One chain per workers' warpgroup, which starts by setting the warpgroup's budget."""
    first = ctx.func.num_warps // WARPGROUP
    groups = range(first, len(plan.group_regs))
    dispatch = lir.IRBuilder(block)
    chains = {}
    if len(groups) == 1:
        chains[first] = dispatch
    else:
        switch = dispatch.switch(dispatch.lshr(warp_id, I32(2)), ctx.fn.append_basic_block("ws.no_group"))
        lir.IRBuilder(switch.default).unreachable()
        for g in groups:
            case = ctx.fn.append_basic_block(f"ws.group{g}")
            switch.add_case(I32(g), case)
            chains[g] = lir.IRBuilder(case)
    for g, chain in chains.items():
        _setmaxnreg(chain, plan.group_regs[g], plan.initial_regs)
    return chains


def finish(ctx: KernelLowering) -> None:
    """End the worker chain once the whole kernel is lowered (the workers' last join, then return)."""
    if ctx.warp_specialization is not None:
        for chain in ctx.warp_specialization.chains.values():
            chain.ret_void()


def partition_report(ctx: KernelLowering) -> list:
    """For the compiled kernel's metadata: each partition's warps and register budget (empty without partitions)."""
    ws = ctx.warp_specialization
    if ws is None:
        return []
    plan, report = ws.plan, []
    for i, (first, count) in enumerate(zip(plan.starts, plan.num_warps)):
        regs = plan.default_regs if i == 0 else plan.group_regs[first // WARPGROUP]
        report.append({"partition": "default" if i == 0 else f"worker {i - 1}", "first_warp": first,
                       "num_warps": count, "registers": regs if regs is not None else plan.initial_regs})
    return report


def _fork_join(builder: lir.IRBuilder, threads: int) -> None:
    # Not ``bar.sync`` (= ``barrier.sync.aligned``): the two sides reach it from different instructions.
    emit_ptx(builder, f"barrier.sync {FORK_BARRIER}, {threads};")


def _llvm_part(lowered) -> lir.Value:
    return lowered.pointer if isinstance(lowered, SharedPointer) else lowered


def _slot(ctx: KernelLowering, op: Operation, builder: lir.IRBuilder, index: int, ty: lir.Type) -> lir.Value:
    """The shared-memory slot of ``op``'s ``index``-th captured value, as a pointer to ``ty``."""
    start = ctx.shared_plan.scratch_of(op).offset
    base = builder.gep(shared_base(ctx), [I32(start + CAPTURE_SLOT * index)], source_etype=I8)
    return base if ty == I8 else builder.bitcast(base, lir.PointerType(addrspace=SHARED))


def _store_captures(ctx: KernelLowering, op: Operation, captures: List[Value]) -> None:
    """Thread 0 of the kernel's warps writes the captured values to their slots (before the fork)."""
    b = ctx.builder
    if ctx.barrier_plan.needs_barrier(op):  # other threads may still read the slots' bytes
        barrier(ctx)
    first = b.icmp_unsigned("==", b.or_(ctx.lane, ctx.warp), I32(0))
    with b.if_then(first):
        for index, value in enumerate(captures):
            part = _llvm_part(ctx.get(value))
            if part.type == I1:
                part = b.zext(part, I8)
            b.store(part, _slot(ctx, op, b, index, part.type))


def _load_captures(ctx: KernelLowering, op: Operation, chain: lir.IRBuilder, captures: List[Value]) -> Dict[int, object]:
    """The workers read the captured values back (after the fork), as lowered values by value id."""
    loaded = {}
    for index, value in enumerate(captures):
        lowered = ctx.get(value)
        part = _llvm_part(lowered)
        ty = I8 if part.type == I1 else part.type
        got = chain.load(_slot(ctx, op, chain, index, ty), typ=ty)
        if part.type == I1:
            got = chain.trunc(got, I1)
        loaded[value.uid] = SharedPointer(got, lowered.xor, lowered.align) if isinstance(lowered, SharedPointer) \
            else got
    return loaded


def _lower_partition(ctx: KernelLowering, op: Operation, region):
    """Lower one partition's region, between measured-timeline anchors when instrumented."""
    if ctx.instrumentation is not None:
        ctx.instrumentation.anchor(ctx.builder, "partition.start", op)
    terminator = lower_block(ctx, region)
    if ctx.instrumentation is not None:
        ctx.instrumentation.anchor(ctx.builder, "partition.end", op)
    return terminator


@lowering("warp_specialize")
def _warp_specialize(ctx: KernelLowering, op: Operation) -> None:
    ws: _WarpSpecialization = ctx.warp_specialization
    plan, threads = ws.plan, ws.plan.num_threads
    debug = ctx.debug.location(op.loc)
    captures = captured_values(op)
    # The kernel's warps: publish the captures, fork, run the default partition inline, join.
    if captures:
        _store_captures(ctx, op, captures)
    _fork_join(ctx.builder, threads)
    terminator = _lower_partition(ctx, op, op.regions[0])
    for result, value in zip(op.results, terminator.operands):
        ctx.set(result, ctx.get(value))
    ctx.builder.debug_metadata = debug
    _fork_join(ctx.builder, threads)
    # The other warps, in their warpgroup's chain: the cluster barriers the kernel's warps
    # passed since the last fork, fork, read the captures, dispatch to their partition, join.
    switches, joins, loaded = {}, {}, {}
    for g, chain in ws.chains.items():
        chain.debug_metadata = debug
        for _ in range(ws.cluster_barriers):
            emit_ptx(chain, CLUSTER_BARRIER)
        _fork_join(chain, threads)
        loaded[g] = _load_captures(ctx, op, chain, captures)
        joins[g] = ctx.fn.append_basic_block(f"ws.join.group{g}")
        switches[g] = chain.switch(ws.warp_id, joins[g])
    ws.cluster_barriers = 0
    saved = (ctx.builder, ctx.warp, ctx._thread_parts, ctx.sync_group, dict(ctx.values))
    try:
        for i, region in enumerate(op.regions[1:]):
            first, count = plan.starts[i + 1], plan.num_warps[i + 1]
            group = first // WARPGROUP
            ctx.values.clear()
            ctx.values.update(saved[4])
            ctx.values.update(loaded[group])
            entry = ctx.fn.append_basic_block(f"ws.partition{i}")
            for w in range(first, first + count):
                switches[group].add_case(I32(w), entry)
            ctx.builder = lir.IRBuilder(entry)
            ctx.warp = ctx.prologue.sub(saved[1], I32(first), name=f"partition{i}.warp")
            ctx._thread_parts = {}
            ctx.sync_group = (FIRST_WORKER_BARRIER + i, 32 * count)
            _lower_partition(ctx, op, region)
            ctx.builder.branch(joins[group])
    finally:
        ctx.builder, ctx.warp, ctx._thread_parts, ctx.sync_group, values = saved
        ctx.values.clear()
        ctx.values.update(values)
        ctx.values.update((r.uid, ctx.get(v)) for r, v in zip(op.results, terminator.operands))
    for g, join in joins.items():
        ws.chains[g] = lir.IRBuilder(join)
        ws.chains[g].debug_metadata = debug
        _fork_join(ws.chains[g], threads)
