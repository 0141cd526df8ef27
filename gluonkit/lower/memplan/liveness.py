"""When each shared-memory allocation is live: intervals over a linear order of the ops.

The allocation planner (:mod:`.smem_plan`) lets two ``local_alloc`` buffers share bytes
when their lifetimes do not overlap; this module computes those lifetimes, conservatively.

**Positions.**  Every op of the kernel, nested ones included, gets a position in program
order (an op before the ops of its regions); :data:`Lifetime` ``end`` may also be the
position just after the last op, "the end of the function".

**Derived values.**  A value is derived from an allocation when it is the allocation, a
view of a derived value (``memdesc_index``/``slice``/``permute``/``reshape``/
``reinterpret``), a dep that ``warpgroup_mma_wait`` returns for a derived operand, or a
descriptor that control flow passes on: a block argument or result of a region op (``for``,
``if``, ``while`` …) takes every allocation flowing into the op (its operands and its
regions' ``yield``/``condition``).

**Lifetime.**  From the ``local_alloc`` to the last use of a derived value, where:

* a use inside a loop (any region op except ``if``; its body runs again) of an allocation
  made outside that loop lasts to the end of the loop, for every loop between the two;
* a derived value handed to the next iteration (the ``yield``/``condition`` of a loop)
  makes the allocation live over the whole loop;
* an asynchronous use keeps the buffer busy after its op: the source of a TMA store, the
  destination and mbarrier of a TMA load, the shared operands of an asynchronous
  ``warpgroup_mma``, the destination of a cp.async copy.  Such a use lasts until a wait that
  retires *every* group of its kind (``async_tma_store_wait(0)``; ``warpgroup_mma_wait(0)`` or
  a synchronous ``warpgroup_mma``; ``async_wait_group(0)``, which counts on the copies having
  been committed) that surely runs after it: later in the use's block or in a block
  around it (a wait nested in an ``if`` or loop of its own may not run).  Without one it
  lasts to the end of the function.  This is deliberately simple and conservative.
* a TMA load completes at an mbarrier phase, which this analysis does not follow; instead
  its destination stays busy until the last ``mbarrier_wait`` on (a view of) the load's
  barrier allocation that can run after it (extended over the loops around the wait, like
  any use), and to the end of the function when there is none.  Every load's completion
  must be observed by a wait on its barrier before the kernel ends (the interpreter reports
  one that is not), so after the last such wait no load into the buffer is in flight.  This
  lets a pipeline's stage buffers share space with the epilogue's, as in Gluon.
* an mbarrier (``MBarrierLayout``) allocation lasts to the end of the function unless a
  view of it is passed to ``mbarrier_invalidate``: PTX requires invalidating an mbarrier
  before its memory is used for anything else.  An invalidated mbarrier ends at its last
  use (invalidating it while a TMA still signals it would be the program's error).

The order is the program order of a single thread of control.  The partitions of a
``warp_specialize`` run at the same time, so an allocation made inside one is live over the
whole ``warp_specialize`` op: no two partitions' buffers share bytes.

**Scratch uses** (:func:`scratch_lifetimes`).  An op that goes through scratch memory
(:mod:`.scratch_size`) writes and reads it within the op, so its scratch is live at that op
alone — in a loop too: the next iteration writes it anew, after a barrier (:mod:`.barriers`).
Inside a partition the op's position is not enough: the other partitions run at the same
time, so a scratch use there also overlaps every use in another partition of the same
``warp_specialize`` (:attr:`Lifetime.partition`).  The slots of a ``warp_specialize``'s
captured values are written before the fork and read by the workers after it, while the
default partition runs: they are live over the whole op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

from ...ir import Block, Function, Operation, SharedMemoryDescType
from ...ir.warp_specialize import enclosing_partition
from ...layouts.barrier import MBarrierLayout

__all__ = ["Lifetime", "buffer_lifetimes", "scratch_lifetimes"]

_TERMINATORS = ("yield", "condition")
_WGMMA, _TMA_STORE, _TMA_LOAD, _CP_ASYNC = "wgmma", "tma_store", "tma_load", "cp_async"


@dataclass(frozen=True)
class Lifetime:
    """Allocation (or scratch use) ``op`` is live from position ``start`` to ``end``, both included.

    ``partition`` is ``(id of the warp_specialize op, partition index)`` for a scratch use
    inside a partition: it is live while every other partition of that op runs.
    """

    op: Operation
    start: int
    end: int
    partition: Optional[Tuple[int, int]] = None

    def overlaps(self, other: "Lifetime") -> bool:
        if self.start <= other.end and other.start <= self.end:
            return True
        mine, theirs = self.partition, other.partition
        return mine is not None and theirs is not None and mine[0] == theirs[0] and mine[1] != theirs[1]


def buffer_lifetimes(func: Function) -> Dict[int, Lifetime]:
    """Every ``local_alloc`` of ``func`` (by result value id) and its lifetime (module docstring)."""
    return _Liveness(func).run()


def scratch_lifetimes(func: Function, ops: List[Operation]) -> Dict[int, Lifetime]:
    """The lifetime of each scratch use by ``ops`` (by op identity; module docstring)."""
    liveness = _Liveness(func)
    lifetimes = {}
    for op in ops:
        pos = liveness.pos[id(op)]
        if op.name == "warp_specialize":  # its captured values' slots
            lifetimes[id(op)] = Lifetime(op, pos, liveness.last[id(op)])
            continue
        where = enclosing_partition(op)
        lifetimes[id(op)] = Lifetime(op, pos, pos, None if where is None else (id(where[0]), where[1]))
    return lifetimes


def _is_loop(op: Optional[Operation]) -> bool:
    return op is not None and bool(op.regions) and op.name != "if"


def _async_uses(op: Operation) -> List[Tuple[int, str]]:
    """``(operand index, group kind)`` of the operands ``op`` keeps using after it is issued."""
    if op.name in ("async_tma_copy_shared_to_global", "async_tma_scatter"):
        return [(1, _TMA_STORE)]
    if op.name in ("async_tma_copy_global_to_shared", "async_tma_gather"):
        return [(1, _TMA_LOAD), (2, _TMA_LOAD)]
    if op.name == "clc_try_cancel":  # its response lands like a TMA load: until a wait on the barrier
        return [(0, _TMA_LOAD), (1, _TMA_LOAD)]
    if op.name == "warpgroup_mma" and op.attrs["is_async"]:
        return [(0, _WGMMA), (1, _WGMMA)]
    if op.name == "async_copy_global_to_shared":
        return [(0, _CP_ASYNC)]
    return []


def _retires_all(op: Operation, group: str) -> bool:
    """Whether ``op`` waits until no asynchronous operation of kind ``group`` is in flight."""
    if group == _WGMMA:
        return (op.name == "warpgroup_mma_wait" and op.attrs["num_outstanding"] == 0) or (
            op.name == "warpgroup_mma" and not op.attrs["is_async"])
    if group == _TMA_STORE:
        return op.name == "async_tma_store_wait" and op.attrs["pendings"] == 0
    if group == _CP_ASYNC:
        return op.name == "async_wait_group" and op.attrs["num_outstanding"] == 0
    return False


class _Liveness:
    def __init__(self, func: Function):
        self.func = func
        self.pos: Dict[int, int] = {}  # id(op) -> position
        self.last: Dict[int, int] = {}  # id(op) -> last position inside it (itself if no regions)
        self.roots: Dict[int, FrozenSet[int]] = {}  # value uid -> allocations it derives from
        self.allocs: Dict[int, Operation] = {}
        self._number(func.body, 0)
        self.end_of_function = len(self.pos)

    def _number(self, block: Block, next_pos: int) -> int:
        for op in block.ops:
            self.pos[id(op)] = next_pos
            next_pos += 1
            for region in op.regions:
                next_pos = self._number(region, next_pos)
            self.last[id(op)] = next_pos - 1
        return next_pos

    # ----------------------------------------------------------------- derivation
    def _derive(self) -> None:
        """Fill ``roots`` until nothing changes (loop-carried descriptors flow backwards)."""
        changed = True
        while changed:
            changed = False
            for op in self.func.walk():
                for value, roots in self._flows(op):
                    old = self.roots.get(value.uid, frozenset())
                    if not roots <= old:
                        self.roots[value.uid] = old | roots
                        changed = True

    def _of(self, value) -> FrozenSet[int]:
        return self.roots.get(value.uid, frozenset())

    def _flows(self, op: Operation):
        """``(value, allocations)`` pairs: what each value ``op`` defines derives from."""
        if op.name == "local_alloc":
            self.allocs[op.results[0].uid] = op
            return [(op.results[0], frozenset([op.results[0].uid]))]
        if op.name == "warpgroup_mma_wait":
            return [(r, self._of(v)) for r, v in zip(op.results, op.operands)]
        incoming = frozenset().union(*[self._of(v) for v in op.operands])
        for region in op.regions:
            terminator = region.terminator
            if terminator is not None and terminator.name in _TERMINATORS:
                incoming |= frozenset().union(*[self._of(v) for v in terminator.operands])
        if not incoming:
            return []
        defined = list(op.results) + [arg for region in op.regions for arg in region.args]
        return [(v, incoming) for v in defined if isinstance(v.type, SharedMemoryDescType)]

    # ----------------------------------------------------------------- lifetimes
    def run(self) -> Dict[int, Lifetime]:
        self._derive()
        self.waits = [op for op in self.func.walk() if op.name == "mbarrier_wait"]
        spans = {uid: [self.pos[id(op)], self.pos[id(op)]] for uid, op in self.allocs.items()}
        invalidated = set()
        for op in self.func.walk():
            asynchronous = dict(_async_uses(op))
            for index, value in enumerate(op.operands):
                for uid in self._of(value):
                    if op.name == "mbarrier_invalidate":
                        invalidated.add(uid)
                    start, end = self._use(op, self.allocs[uid], asynchronous.get(index))
                    span = spans[uid]
                    span[0], span[1] = min(span[0], start), max(span[1], end)
        lifetimes = {}
        for uid, alloc in self.allocs.items():
            start, end = spans[uid]
            if isinstance(alloc.results[0].type.layout, MBarrierLayout) and uid not in invalidated:
                end = self.end_of_function
            partition = enclosing_partition(alloc)
            if partition is not None:  # partitions run concurrently (module docstring)
                start, end = min(start, self.pos[id(partition[0])]), max(end, self.last[id(partition[0])])
            lifetimes[uid] = Lifetime(alloc, start, end)
        return lifetimes

    def _use(self, op: Operation, alloc: Operation, group: Optional[str]) -> Tuple[int, int]:
        """The positions ``[start, end]`` that a use by ``op`` keeps ``alloc`` live over."""
        start, end = self.pos[id(op)], self._extent(op, alloc)
        if op.name in _TERMINATORS and _is_loop(op.parent.parent_op):  # carried to the next iteration
            loop = op.parent.parent_op
            start, end = min(start, self.pos[id(loop)]), max(end, self.last[id(loop)])
        if group is not None and not isinstance(alloc.results[0].type.layout, MBarrierLayout):
            end = max(end, self._completion(op, alloc, group))
        return start, end

    def _loops_around(self, op: Operation) -> List[Operation]:
        loops = []
        parent = op.parent.parent_op if op.parent is not None else None
        while parent is not None:
            if _is_loop(parent):
                loops.append(parent)
            parent = parent.parent.parent_op if parent.parent is not None else None
        return loops

    def _completion(self, op: Operation, alloc: Operation, group: str) -> int:
        """Where the asynchronous use by ``op`` has surely finished (see the module docstring)."""
        if group == _TMA_LOAD:
            return self._last_barrier_wait(op, alloc)
        inner = op
        while inner.parent is not None:
            block = inner.parent
            for later in block.ops[block.ops.index(inner) + 1:]:
                if _retires_all(later, group):
                    return self.pos[id(later)]
            if block.parent_op is None:
                break
            inner = block.parent_op
        return self.end_of_function

    def _last_barrier_wait(self, load: Operation, alloc: Operation) -> int:
        """The end of the last ``mbarrier_wait`` on the barrier of TMA load (or try_cancel) ``load`` that can run
        after it, as a use of ``alloc`` there (the end of the function if there is none)."""
        barriers = self._of(load.operands[1 if load.name == "clc_try_cancel" else 2])
        ends = [self._extent(wait, alloc) for wait in self.waits if self._of(wait.operands[0]) & barriers]
        ends = [e for e in ends if e > self.pos[id(load)]]
        return max(ends) if ends else self.end_of_function

    def _extent(self, op: Operation, alloc: Operation) -> int:
        """The last position a use of ``alloc`` by ``op`` covers: ``op``, or the end of the
        outermost loop around it that is not around ``alloc`` (its body runs again)."""
        end = self.pos[id(op)]
        alloc_loops = set(id(loop) for loop in self._loops_around(alloc))
        for loop in self._loops_around(op):
            if id(loop) not in alloc_loops:
                end = max(end, self.last[id(loop)])
        return end
