"""Where each shared-memory allocation lives, and the kernel's shared-memory budget.

Every ``local_alloc`` is a static region of the kernel's dynamic shared memory
(``global_smem``).  Two buffers whose lifetimes overlap (:mod:`.smem_liveness`: from the
allocation to the last use of any view of it, whole loops and unfinished asynchronous
copies and MMAs included) get disjoint regions; buffers whose lifetimes do not overlap may
share bytes, so a kernel needs the most its buffers use at one time, not their sum.

Placement is first-fit in the order the allocations appear: each buffer takes the lowest
offset, aligned as its layout needs (:func:`gluonkit.ir.memdesc.alignment_of`), that
overlaps no region placed earlier for a buffer live at the same time.  The scratch region
that layout conversions and reductions use starts after every buffer, so the two never
overlap — or, when that would pass the limit, in a gap no buffer ever uses
(:meth:`SharedPlan.unused_range`, chosen by :func:`gluonkit.lower.codegen.lower_to_llvm`).  Shared bytes need no extra synchronization here: the barrier placement
(:mod:`.barrier_plan`) compares accesses by byte range, so the first write of a buffer
waits for the last reads of the one it replaces.

:func:`check_budget` compares the total with the target's per-block limit and, like
Triton, stops with "out of resource: shared memory, Required: X, Hardware limit: Y",
followed by each buffer's size, offset and source line, so the user sees what to shrink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ...ir import CompilationError, Function, Operation
from ...ir.memdesc import alloc_elements, alignment_of
from .liveness import buffer_lifetimes

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
    """Every allocation's region (by result value id) and where scratch memory starts."""

    regions: Dict[int, SharedRegion]
    scratch_start: int

    def ordered(self) -> List[SharedRegion]:
        return sorted(self.regions.values(), key=lambda r: r.offset)

    def unused_range(self, nbytes: int) -> Optional[int]:
        """The lowest scratch-aligned offset of ``nbytes`` bytes that no buffer ever uses and that
        ends before the last buffer does (``None`` if there is none)."""
        offset = 0
        for lo, hi in sorted((r.offset, r.offset + r.nbytes) for r in self.regions.values()):
            if offset + nbytes <= lo:
                return offset
            offset = max(offset, _align(hi, SCRATCH_ALIGNMENT))
        return None


def plan_shared_memory(func: Function) -> SharedPlan:
    """Place every ``local_alloc`` of ``func``; buffers never live together may share bytes."""
    regions: Dict[int, SharedRegion] = {}
    lifetimes = buffer_lifetimes(func)
    placed = []  # (lifetime, region) in placement order
    for uid, life in sorted(lifetimes.items(), key=lambda item: item[1].start):
        ty = life.op.results[0].type
        nbytes = alloc_elements(ty) * ty.element.itemsize
        busy = sorted((r.offset, r.offset + r.nbytes) for other, r in placed if other.overlaps(life))
        region = SharedRegion(life.op, _first_fit(busy, nbytes, alignment_of(ty.layout)), nbytes)
        regions[uid] = region
        placed.append((life, region))
    end = max([r.offset + r.nbytes for r in regions.values()] or [0])
    return SharedPlan(regions, _align(end, SCRATCH_ALIGNMENT))


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


def check_budget(func: Function, plan: SharedPlan, scratch_bytes: int, limit: int, arch: str) -> int:
    """The kernel's total shared memory; raises when it exceeds ``limit`` bytes."""
    buffers_end = max([r.offset + r.nbytes for r in plan.regions.values()] or [0])
    total = max(buffers_end, plan.scratch_start + scratch_bytes) if scratch_bytes else buffers_end
    if total <= limit:
        return total
    notes = []
    for region in plan.ordered():
        ty = region.op.results[0].type
        notes.append((f"{region.nbytes} bytes at offset {region.offset}: a {list(ty.shape)} x {ty.element} buffer",
                      region.op.loc))
    if len(plan.regions) > 1:
        notes.append(("buffers whose lifetimes do not overlap share space (equal or overlapping offsets above); "
                      "Required counts the bytes live at the same time", None))
    if scratch_bytes:
        where = "after the buffers" if plan.scratch_start >= buffers_end else "in a gap no buffer uses"
        notes.append((f"{scratch_bytes} bytes of scratch for layout conversions and reductions at offset "
                      f"{plan.scratch_start}, {where}",
                      None))
    raise CompilationError(
        f"out of resource: shared memory, Required: {total}, Hardware limit: {limit} ({arch}); "
        "use fewer pipeline stages or smaller tiles, or reuse a buffer with _reinterpret", func.loc, notes)
