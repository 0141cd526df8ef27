"""IR → LLVM IR: walks a kernel's ops and calls each op's lowering rule.

Control-flow rules call :func:`lower_block` for their regions; a region's terminator
(``yield``, ``condition``) is returned to the rule that owns the region, and ``return``
ends the kernel.  Every emitted instruction gets the op's source line as debug info.
"""

from __future__ import annotations

from ..ir import CompilationError, Function
from .ops import (  # noqa: F401  (register the rules of every op family)
    atomics, collective, control, debug_print, device_assert, dot_fma, elementwise, inline_asm, layout_ops, memory,
    reduce, shared_memory, warp_specialize,
)
from .nvidia import async_copy, clc, cluster, mbarrier, packed_arith, tcgen05, tcgen05_scaled, tma, tma_gather, tmem, wgmma  # noqa: F401  (register the hardware units' rules)
from .context import KernelLowering
from .registry import LOWERINGS
from .walk import lower_block
from .memplan.smem import check_budget
from .backend.targets import Target

__all__ = ["lower_to_llvm", "lower_block", "LOWERINGS"]


def lower_to_llvm(func: Function, target: Target, instrument=False) -> KernelLowering:
    """Lower kernel ``func`` (layouts already concrete) for ``target``.

    Returns the lowering state: its ``module`` is the LLVM module, its ``shared_bytes``
    the dynamic shared memory the kernel needs (buffers and scratch, planned before lowering:
    :mod:`.memplan.smem`), checked against the target's limit first.
    ``instrument`` adds measured-timeline records (:mod:`.instrument`).
    """
    ctx = KernelLowering(func, target, instrument)
    check_budget(func, ctx.shared_plan, target.max_shared_memory_per_block, target.arch)
    warp_specialize.prepare(ctx)
    tmem.prepare(ctx)
    terminator = lower_block(ctx, func.body)
    if terminator is not None:
        raise CompilationError("a kernel body must end with return, not with " + terminator.name, terminator.loc)
    warp_specialize.finish(ctx)
    return ctx
