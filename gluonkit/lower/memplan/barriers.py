"""Where shared-memory accesses need a ``bar.sync 0``: a dataflow analysis over the IR.

Shared memory is written by some threads and read by others, so an access that could race
with an earlier access by another thread must wait at a block-wide barrier.  This pass
decides, once per kernel and before lowering, before which ops the lowering emits
``bar.sync 0`` (:func:`plan_barriers`); the lowering rules only consult the result.

**State.**  The accesses made since the last barrier ("pending"), each a byte range of
``global_smem`` and a kind.  A view (``memdesc_index``/``slice``/``permute``/``reshape``/
``reinterpret``, the deps ``warpgroup_mma_wait`` returns) covers the range of the
allocation it was made from (:mod:`.smem_plan`); an index by a constant narrows it to that
stage.  Ranges are compared by overlap, so buffers sharing space conflict too.  A view
whose allocation cannot be traced (a block argument or region result) covers every buffer.

**Kinds.**

* READ: ``local_load``; the shared operands of ``warpgroup_mma``; the source of a TMA store;
  the mbarrier ops ``expect``/``arrive``/``wait``, ``async_copy_mbarrier_arrive`` and the mbarrier of a TMA load (atomic
  mbarrier operations do not conflict with each other, and reads never do).
* WRITE: ``local_alloc`` with a value, ``local_store``, ``mbarrier_init``/``invalidate``.
* ASYNC_WRITE: the destination of a TMA load or of a cp.async copy.  It waits for pending
  reads and writes of its range (other threads may still use the old data), but does not
  become pending: a TMA load's visibility is ordered by the mbarrier wait, not by
  ``bar.sync``; a cp.async copy's by its ``async_wait_group`` (below).

Two accesses conflict when their ranges overlap and one is a WRITE, or the new one is an
ASYNC_WRITE.  An op whose access conflicts with a pending one gets a barrier, which clears
the pending set.  Ops that always emit ``bar.sync 0`` in every thread (``thread_barrier``,
and ``convert_layout``/``reduce`` when they go through scratch memory) clear it as well.

**Asynchronous reads.**  An asynchronous ``warpgroup_mma`` and a TMA store keep reading
after they are issued, so a barrier between the issue and the wait that retires them does
not end the read.  They are also tracked as in flight, with the number of younger groups
issued since; ``warpgroup_mma_wait(N)``, a synchronous ``warpgroup_mma`` (``wait 0``) and
``async_tma_store_wait(N)`` retire the groups with at least N younger ones, making their
reads pending again, so the next conflicting write waits at a barrier after the wait.

**Asynchronous writes.**  A cp.async copy (``async_copy_global_to_shared``) writes its
bytes when it lands, so it is tracked as in flight, as a write, from its issue; it belongs
to no group until ``async_commit_group`` closes the open group, after which it counts
younger groups like the reads above.  ``async_wait_group(N)`` retires the committed groups
with at least N younger ones: each thread's own copies have landed, and their writes
become pending, so a later read of the range by other threads waits at a ``bar.sync``
after the wait.  (A copy completed through ``async_copy_mbarrier_arrive`` is made visible
by the mbarrier wait instead, which needs no ``bar.sync``.)

**Partitions.**  ``warp_specialize`` forks and joins at a barrier over every thread, so
each partition is analysed once from an empty pending set (its own ``bar.sync`` is a named
barrier over its threads) and nothing is pending after the join.

**Control flow.**  After an ``if``, the union of both branches' states; a loop's body is
analysed until its entry state (the state before the loop joined with the state at the end
of the body) stops changing.  Decisions only accumulate, so the result is sound for every
path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import FrozenSet, Iterable, List, Set, Tuple

from ...ir import Block, Function, Operation, SharedMemoryDescType, Value
from ...ir.memdesc import stage_strides
from ...layouts.conversion import plan_conversion
from ..llvm_types import byte_size, llvm_type
from .scratch_use import atomic_broadcasts_through_scratch, converts_through_scratch, cta_axis_bits, warp_axis_bits
from .smem import SharedPlan

__all__ = ["READ", "WRITE", "ASYNC_WRITE", "BarrierPlan", "plan_barriers", "conflicts"]

READ, WRITE, ASYNC_WRITE = "read", "write", "async_write"
_WGMMA, _TMA_STORE, _CP_ASYNC = "wgmma", "tma_store", "cp_async"  # kinds of asynchronous groups

Range = Tuple[int, int]  # [lo, hi) bytes of global_smem


@dataclass(frozen=True)
class _Pending:
    lo: int
    hi: int
    kind: str


@dataclass(frozen=True)
class _InFlight:
    """An asynchronous access (``kind`` READ or WRITE) of ``[lo, hi)`` by a ``group`` with ``younger``
    groups issued after it (-1: a cp.async copy not yet committed to a group)."""

    lo: int
    hi: int
    group: str
    younger: int
    kind: str = READ


@dataclass(frozen=True)
class _State:
    pending: FrozenSet[_Pending] = frozenset()
    in_flight: FrozenSet[_InFlight] = frozenset()

    def __or__(self, other: "_State") -> "_State":
        return _State(self.pending | other.pending, self.in_flight | other.in_flight)


@dataclass
class BarrierPlan:
    """The ops (by identity) before which the lowering emits ``bar.sync 0``."""

    before: Set[int] = field(default_factory=set)

    def needs_barrier(self, op: Operation) -> bool:
        return id(op) in self.before


def conflicts(new_kind: str, new: Range, old_kind: str, old: Range) -> bool:
    """Whether a ``new_kind`` access of ``new`` must wait for a pending ``old_kind`` access of ``old``."""
    overlap = new[0] < old[1] and old[0] < new[1]
    return overlap and (WRITE in (new_kind, old_kind) or new_kind == ASYNC_WRITE)


def plan_barriers(func: Function, shared: SharedPlan) -> BarrierPlan:
    """Decide before which ops of ``func`` a ``bar.sync 0`` is needed (see the module docstring)."""
    return _Analysis(func, shared).run()


class _Analysis:
    def __init__(self, func: Function, shared: SharedPlan):
        self.func = func
        self.shared = shared
        self.plan = BarrierPlan()
        ends = [r.offset + r.nbytes for r in shared.regions.values()]
        self.everything: Range = (0, max(ends or [0]))
        # Younger-group counts saturate here: any wait retires a group with this many.
        self.cap = {_WGMMA: 0, _TMA_STORE: 0, _CP_ASYNC: 0}
        for op in func.walk():
            if op.name == "warpgroup_mma_wait":
                self.cap[_WGMMA] = max(self.cap[_WGMMA], op.attrs["num_outstanding"])
            elif op.name == "async_tma_store_wait":
                self.cap[_TMA_STORE] = max(self.cap[_TMA_STORE], op.attrs["pendings"])
            elif op.name == "async_wait_group":
                self.cap[_CP_ASYNC] = max(self.cap[_CP_ASYNC], op.attrs["num_outstanding"])

    def run(self) -> BarrierPlan:
        self._block(self.func.body, _State())
        return self.plan

    # ----------------------------------------------------------------- ranges
    def _range(self, value: Value) -> Tuple[int, int, bool]:
        """``(lo, hi, exact)``: the bytes ``value``'s view may touch; exact when it starts at ``lo``."""
        op = value.defining_op
        if op is None:
            return (*self.everything, False)
        if op.name == "local_alloc":
            region = self.shared.regions[value.uid]
            return region.offset, region.offset + region.nbytes, True
        if op.name == "memdesc_index":
            lo, hi, exact = self._range(op.operands[0])
            index = op.operands[1].defining_op
            if exact and index is not None and index.name == "constant":
                view: SharedMemoryDescType = op.operands[0].type
                step = stage_strides(view)[0] * view.element.itemsize
                start = lo + int(index.attrs["value"]) * step
                return start, start + step, True
            return lo, hi, False
        if op.name in ("memdesc_slice", "memdesc_permute", "memdesc_reshape", "memdesc_reinterpret"):
            lo, hi, _ = self._range(op.operands[0])
            return lo, hi, False
        if op.name == "warpgroup_mma_wait":
            return self._range(op.operands[value.index])
        return (*self.everything, False)

    def _bytes(self, value: Value) -> Range:
        lo, hi, _ = self._range(value)
        return lo, hi

    # ---------------------------------------------------------------- accesses
    def _accesses(self, op: Operation) -> List[Tuple[str, Range]]:
        """The op's own shared-memory accesses, as (kind, range)."""
        name, operands = op.name, op.operands
        if name == "local_alloc":
            return [(WRITE, self._bytes(op.results[0]))] if operands else []
        if name == "local_store" or name in ("mbarrier_init", "mbarrier_invalidate"):
            return [(WRITE, self._bytes(operands[0]))]
        if name == "clc_try_cancel":  # the response lands later, like a TMA load
            return [(ASYNC_WRITE, self._bytes(operands[0])), (READ, self._bytes(operands[1]))]
        if name in ("local_load", "clc_load_result", "mbarrier_expect", "mbarrier_arrive", "mbarrier_wait", "async_copy_mbarrier_arrive"):
            return [(READ, self._bytes(operands[0]))]
        if name == "warpgroup_mma":
            shared = [v for v in operands[:2] if isinstance(v.type, SharedMemoryDescType)]
            return [(READ, self._bytes(v)) for v in shared]
        if name in ("async_tma_copy_global_to_shared", "async_tma_gather"):
            return [(ASYNC_WRITE, self._bytes(operands[1])), (READ, self._bytes(operands[2]))]
        if name in ("async_tma_copy_shared_to_global", "async_tma_scatter"):
            return [(READ, self._bytes(operands[1]))]
        if name == "async_copy_global_to_shared":
            return [(ASYNC_WRITE, self._bytes(operands[0]))]
        return []

    def _emits_full_barrier(self, op: Operation) -> bool:
        """Whether lowering ``op`` always executes ``bar.sync 0`` in every thread at its position."""
        if op.name in ("thread_barrier", "cluster_barrier"):  # a cluster barrier waits for every thread too
            return True
        if op.name == "convert_layout":
            src, dst = op.operands[0].type, op.results[0].type
            plan = plan_conversion(src.layout.to_linear_layout(list(src.shape)),
                                   dst.layout.to_linear_layout(list(dst.shape)),
                                   element_bitwidth=8 * byte_size(llvm_type(dst)))
            return converts_through_scratch(plan)
        if op.name == "reduce":  # partials cross warps through scratch memory, or CTAs between cluster barriers
            src = op.operands[0].type
            ll = src.layout.to_linear_layout(list(src.shape))
            return bool(warp_axis_bits(op, ll) or cta_axis_bits(op, ll))
        return atomic_broadcasts_through_scratch(self.func, op)

    # ------------------------------------------------------------ transfer
    def _op(self, op: Operation, state: _State) -> _State:
        if op.name == "if":
            return self._block(op.regions[0], state) | self._block(op.regions[1], state)
        if op.name == "for":
            return self._loop(state, lambda s: self._block(op.regions[0], s))
        if op.name == "while":
            before, after = op.regions
            entry = self._loop(state, lambda s: self._block(after, self._block(before, s)))
            return self._block(before, entry)
        if op.name == "warp_specialize":
            return self._warp_specialize(op, state)
        for region in op.regions:  # other regions (reduce's combine) may run any number of times
            state = self._loop(state, lambda s, r=region: self._block(r, s))
        if self._emits_full_barrier(op):
            return _State(frozenset(), state.in_flight)
        accesses = self._accesses(op)
        pending = state.pending
        if id(op) in self.plan.before or any(
                conflicts(kind, rng, p.kind, (p.lo, p.hi)) for kind, rng in accesses for p in pending):
            self.plan.before.add(id(op))
            pending = frozenset()
        pending |= {_Pending(*rng, kind) for kind, rng in accesses if kind != ASYNC_WRITE}
        in_flight = state.in_flight
        if op.name == "warpgroup_mma":
            if op.attrs["is_async"]:
                in_flight = self._issue(in_flight, _WGMMA, [rng for _, rng in accesses])
            else:  # its wgmma.wait_group 0 retires every earlier group
                pending, in_flight = self._retire(pending, in_flight, _WGMMA, 0)
        elif op.name in ("async_tma_copy_shared_to_global", "async_tma_scatter"):
            in_flight = self._issue(in_flight, _TMA_STORE, [rng for _, rng in accesses])
        elif op.name == "warpgroup_mma_wait":
            pending, in_flight = self._retire(pending, in_flight, _WGMMA, op.attrs["num_outstanding"])
        elif op.name == "async_tma_store_wait":
            pending, in_flight = self._retire(pending, in_flight, _TMA_STORE, op.attrs["pendings"])
        elif op.name == "async_copy_global_to_shared":
            in_flight = in_flight | {_InFlight(*rng, _CP_ASYNC, -1, WRITE) for _, rng in accesses}
        elif op.name == "async_commit_group":
            in_flight = self._age(in_flight, _CP_ASYNC)
        elif op.name == "async_wait_group":
            pending, in_flight = self._retire(pending, in_flight, _CP_ASYNC, op.attrs["num_outstanding"])
        return _State(pending, in_flight)

    def _warp_specialize(self, op: Operation, state: _State) -> _State:
        """Fork and join are barriers over every thread (``barrier.sync 1``), so each partition
        starts and the kernel resumes with nothing pending; the default partition runs on the
        kernel's threads and keeps their asynchronous groups, the workers start with none."""
        default, *workers = op.regions
        after = self._block(default, _State(frozenset(), state.in_flight))
        for region in workers:
            self._block(region, _State())
        return _State(frozenset(), after.in_flight)

    def _issue(self, in_flight: FrozenSet[_InFlight], group: str, ranges: Iterable[Range]) -> FrozenSet[_InFlight]:
        """A new ``group`` of asynchronous reads: every earlier one of that group gets one younger."""
        return self._age(in_flight, group) | {_InFlight(*rng, group, 0) for rng in ranges}

    def _age(self, in_flight: FrozenSet[_InFlight], group: str) -> FrozenSet[_InFlight]:
        """A new ``group`` starts: every access of that group in flight gets one more younger group."""
        cap = self.cap[group]
        return frozenset(f if f.group != group else _InFlight(f.lo, f.hi, group, min(f.younger + 1, cap), f.kind)
                         for f in in_flight)

    @staticmethod
    def _retire(pending, in_flight, group: str, outstanding: int):
        """A wait leaving ``outstanding`` groups: older accesses end now, so they become pending."""
        done = {f for f in in_flight if f.group == group and f.younger >= outstanding}
        return pending | {_Pending(f.lo, f.hi, f.kind) for f in done}, in_flight - done

    def _block(self, block: Block, state: _State) -> _State:
        for op in block.ops:
            state = self._op(op, state)
        return state

    @staticmethod
    def _loop(before: _State, body) -> _State:
        """The state at the top of a loop: the fixed point of ``before | body(entry)``."""
        entry = before
        while True:
            joined = before | body(entry)
            if joined == entry:
                return entry
            entry = joined
