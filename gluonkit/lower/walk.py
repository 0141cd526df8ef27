"""The block walker: lowers each op of a block by its rule in :data:`~.registry.LOWERINGS`.

Kept apart from :mod:`.codegen` (which imports every rule module) so that rules with
regions (``for``, ``if``, ``while``, reductions) can recurse into it without an import circle.
"""

from __future__ import annotations

from ..ir import Block, CompilationError, Operation
from .context import KernelLowering
from .memplan.scratch import wait_for_peers
from .registry import LOWERINGS

REGION_TERMINATORS = ("yield", "condition")
# Ops before which a pending cluster-barrier wait (memplan/scratch.py) is emitted: control flow
# (the wait stays in the block that arrived), other cluster barriers and the end of a block
# (but not of a combine or map function of reduce, scan, map_elementwise: inline scalar code).
# ``local_alloc`` too: a buffer planned into bytes scratch used must not be written while peers read them.
_WAIT_FOR_PEERS_BEFORE = REGION_TERMINATORS + ("return", "if", "for", "while", "warp_specialize",
                                               "cluster_barrier", "inline_asm_elementwise", "local_alloc")


def lower_block(ctx: KernelLowering, block: Block) -> Operation | None:
    """Lower every op of ``block``; returns its ``yield``/``condition`` terminator, if any."""
    for op in block.ops:
        ctx.builder.debug_metadata = ctx.debug.location(op.loc)
        if op.name in _WAIT_FOR_PEERS_BEFORE and not _combine_region(block):
            wait_for_peers(ctx)
        if op.name in REGION_TERMINATORS:
            return op
        rule = LOWERINGS.get(op.name)
        if rule is None:
            raise CompilationError(f"{op.name} cannot be lowered to the GPU yet", op.loc)
        if ctx.instrumentation is None:
            rule(ctx, op)
        else:  # a measured-timeline build (lower/instrument.py)
            ctx.instrumentation.before(ctx.builder, op)
            rule(ctx, op)
            ctx.instrumentation.after(ctx.builder, op)
    return None


def _combine_region(block: Block) -> bool:
    return block.parent_op is not None and block.parent_op.name in ("reduce", "scan", "map_elementwise")
