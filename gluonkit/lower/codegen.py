"""IR → LLVM IR: walks a kernel's ops and calls each op's lowering rule.

Control-flow rules call :func:`lower_block` for their regions; a region's terminator
(``yield``, ``condition``) is returned to the rule that owns the region, and ``return``
ends the kernel.  Every emitted instruction gets the op's source line as debug info.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..ir import CompilationError, Function
from .ops import (  # noqa: F401  (register the rules of every op family)
    atomics, collective, control, debug_print, device_assert, dot_fma, elementwise, inline_asm, layout_ops, memory,
    reduce, shared_memory, warp_specialize,
)
from .nvidia import async_copy, clc, cluster, mbarrier, packed_arith, tcgen05, tcgen05_scaled, tma, tma_gather, tmem, wgmma  # noqa: F401  (register the hardware units' rules)
from .context import KernelLowering
from .registry import LOWERINGS
from .walk import lower_block
from .memplan.smem import SharedPlan, check_budget
from .backend.targets import Target

__all__ = ["lower_to_llvm", "lower_block", "LOWERINGS"]


def lower_to_llvm(func: Function, target: Target, instrument=False) -> KernelLowering:
    """Lower kernel ``func`` (layouts already concrete) for ``target``.

    Returns the lowering state: its ``module`` is the LLVM module, its ``shared_bytes``
    the dynamic shared memory the kernel needs (buffers, then scratch), checked against
    the target's limit.  ``instrument`` adds measured-timeline records (:mod:`.instrument`).
    How much scratch the kernel needs is known only once it is lowered: when scratch after
    the buffers would pass the limit but fits in bytes no buffer ever uses (the gaps that
    buffers' alignment leaves), the kernel is lowered again with its scratch there.
    """
    ctx = _lower(func, target, instrument)
    limit = target.max_shared_memory_per_block
    plan = ctx.shared_plan
    if ctx.scratch_bytes and plan.scratch_start + ctx.scratch_bytes > limit:
        gap = plan.unused_range(ctx.scratch_bytes)
        if gap is not None:
            ctx = _lower(func, target, instrument, replace(plan, scratch_start=gap))
    ctx.shared_bytes = check_budget(func, ctx.shared_plan, ctx.scratch_bytes, limit, target.arch)
    return ctx


def _lower(func: Function, target: Target, instrument, shared_plan: Optional[SharedPlan] = None) -> KernelLowering:
    ctx = KernelLowering(func, target, instrument)
    if shared_plan is not None:
        ctx.shared_plan = shared_plan
    warp_specialize.prepare(ctx)
    tmem.prepare(ctx)
    terminator = lower_block(ctx, func.body)
    if terminator is not None:
        raise CompilationError("a kernel body must end with return, not with " + terminator.name, terminator.loc)
    warp_specialize.finish(ctx)
    return ctx
