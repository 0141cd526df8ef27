"""Warp specialization in the IR: where partitions' warps go, their register budgets, and the op's rule.

A ``warp_specialize`` op has one region per partition.  Region 0, the *default* partition,
runs on the kernel's own ``num_warps`` warps and yields the op's results; region ``i`` runs
on ``num_warps[i]`` extra warps.  :func:`plan_partitions` is the one place that decides
how those warps sit in the CTA and what registers they get, so the frontend (errors at the
user's line), the verifier and the lowering agree:

* Worker warp counts are powers of two.  Each worker starts at the next warp aligned to
  its size (to a warpgroup, 4 warps, for larger ones), after the default partition's warps
  and the workers before it; the CTA's warp count is rounded up to a whole warpgroup.  The
  kernel's thread count is ``32 *`` that total.
* ``setmaxnreg`` acts on whole warpgroups (every warp of a warpgroup must execute the same
  one), so a warpgroup shared by several workers gets the largest of their budgets, and
  idle padding warps share their warpgroup's.  Budgets are multiples of 8 in [24, 256].
* The kernel starts with ``floor8(65536 / threads)`` registers per thread (capped at 256,
  the ``.maxnreg`` it is compiled with), or with the launch's ``maxnreg`` when one is given
  (as in Gluon, where ``maxnreg`` sets the registers the CTA is launched with and the
  default partition gets what the workers leave of them); budgets above that are raised
  with ``setmaxnreg.inc``, those below lowered with ``setmaxnreg.dec``.
* ``setmaxnreg.inc`` takes registers only from those the CTA's other warpgroups released, and
  waits until there are enough: the budgets together must fit in what the CTA was launched
  with (``threads *`` the starting count), not in the whole 64K file, or a warpgroup waits
  forever.  The default partition gets what is left of that pool, at most 256 per thread;
  when that is under 24 the split cannot fit and compilation stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..layouts.distributed import AutoLayout
from .core import Operation
from .diagnostics import CompilationError
from .types import PointerType, SharedMemoryDescType, TensorDescType, TensorMemoryDescType, TensorType, DType
from .verifier import rule
from .verify_checks import fail

__all__ = ["PartitionPlan", "plan_partitions", "op_plan", "enclosing_partition", "partition_num_warps",
           "kernel_warps", "REGISTER_FILE", "MIN_REGS", "MAX_REGS", "WARPGROUP", "MAX_WARPS"]

REGISTER_FILE = 65536  # 32-bit registers per SM available to one CTA
MIN_REGS, MAX_REGS = 24, 256  # setmaxnreg's range (multiples of 8)
WARPGROUP = 4
MAX_WARPS = 32  # warps of one CTA: 1024 threads, on Hopper and Blackwell


@dataclass(frozen=True)
class PartitionPlan:
    """Where each partition's warps are and which register budgets the warpgroups get.

    ``starts[i]``/``num_warps[i]``: partition ``i``'s first warp and warp count (0 is the
    default partition); ``total_warps``: the CTA's warps; ``group_regs[g]``: the budget of
    warpgroup ``g`` (``None`` entries for the default partition's warpgroups, and all
    ``None`` without budgets); ``default_regs`` the default partition's; ``initial_regs``
    the per-thread count every warp starts with.
    """

    starts: Tuple[int, ...]
    num_warps: Tuple[int, ...]
    total_warps: int
    group_regs: Tuple[Optional[int], ...]
    default_regs: Optional[int]
    initial_regs: int

    @property
    def num_threads(self) -> int:
        return 32 * self.total_warps


def _power_of_two(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0 and n & (n - 1) == 0


def plan_partitions(default_warps: int, worker_warps: Sequence[int],
                    worker_regs: Optional[Sequence[int]], maxnreg: Optional[int] = None) -> PartitionPlan:
    """The plan for these counts and the launch's ``maxnreg`` (module docstring); ``ValueError``
    says what is wrong and how to fix it."""
    for i, w in enumerate(worker_warps):
        if not _power_of_two(w):
            raise ValueError(f"worker_num_warps[{i}] must be a power of two (1, 2, 4, 8 …), got {w!r}")
    starts, cursor = [0], default_warps
    for w in worker_warps:
        align = min(w, WARPGROUP)
        cursor = -(-cursor // align) * align
        starts.append(cursor)
        cursor += w
    total = -(-cursor // WARPGROUP) * WARPGROUP
    if total > MAX_WARPS:
        raise ValueError(f"the partitions need {total} warps (the default partition's {default_warps}, then "
                         f"worker_num_warps={list(worker_warps)}, each worker aligned to its size or a warpgroup), "
                         f"but a CTA has at most {MAX_WARPS} warps (1024 threads); use fewer or smaller workers")
    initial = min(MAX_REGS, REGISTER_FILE // (32 * total) // 8 * 8)
    if maxnreg is not None and worker_regs is not None:
        if maxnreg > initial:
            raise ValueError(f"maxnreg={maxnreg} registers for each of the CTA's {32 * total} threads is more than "
                             f"the {REGISTER_FILE}-register file holds ({initial} at most); launch with "
                             f"maxnreg <= {initial}, or without maxnreg")
        initial = maxnreg  # the CTA holds at least this many per thread (the hardware rounds up to 8)
    groups = total // WARPGROUP
    if worker_regs is None:
        return PartitionPlan(tuple(starts), (default_warps,) + tuple(worker_warps), total, (None,) * groups, None,
                             initial)
    for i, r in enumerate(worker_regs):
        if not isinstance(r, int) or isinstance(r, bool) or r % 8 or not MIN_REGS <= r <= MAX_REGS:
            raise ValueError(f"worker_num_regs[{i}] must be a multiple of 8 in [{MIN_REGS}, {MAX_REGS}] (what "
                             f"setmaxnreg accepts), got {r!r}")
    if default_warps % WARPGROUP:
        raise ValueError(f"register budgets (worker_num_regs) need the default partition to fill whole warpgroups "
                         f"(setmaxnreg acts on 4 warps at once), but the kernel has num_warps={default_warps}; use "
                         "num_warps=4 or 8, or leave worker_num_regs out")
    group_regs: List[Optional[int]] = [None] * groups
    for start, w, r in zip(starts[1:], worker_warps, worker_regs):
        for warp in range(start, start + w):
            g = warp // WARPGROUP
            group_regs[g] = max(group_regs[g] or 0, r)
    default_groups = default_warps // WARPGROUP
    worker_total = sum(32 * WARPGROUP * r for r in group_regs[default_groups:])
    pool = 32 * total * initial  # what the CTA is launched with; setmaxnreg only moves registers within it
    default_regs = min(MAX_REGS, (pool - worker_total) // (32 * default_warps) // 8 * 8)
    if default_regs < MIN_REGS:
        used = ", ".join(f"warpgroup {g}: {r}" for g, r in enumerate(group_regs) if r is not None)
        raise ValueError(f"the register budgets do not fit in the CTA's {pool} registers ({32 * total} threads "
                         f"starting at {initial} each): the workers' warpgroups take {worker_total} registers "
                         f"({used} per thread, 128 threads each), leaving "
                         f"{max(0, (pool - worker_total) // (32 * default_warps))} per thread for the "
                         f"default partition's {default_warps} warps, below the minimum of {MIN_REGS}; lower "
                         "worker_num_regs")
    return PartitionPlan(tuple(starts), (default_warps,) + tuple(worker_warps), total, tuple(group_regs),
                         default_regs, initial)


def op_plan(op: Operation, default_warps: int, maxnreg: Optional[int] = None) -> PartitionPlan:
    """The plan of a verified ``warp_specialize`` op in a kernel of ``default_warps`` warps launched
    with ``maxnreg``."""
    return plan_partitions(default_warps, op.attrs["num_warps"][1:], op.attrs["num_regs"], maxnreg)


def enclosing_partition(op: Operation) -> Optional[Tuple[Operation, int]]:
    """``(warp_specialize op, partition index)`` of the innermost partition containing ``op``, if any."""
    block = op.parent
    while block is not None and block.parent_op is not None:
        parent = block.parent_op
        if parent.name == "warp_specialize":
            return parent, parent.regions.index(block)
        block = parent.parent
    return None


def partition_num_warps(op: Operation, kernel_num_warps: int) -> int:
    """How many warps execute ``op``: its partition's count, or the kernel's outside partitions."""
    where = enclosing_partition(op)
    return kernel_num_warps if where is None else where[0].attrs["num_warps"][where[1]]


def kernel_warps(func) -> int:
    """The CTA's warp count: ``func.num_warps`` plus the warps of its partitions (see the module docstring)."""
    for op in func.walk():
        if op.name == "warp_specialize":
            return op_plan(op, func.num_warps).total_warps
    return func.num_warps


