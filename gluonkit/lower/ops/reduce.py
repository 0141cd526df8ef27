"""Lowering of ``reduce``: within each thread, then across lanes, then across warps.

From the operand's linear layout ``L`` and the axis:

1. registers holding the same element are counted once, and registers that differ only
   along the axis are combined as a balanced tree in register order
   (:func:`~gluonkit.ir.reduce_order.combine_pairwise`);
2. each lane bit whose basis moves only along the axis is combined with a butterfly
   shuffle (``shfl.sync.bfly``), highest bit first; broadcast lane bits are skipped;
3. if warp bits move along the axis, every thread writes its partial results to scratch
   shared memory at (kept element, warp's position along the axis) and, after a barrier,
   each thread combines the partials of the elements its result holds in the same
   butterfly order over the warp bits;
4. if the operand's ``cga_layout`` splits the axis between the CTAs of a cluster, the CTAs'
   partials are exchanged through distributed shared memory and combined in CTA order
   (:mod:`.reduce_across_ctas`).

The order is the interpreter's (:mod:`gluonkit.interpret.reduce`), so floating-point
results agree bit for bit between the GPU and the CPU.

A lane or warp basis that moves along the axis *and* another dimension cannot be reduced
in place; the error suggests converting to a layout that keeps the axis separate.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, TensorType
from ...ir.reduce_order import combine_butterfly, combine_pairwise
from ..memplan import scratch as scratch
from ..context import KernelLowering
from ..llvm_types import I32, byte_size, llvm_type
from ..registry import lowering
from ..walk import lower_block
from ..memplan.scratch_size import packed_arrays
from ..memplan.scratch_use import cta_axis_bits, moves_along_axis, warp_axis_bits
from .reduce_across_ctas import combine_across_ctas
from .shuffle import shuffle

__all__: List[str] = []


def _combine(ctx: KernelLowering, op: Operation, lhs: List[lir.Value], rhs: List[lir.Value]) -> List[lir.Value]:
    """Apply the reduce op's combine region to two tuples of scalars."""

    region = op.regions[0]
    for arg, value in zip(region.args, lhs + rhs):
        ctx.set(arg, value)
    terminator = lower_block(ctx, region)
    return [ctx.get(v) for v in terminator.operands]


@lowering("reduce")
def _reduce(ctx: KernelLowering, op: Operation) -> None:
    axis = op.attrs["axis"]
    src_ty: TensorType = op.operands[0].type
    ll = ctx.linear_layout(src_ty)
    cta_bits = cta_axis_bits(op, ll)
    outputs = _reduce_in_cta(ctx, op, ll, axis)
    if cta_bits:
        outputs = combine_across_ctas(ctx, op, outputs, cta_bits, lambda lhs, rhs: _combine(ctx, op, lhs, rhs),
                                      exchanged_across_warps=bool(warp_axis_bits(op, ll)))
    for result, values in zip(op.results, outputs):
        ctx.set(result, values[0] if not isinstance(result.type, TensorType) else values)


def _reduce_in_cta(ctx: KernelLowering, op: Operation, ll, axis: int) -> List[List[lir.Value]]:
    """This CTA's reduction: for each result, its registers (one value for a scalar result)."""
    operands = [ctx.get(v) for v in op.operands]
    # 1. Within the thread: one partial per kept (non-axis) register coordinate.
    members: Dict[Tuple[int, ...], List[List[lir.Value]]] = {}
    seen = set()
    for r in range(ll.in_dim_size("register")):
        coord = tuple(ll.apply({"register": r}).values())
        if coord in seen:
            continue
        seen.add(coord)
        members.setdefault(coord[:axis] + coord[axis + 1:], []).append([regs[r] for regs in operands])
    def combine(lhs, rhs):
        return _combine(ctx, op, lhs, rhs)
    partials: Dict[Tuple[int, ...], List[lir.Value]] = {
        kept: combine_pairwise(values, combine) for kept, values in members.items()}
    # 2. Across lanes.
    for bit, basis in reversed(list(enumerate(ll.bases.get("lane", [])))):  # highest bit first
        if moves_along_axis(op, basis, axis, "lane"):
            for kept, values in partials.items():
                other = [shuffle(ctx, "bfly", v, I32(1 << bit)) for v in values]
                partials[kept] = _combine(ctx, op, values, other)
    warp_bits = warp_axis_bits(op, ll)
    results = op.results
    if not isinstance(results[0].type, TensorType):  # a 1-D reduction to scalars
        final = _across_warps_scalar(ctx, op, partials[()], warp_bits) if warp_bits else partials[()]
        return [[value] for value in final]
    if warp_bits:
        return _across_warps(ctx, op, ll, axis, partials, warp_bits)
    # 4. No warp exchange: the result layout's registers pick this thread's partials.
    result_ll = ctx.linear_layout(results[0].type)
    thread_kept = [tuple(c for d, c in enumerate(v) if d != axis) for v in ll.bases.get("lane", []) + ll.bases.get("warp", [])]
    thread_result = [tuple(v) for v in result_ll.bases.get("lane", []) + result_ll.bases.get("warp", [])]
    lane_axis = [bool(v[axis]) for v in ll.bases.get("lane", []) + ll.bases.get("warp", [])]
    expected = [(0,) * len(t) if along else t for t, along in zip(thread_kept, lane_axis)]
    if expected != thread_result:
        raise CompilationError(f"reduce result layout {results[0].type.layout!r} does not keep each partial in "
                               "its thread; use the slice of the operand's layout", op.loc)
    return [[partials[tuple(result_ll.apply({"register": r}).values())][i]
             for r in range(result_ll.in_dim_size("register"))] for i in range(len(results))]


