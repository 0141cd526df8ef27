"""Where each shared-memory allocation and scratch use lives, and the kernel's budget.

Every ``local_alloc`` is a static region of the kernel's dynamic shared memory
(``global_smem``), and so is the scratch of every op that goes through scratch memory
(layout conversions and reductions across warps, scans, histograms, gathers, broadcast
atomics, the values ``warp_specialize`` hands its workers: :mod:`.scratch_size`).  Two
regions whose lifetimes overlap (:mod:`.liveness`: a buffer from the allocation to the last
use of any view of it, whole loops and unfinished asynchronous copies and MMAs included; a
scratch use at its op alone, partitions running at the same time) get disjoint bytes;
regions whose lifetimes do not overlap may share bytes, so a kernel needs the most its
buffers and scratch use at one time, not their sum.  A conversion's scratch thus reuses the
bytes of buffers that are dead by then, as in Triton.

Placement is first-fit in the order the lifetimes start (buffers before scratch uses that
start at the same position): each region takes the lowest offset, aligned as its layout
needs (:func:`gluonkit.ir.memdesc.alignment_of`; scratch: :data:`SCRATCH_ALIGNMENT`), that
overlaps no region placed earlier for a lifetime overlapping its own.  A scratch use never
overlaps a buffer placed after it, so scratch never moves a buffer.  Shared bytes need no
extra synchronization here: the barrier placement (:mod:`.barriers`) compares accesses,
scratch included, by byte range, so the first write of a region waits for the last reads
of the one it replaces.

:func:`check_budget` compares the total with the target's per-block limit and, like
Triton, stops with "out of resource: shared memory, Required: X, Hardware limit: Y",
followed by each buffer's and scratch use's size, offset and source line, so the user sees
what to shrink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ...ir import CompilationError, Function, Operation
from ...ir.memdesc import alloc_elements, alignment_of
from .liveness import buffer_lifetimes, scratch_lifetimes
from .scratch_size import scratch_bytes

__all__ = ["SharedRegion", "SharedPlan", "plan_shared_memory", "check_budget"]

SCRATCH_ALIGNMENT = 16


@dataclass(frozen=True)
class SharedRegion:
    """One allocation: ``nbytes`` bytes at byte ``offset`` of ``global_smem``."""

    op: Operation
    offset: int
    nbytes: int


@dataclass(frozen=True)
class SharedPlan:
    """Every allocation's region (by result value id) and every scratch use's (by op identity)."""

    regions: Dict[int, SharedRegion]
    scratch: Dict[int, SharedRegion]

    @property
    def size(self) -> int:
        """The bytes of ``global_smem`` the kernel needs."""
        return max([r.offset + r.nbytes for r in (*self.regions.values(), *self.scratch.values())] or [0])

    def ordered(self) -> List[SharedRegion]:
        return sorted(self.regions.values(), key=lambda r: r.offset)

    def scratch_of(self, op: Operation) -> Optional[SharedRegion]:
        """``op``'s scratch region, or ``None`` when it needs none."""
        return self.scratch.get(id(op))


def plan_shared_memory(func: Function) -> SharedPlan:
    """Place every ``local_alloc`` and scratch use of ``func``; regions never live together may share bytes."""
    sizes = {id(op): n for op in func.walk() if (n := scratch_bytes(func, op))}
    ops = [op for op in func.walk() if id(op) in sizes]
    items = [(life, 0, uid) for uid, life in buffer_lifetimes(func).items()]
    items += [(life, 1, key) for key, life in scratch_lifetimes(func, ops).items()]
    regions: Dict[int, SharedRegion] = {}
    scratch: Dict[int, SharedRegion] = {}
    placed = []  # (lifetime, region) in placement order
    for life, is_scratch, key in sorted(items, key=lambda item: (item[0].start, item[1])):
        if is_scratch:
            nbytes, alignment = sizes[key], SCRATCH_ALIGNMENT
        else:
            ty = life.op.results[0].type
            nbytes, alignment = alloc_elements(ty) * ty.element.itemsize, alignment_of(ty.layout)
        busy = sorted((r.offset, r.offset + r.nbytes) for other, r in placed if other.overlaps(life))
        region = SharedRegion(life.op, _first_fit(busy, nbytes, alignment), nbytes)
        (scratch if is_scratch else regions)[key] = region
        placed.append((life, region))
    return SharedPlan(regions, scratch)


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def _first_fit(busy: List[Tuple[int, int]], nbytes: int, alignment: int) -> int:
    """The lowest multiple of ``alignment`` where ``nbytes`` bytes miss every ``busy`` range (sorted)."""
    offset = 0
    for lo, hi in busy:
        if offset + nbytes <= lo:
            break
        offset = max(offset, _align(hi, alignment))
    return offset


def check_budget(func: Function, plan: SharedPlan, limit: int, arch: str) -> int:
    """The kernel's total shared memory; raises when it exceeds ``limit`` bytes."""
    total = plan.size
    if total <= limit:
        return total
    notes = []
    for region in plan.ordered():
        ty = region.op.results[0].type
        notes.append((f"{region.nbytes} bytes at offset {region.offset}: a {list(ty.shape)} x {ty.element} buffer",
                      region.op.loc))
    for region in sorted(plan.scratch.values(), key=lambda r: r.offset):
        notes.append((f"{region.nbytes} bytes of scratch at offset {region.offset}: {_SCRATCH_USERS[region.op.name]}",
                      region.op.loc))
    if len(plan.regions) + len(plan.scratch) > 1:
        also = ", and so does each op's scratch with the buffers dead at that op" if plan.scratch else ""
        notes.append((f"buffers whose lifetimes do not overlap share space{also} (equal or overlapping offsets "
                      "above); Required counts the bytes live at the same time", None))
    raise CompilationError(
        f"out of resource: shared memory, Required: {total}, Hardware limit: {limit} ({arch}); "
        "use fewer pipeline stages or smaller tiles, or reuse a buffer with _reinterpret", func.loc, notes)


# What each op's scratch is for, in the budget error.
_SCRATCH_USERS = {
    "convert_layout": "a layout conversion between warps",
    "reduce": "a reduction across warps",
    "scan": "a scan across warps",
    "histogram": "a histogram's counters",
    "gather": "a gather's source",
    "atomic_rmw": "an atomic's old values, for the threads that share them",
    "atomic_cas": "an atomic's old values, for the threads that share them",
    "warp_specialize": "the values warp_specialize hands its workers",
}
