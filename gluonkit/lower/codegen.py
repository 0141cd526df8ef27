"""IR → LLVM IR: walks a kernel's ops and calls each op's lowering rule.

Control-flow rules call :func:`lower_block` for their regions; a region's terminator
(``yield``, ``condition``) is returned to the rule that owns the region, and ``return``
ends the kernel.  Every emitted instruction gets the op's source line as debug info.
"""

from __future__ import annotations

from ..ir import Block, CompilationError, Function, Operation
from . import control, debug_print, elementwise, layout_ops, mbarrier, memory, reduce, shared_memory  # noqa: F401  (register rules)
from . import wgmma  # noqa: F401  (registers the warpgroup MMA rules)
from . import tma  # noqa: F401  (registers the TMA copy rules)
from .context import KernelLowering
from .registry import LOWERINGS
from .smem_plan import check_budget
from .targets import Target

__all__ = ["lower_to_llvm", "lower_block", "LOWERINGS"]

REGION_TERMINATORS = ("yield", "condition")


def lower_to_llvm(func: Function, target: Target) -> KernelLowering:
    """Lower kernel ``func`` (layouts already concrete) for ``target``.

    Returns the lowering state: its ``module`` is the LLVM module, its ``shared_bytes``
    the dynamic shared memory the kernel needs (buffers, then scratch), checked against
    the target's limit.
    """
    ctx = KernelLowering(func, target)
    terminator = lower_block(ctx, func.body)
    if terminator is not None:
        raise CompilationError("a kernel body must end with return, not with " + terminator.name, terminator.loc)
    ctx.shared_bytes = check_budget(func, ctx.shared_plan, ctx.scratch_bytes, target.max_shared_memory_per_block,
                                    target.arch)
    return ctx


def lower_block(ctx: KernelLowering, block: Block) -> Operation | None:
    """Lower every op of ``block``; returns its ``yield``/``condition`` terminator, if any."""
    for op in block.ops:
        ctx.builder.debug_metadata = ctx.debug.location(op.loc)
        if op.name in REGION_TERMINATORS:
            return op
        rule = LOWERINGS.get(op.name)
        if rule is None:
            raise CompilationError(f"{op.name} cannot be lowered to the GPU yet", op.loc)
        rule(ctx, op)
    return None
