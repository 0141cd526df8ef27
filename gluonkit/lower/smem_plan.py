"""Where each shared-memory allocation lives, and the kernel's shared-memory budget.

Every ``local_alloc`` is a static region of the kernel's dynamic shared memory
(``global_smem``).  Regions are assigned in program order by a bump allocator, each
aligned as its layout needs (:func:`gluonkit.ir.memdesc.alignment_of`); the scratch region
that layout conversions and reductions use starts after the last one, so the two never
overlap.  Buffers whose lifetimes do not overlap still get separate regions for now.

:func:`check_budget` compares the total with the target's per-block limit and, like
Triton, stops with "out of resource: shared memory, Required: X, Hardware limit: Y",
followed by each buffer's size and source line, so the user sees what to shrink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from ..ir import CompilationError, Function, Operation
from ..ir.memdesc import alloc_elements, alignment_of

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


def plan_shared_memory(func: Function) -> SharedPlan:
    """Assign every ``local_alloc`` of ``func`` its region, in program order."""
    regions: Dict[int, SharedRegion] = {}
    end = 0
    for op in func.walk():
        if op.name != "local_alloc":
            continue
        ty = op.results[0].type
        align = alignment_of(ty.layout)
        offset = -(-end // align) * align
        nbytes = alloc_elements(ty) * ty.element.itemsize
        regions[op.results[0].uid] = SharedRegion(op, offset, nbytes)
        end = offset + nbytes
    return SharedPlan(regions, -(-end // SCRATCH_ALIGNMENT) * SCRATCH_ALIGNMENT)


def check_budget(func: Function, plan: SharedPlan, scratch_bytes: int, limit: int, arch: str) -> int:
    """The kernel's total shared memory; raises when it exceeds ``limit`` bytes."""
    total = plan.scratch_start + scratch_bytes if scratch_bytes else max(
        [r.offset + r.nbytes for r in plan.regions.values()] or [0])
    if total <= limit:
        return total
    notes = []
    for region in plan.ordered():
        ty = region.op.results[0].type
        notes.append((f"{region.nbytes} bytes at offset {region.offset}: a {list(ty.shape)} x {ty.element} buffer",
                      region.op.loc))
    if scratch_bytes:
        notes.append((f"{scratch_bytes} bytes of scratch for layout conversions and reductions, after the buffers",
                      None))
    raise CompilationError(
        f"out of resource: shared memory, Required: {total}, Hardware limit: {limit} ({arch}); "
        "use fewer pipeline stages or smaller tiles, or reuse a buffer with _reinterpret", func.loc, notes)
