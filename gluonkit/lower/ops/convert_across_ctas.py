"""``convert_layout`` between layouts that place elements on the CTAs of a cluster differently.

When the ``block`` bases (``cga_layout``) of the source and destination layouts differ, a
CTA may need elements another CTA holds (a split row gathered on every CTA, a split moved
from rows to columns …).  Through distributed shared memory:

1. every thread stores its source registers in its CTA's scratch memory, each element at its
   row-major index within the CTA's share (its coordinates with the ``block`` bits masked
   off: the source's CTA bases must take bits of the coordinates that no register, lane or
   warp basis takes, which Gluon's contiguous ``cga_layout`` chunks always do);
2. a cluster barrier;
3. every thread loads each destination register from the CTA that holds the element in the
   source layout (its rank's split bits from the element's coordinates; a bit along which the
   source is replicated keeps this CTA's own) — ``mapa.shared::cluster.u32`` +
   ``ld.shared::cluster``, one load per register;
4. a second cluster barrier before the scratch is reused or the CTA exits (its wait deferred:
   :func:`~..memplan.scratch.release_scratch_to_peers`).

A source replicated on the CTAs (no split) is read from each CTA's own copy; the loads still
go through ``shared::cluster`` addresses.  Like a reduction across CTAs, this cannot run
inside a ``warp_specialize`` partition.
"""

from __future__ import annotations

from typing import List

import llvmlite.ir as lir

from ...ir import CompilationError, Operation
from ..context import KernelLowering
from ..inline_ptx import CLUSTER_BARRIER, emit_ptx
from ..llvm_types import I32, bit_width
from ..memplan import scratch
from ..memplan.scratch_size import cluster_exchange_extents, local_coordinate_masks
from .dsmem import bits_type, from_bits, load_remote, require_every_thread, to_bits

__all__ = ["convert_across_ctas"]


def convert_across_ctas(ctx: KernelLowering, op: Operation, plan, values: List[lir.Value], element) -> List[lir.Value]:
    """The destination registers of a ``cluster_exchange`` conversion plan from the source's ``values``."""
    require_every_thread(ctx, op, "convert_layout between layouts with different cga_layouts")
    src, dst = plan.src, plan.dst
    masks = local_coordinate_masks(src)
    extents = cluster_exchange_extents(src)
    splits = _split_bits(op, src, masks)
    b = ctx.builder
    memory = bits_type(element)
    scratch.begin_use(ctx, op)
    for value, coords in zip(values, ctx.register_images(src)):
        b.store(to_bits(b, value), scratch.scratch_pointer(ctx, memory, _local_index(b, coords, masks, extents)))
    emit_ptx(b, CLUSTER_BARRIER)
    kept = ctx.func.num_ctas - 1 & ~sum(1 << bit for bit, _, _ in splits)  # replicated bits: this CTA's own
    own = b.and_(ctx.cta_rank(), I32(kept))
    out = []
    for coords in ctx.register_images(dst):
        rank = own
        for bit, dim, shift in splits:
            rank = b.or_(rank, b.shl(b.and_(b.lshr(coords[dim], I32(shift)), I32(1)), I32(bit)))
        pointer = scratch.scratch_pointer(ctx, memory, _local_index(b, coords, masks, extents))
        raw = load_remote(b, b.ptrtoint(pointer, I32), rank, bit_width(element))
        out.append(from_bits(b, raw, element))
    scratch.release_scratch_to_peers(ctx)
    return out


def _split_bits(op: Operation, ll, masks: List[int]) -> List[tuple]:
    """``(rank bit, dimension, coordinate bit)`` of each ``block`` basis that splits the source."""
    splits = []
    for bit, basis in enumerate(ll.bases.get("block", [])):
        moved = [(d, c) for d, c in enumerate(basis) if c]
        if not moved:
            continue
        d, c = moved[0]
        if len(moved) > 1 or c & (c - 1) or c & masks[d]:
            raise CompilationError(
                f"convert_layout: the source layout's CTA basis {list(basis)} (cga_layout bit {bit}) does not take a "
                "coordinate bit of its own (one dimension, a power of two above the bits each CTA's registers, lanes "
                "and warps cover); moving such a layout between CTAs is not built — use contiguous cga_layout chunks",
                op.loc)
        splits.append((bit, d, c.bit_length() - 1))
    return splits


def _local_index(b: lir.IRBuilder, coords: List[lir.Value], masks: List[int], extents: List[int]) -> lir.Value:
    """The element's row-major index within a CTA's share: its coordinates' local bits."""
    index = I32(0)
    stride = 1
    for c, mask, extent in zip(reversed(coords), reversed(masks), reversed(extents)):
        index = b.add(index, b.mul(b.and_(c, I32(mask)), I32(stride)))
        stride *= extent
    return index