def _captured_ok(ty) -> bool:
    """What a worker may see from outside: memory descriptors, barriers, TMA descriptors, scalars."""
    return isinstance(ty, (SharedMemoryDescType, TensorMemoryDescType, TensorDescType, PointerType, DType))


def _layout_warps(ty: TensorType) -> Optional[int]:
    if isinstance(ty.layout, AutoLayout):
        return None
    ll = ty.layout.to_linear_layout(list(ty.shape))
    return ll.in_dim_size("warp") if ll.has_in_dim("warp") else 1


@rule("warp_specialize")
def _warp_specialize(op: Operation) -> None:
    warps, regs = tuple(op.attrs.get("num_warps", ())), op.attrs.get("num_regs")
    if len(op.regions) < 1 or len(warps) != len(op.regions):
        fail(op, f"needs one warp count per region, got {len(warps)} for {len(op.regions)} regions")
    if regs is not None and len(regs) != len(op.regions) - 1:
        fail(op, f"needs one register budget per worker, got {len(regs)} for {len(op.regions) - 1} workers")
    if op.parent is None or op.parent.parent_op is not None:
        fail(op, "must be at the top level of the kernel, not inside a runtime loop, branch or another "
                 "warp_specialize (its partitions are forked once, where the kernel reaches it)")
    try:
        plan_partitions(warps[0], warps[1:], regs)
    except ValueError as e:
        fail(op, str(e))
    default = op.regions[0]
    term = default.terminator
    if term is None or term.name != "yield" or [v.type for v in term.operands] != [r.type for r in op.results]:
        fail(op, "the default partition must end with a yield of the op's results")
    for index, region in enumerate(op.regions):
        if index and (region.terminator is None or region.terminator.name != "yield" or region.terminator.operands):
            fail(op, f"worker partition {index - 1} must end with a yield of nothing (workers return no values)")
        inside = {a.uid for a in region.args}
        for inner in region.walk():
            if inner.name == "warp_specialize":
                raise CompilationError("warp_specialize: warp_specialize cannot be nested inside a partition",
                                       inner.loc)
            for value in inner.operands:
                if index and value.uid not in inside and not _captured_ok(value.type):
                    raise CompilationError(
                        f"warp_specialize: worker partition {index - 1} uses a {value.type} made outside it; workers "
                        "may only use shared memory descriptors, barriers, TMA descriptors and scalars from outside",
                        inner.loc)
            for r in list(inner.results) + [a for reg in inner.regions for a in reg.args]:
                inside.add(r.uid)
                if isinstance(r.type, TensorType):
                    w = _layout_warps(r.type)
                    if w is not None and w != warps[index]:
                        what = "the default partition" if index == 0 else f"worker partition {index - 1}"
                        raise CompilationError(
                            f"{inner.name}: the layout {r.type.layout!r} spreads this tensor over {w} warps, but "
                            f"{what} runs on {warps[index]}; size layouts inside a partition with gl.num_warps()",
                            inner.loc)