def _warp_axis_index(ctx: KernelLowering, warp_bits: List[int]) -> lir.Value:
    """This warp's position along the axis: its axis warp bits packed together."""
    b = ctx.builder
    index = I32(0)
    for i, bit in enumerate(warp_bits):
        is_set = b.and_(b.lshr(ctx.warp, I32(bit)), I32(1))
        index = b.or_(index, b.shl(is_set, I32(i)))
    return index


def _butterfly(ctx, op, partials: List[List[lir.Value]]) -> List[lir.Value]:
    """Combine per-warp partials in the interpreter's butterfly order (highest warp bit
    first), as warp 0 sees it; with a commutative combine every warp gets these bits."""
    return combine_butterfly(partials, lambda lhs, rhs: _combine(ctx, op, lhs, rhs))


def _across_warps_scalar(ctx, op, values, warp_bits) -> List[lir.Value]:
    """Every thread gets the combination of all warps' partials of a 1-D reduction."""
    slots = 1 << len(warp_bits)
    b = ctx.builder
    index = _warp_axis_index(ctx, warp_bits)
    starts, _ = packed_arrays([byte_size(v.type) for v in values], slots)
    scratch.begin_use(ctx, op)
    for v, start in zip(values, starts):
        scratch.store_scratch(ctx, [v], [b.add(I32(start), index)])
    scratch.barrier(ctx)
    partials = [[scratch.load_scratch(ctx, v.type, [I32(start + w)])[0] for v, start in zip(values, starts)]
                for w in range(slots)]
    return _butterfly(ctx, op, partials)


def _across_warps(ctx, op, ll, axis, partials, warp_bits) -> List[List[lir.Value]]:
    """Exchange partials through scratch: slot = kept element (row-major) * warps + warp."""
    b = ctx.builder
    slots = 1 << len(warp_bits)
    src_ty = op.operands[0].type
    kept_shape = [s for d, s in enumerate(src_ty.shape) if d != axis]
    kept_count = 1
    for s in kept_shape:
        kept_count *= s
    types = [llvm_type(r.type) for r in op.results]
    regions, _ = packed_arrays([byte_size(ty) for ty in types], kept_count * slots)
    warp_index = _warp_axis_index(ctx, warp_bits)
    thread_coords = ctx.element_coordinates(src_ty)
    scratch.begin_use(ctx, op)
    written = set()
    for r in range(ll.in_dim_size("register")):
        kept = tuple(c for d, c in enumerate(ll.apply({"register": r}).values()) if d != axis)
        if kept in written:
            continue
        written.add(kept)
        coords = [c for d, c in enumerate(thread_coords[r]) if d != axis]
        element = scratch.row_major_offset(ctx, coords, kept_shape)
        slot = b.add(b.mul(element, I32(slots)), warp_index)
        for value, region in zip(partials[kept], regions):
            scratch.store_scratch(ctx, [value], [b.add(slot, I32(region))])
    scratch.barrier(ctx)
    result_coords = ctx.element_coordinates(op.results[0].type)
    outputs = [[] for _ in op.results]
    for coords in result_coords:
        element = scratch.row_major_offset(ctx, coords, kept_shape)
        partials = []
        for w in range(slots):
            slot = b.add(b.mul(element, I32(slots)), I32(w))
            partials.append([scratch.load_scratch(ctx, ty, [b.add(slot, I32(region))])[0]
                             for ty, region in zip(types, regions)])
        combined = _butterfly(ctx, op, partials)
        for out, value in zip(outputs, combined):
            out.append(value)
    return outputs
