"""Lowering of Blackwell's TMA gather and scatter to ``cp.async.bulk.tensor.2d.tile::gather4`` / ``scatter4``.

One instruction moves four rows of one descriptor box (``[1, inner]``, the layout's TMA box
of the ``[1, BLOCK_Y]`` block) between global memory and shared memory; its coordinates are
``{column, row0, row1, row2, row3}``.  The offsets' layout (checked by
:mod:`gluonkit.ir.verify_tma_gather`) puts four consecutive offsets in four consecutive
registers of every lane of a warp, so each warp issues, from lane 0, one instruction per
group of four registers and per column box, as Triton 3.9 does.  Register groups that
repeat another (zero register bases) and warps that repeat another (zero warp bases) issue
nothing, so every row is moved once and a gather's bytes add up to the ``expect``.

The shared address of a group is the start of its four rows in the column box's region:
the box's offset plus ``row * inner`` elements — the unswizzled address, since TMA applies
the layout's swizzle from the address bits itself (the compile-time check below confirms
the layout puts rows ``inner`` elements apart, up to swizzle bits).

* ``async_tma_gather`` completes its bytes on the mbarrier, like a TMA load, and takes part
  in the barrier plan as an asynchronous write of the buffer.
* ``async_tma_scatter`` is one bulk group per issuing thread: ``cp.async.bulk.commit_group``
  runs in every thread (unpredicated; a thread that issued nothing commits an empty group),
  so ``tma.store_wait(n)`` counts the same groups in every thread.
"""

from __future__ import annotations

from typing import List, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, SharedMemoryDescType, TensorDescType
from ...ir.memdesc import view_to_offset
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I8, I32
from ..ops.shared_memory import SharedPointer, order_access
from ..registry import lowering

__all__: List[str] = []

_GATHER = ("@$0 cp.async.bulk.tensor.2d.tile::gather4.shared::cta.global.mbarrier::complete_tx::bytes "
           "[$1], [$2, {$3, $4, $5, $6, $7}], [$8];")
_SCATTER = "@$0 cp.async.bulk.tensor.2d.tile::scatter4.global.shared::cta.bulk_group [$1, {$2, $3, $4, $5, $6}], [$7];"


def _column_boxes(op: Operation, desc: TensorDescType, view: SharedMemoryDescType, xor: int) -> Tuple[int, list]:
    """(box width ``inner``, [(first column, element offset of its region)]) after checking the row stride."""
    inner = desc.layout.tma_block_shape(list(desc.block_shape))[1]
    rows, width = view.shape
    placement = view_to_offset(view)
    for bit in range(rows.bit_length() - 1):
        if placement.basis("dim0", bit)[0] & ~(inner - 1) != (1 << bit) * inner:
            raise CompilationError(f"{op.name}: the layout {desc.layout!r} does not put the rows of each "
                                   f"[{rows}, {inner}] box {inner} elements apart", op.loc)
    if xor % (rows * inner):
        raise CompilationError(f"{op.name}: the shared view does not start at a TMA box boundary", op.loc)
    return inner, [(c, placement.apply({"dim0": 0, "dim1": c})["offset"] ^ xor) for c in range(0, width, inner)]


def _instructions(ctx: KernelLowering, op: Operation, smem_index: int, offsets_index: int):
    """(issuing-thread predicate, [(shared address i32, [column, row0 … row3])] per instruction of this warp)."""
    if ctx.target.arch != "sm_100a":
        raise CompilationError(f"{op.name}: TMA gather and scatter are Blackwell (sm_100a) instructions; "
                               f"{ctx.target.arch} has none; compile for target='sm_100a'", op.loc)
    b = ctx.builder
    desc: TensorDescType = op.operands[0].type
    view: SharedMemoryDescType = op.operands[smem_index].type
    smem: SharedPointer = ctx.get(op.operands[smem_index])
    offsets_ty = op.operands[offsets_index].type
    offsets = ctx.get(op.operands[offsets_index])
    column = ctx.get(op.operands[offsets_index + 1])
    ll = ctx.linear_layout(offsets_ty)
    rows = ctx.register_images(ll)  # per register: this thread's row index (its offset's position)
    inner, boxes = _column_boxes(op, desc, view, smem.xor)
    repeated_regs = [bit for bit, basis in enumerate(ll.bases["register"]) if not any(basis)]
    repeated_warps = sum(1 << bit for bit, basis in enumerate(ll.bases.get("warp", [])) if not any(basis))
    issuer = b.icmp_unsigned("==", b.or_(ctx.lane, b.and_(ctx.warp, I32(repeated_warps))), I32(0))
    out = []
    for r in range(0, len(offsets), 4):
        if any((r >> bit) & 1 for bit in repeated_regs):
            continue
        row_offset = b.mul(rows[r][0], I32(inner))
        for first_column, region in boxes:
            element = b.add(row_offset, I32(region))
            pointer = b.gep(smem.pointer, [b.mul(element, I32(view.element.itemsize))], source_etype=I8)
            at = b.add(column, I32(first_column)) if first_column else column
            out.append((b.ptrtoint(pointer, I32), [at] + offsets[r:r + 4]))
    return issuer, out


@lowering("async_tma_gather")
def _gather(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    tmap = ctx.get(op.operands[0])
    bar = ctx.builder.ptrtoint(ctx.get(op.operands[2]).pointer, I32)
    issuer, copies = _instructions(ctx, op, 1, 4)
    pred = ctx.builder.and_(issuer, ctx.get(op.operands[3]))
    for dst, coords in copies:
        emit_ptx(ctx.builder, _GATHER, ",".join(["b", "r", "l"] + ["r"] * 6), [pred, dst, tmap] + coords + [bar])


@lowering("async_tma_scatter")
def _scatter(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    tmap = ctx.get(op.operands[0])
    pred, copies = _instructions(ctx, op, 1, 2)
    if ctx.func.num_ctas > 1:  # the CTAs hold the same rows: rank 0 writes them (context.cluster_leader)
        pred = ctx.builder.and_(pred, ctx.cluster_leader())
    for src, coords in copies:
        emit_ptx(ctx.builder, _SCATTER, ",".join(["b", "l"] + ["r"] * 6), [pred, tmap] + coords + [src])
    emit_ptx(ctx.builder, "cp.async.bulk.commit_group;", "", [])
