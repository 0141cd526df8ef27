"""Lowering of ``tcgen05_copy`` and ``tcgen05_mma_scaled`` (sm_100a): ``tcgen05.cp`` and block-scaled ``tcgen05.mma``.

Both are issued by thread 0 of the program after the thread-sync fences and barrier that
:mod:`gluonkit.lower.nvidia.tcgen05` puts before a plain MMA (so stores of other threads are ordered first).

**Copy of a tile** (dst in a ``TensorMemoryLayout``, 32-bit elements).  One
``tcgen05.cp.cta_group::1.128x256b [taddr], sdesc`` per 8 columns of the view's 128 lanes
(:func:`tile_copy_plan`): the lanes and columns reach shared memory through dst's and src's
layouts, and each 128 x 8 block must be a K-major canonical operand of 128 rows x 32 bytes
(:func:`.wgmma_descriptor.plan_bits`); ``sdesc`` is then the matrix descriptor a
``tcgen05.mma`` would use for it.  These are the copies Triton 3.9 emits (it never uses the
``128x128b``, ``4x256b`` or ``64x128b`` shapes for Gluon's layouts).

**Copy of block scales.**  One ``tcgen05.cp.cta_group::1.warpx4.32x128b [taddr], sdesc`` per 128-row x
4-scale chunk (:func:`gluonkit.ir.verify_tcgen05_scaled.copy_chunks`), in destination column
order: ``taddr`` is the view's TMEM address plus the chunk's column, ``sdesc`` a shared-memory
descriptor of 32 rows of 16 bytes without swizzle: start address >> 4, stride byte offset 128
(8 rows of 16 bytes), version 1 at bit 46 and, as Triton 3.9 writes it, the chunk's offset
bits 7-9 as the base offset at bits 49-51 (the hardware uses it for swizzled layouts only).  A CTA
pair's copy is ``cta_group::2``, issued by the even CTA, with the chunks of one CTA's share: each
CTA's share (at the same address in both) lands in its own tensor memory.

**MMA.**  One ``tcgen05.mma.cta_group::1.kind::K.block_scale.blockV [d], adesc, bdesc, idesc,
[scale_a], [scale_b], enable_d`` per 32 bytes of K (32 fp8 or 64 fp4 elements), with the
matrix descriptors of :mod:`gluonkit.lower.nvidia.tcgen05`.  Each step's scale addresses are the columns holding its
first scale and its instruction descriptor names the byte it starts at
(:func:`scaled_instruction_descriptor`); commits and the synchronous form are the plain MMA's.
"""

from __future__ import annotations

import llvmlite.ir as lir
import numpy as np

from ...ir import CompilationError, Operation
from ...ir.memdesc import cta_share_type, view_to_offset
from ...ir.tmem import cta_group, tile_layout
from ...ir.types import SharedMemoryDescType, TensorMemoryDescType, uint8
from ...ir.verify_tcgen05 import pair_mma_shape
from ...ir.verify_tcgen05_scaled import copy_chunks, pair_copy_shares, scale_cell, scaled_kind
from ...ir.verify_wgmma import is_k_major
from ...layouts.tmem import TMEM_ROWS, TensorMemoryLayout
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I1, I32, I64
from ..ops.shared_memory import order_access
from ..registry import lowering
from .mbarrier import elected_thread, even_cta
from .tcgen05 import _VERSION, _barrier_address, _commit, _start, _step, _wait_synchronously
from .tmem import synchronize
from .wgmma_descriptor import OperandDescriptor, describe_operand, plan_bits

__all__ = ["scaled_instruction_descriptor", "copy_descriptor_base", "tile_copy_plan"]

#: Operand type codes of the instruction descriptor, per kind (PTX ISA, "Instruction descriptor").
_FORMAT_CODES = {"mxf8f6f4": {"e4m3": 0, "e5m2": 1, "e2m1": 5}, "mxf4": {"e2m1": 1}, "mxf4nvf4": {"e2m1": 1}}
_STEP_BYTES = 32  # K bytes of one block-scaled tcgen05.mma
_ROW_GROUP_BYTES = 128  # 8 rows of 16 bytes: the copy descriptor's stride byte offset
_COLUMNS = 8  # 32-bit columns one tcgen05.cp.128x256b fills


def scaled_instruction_descriptor(kind: str, a_type: str, b_type: str, ue8m0: bool, a_k_major: bool,
                                  b_k_major: bool, m: int, n: int, a_id: int, b_id: int) -> int:
    """The 32-bit instruction descriptor of ``kind::mxf8f6f4|mxf4|mxf4nvf4`` with block scaling.

    Bits: B scale byte 4-5, A type 7-9, B type 10-12, A/B MN-major 15/16, N >> 3 at 17,
    scale type (1: UE8M0, 0: UE4M3) 23, M >> 4 at 24, A scale byte 29-30.
    """
    codes = _FORMAT_CODES[kind]
    return (b_id << 4 | codes[a_type] << 7 | codes[b_type] << 10 | (0 if a_k_major else 1) << 15
            | (0 if b_k_major else 1) << 16 | (n >> 3) << 17 | int(ue8m0) << 23 | (m >> 4) << 24 | a_id << 29)


def copy_descriptor_base(offset: int) -> int:
    """The copy descriptor's fields other than the start address, for a chunk ``offset`` bytes into the view."""
    return (_ROW_GROUP_BYTES >> 4) << 32 | _VERSION | ((offset >> 7) & 7) << 49


def _sm100(ctx: KernelLowering, op: Operation) -> None:
    if ctx.target.arch != "sm_100a":
        raise CompilationError(f"{op.name}: tcgen05 is a Blackwell (sm_100a) instruction; {ctx.target.arch} has none; "
                               "compile for target='sm_100a'", op.loc)


def _group(ctx: KernelLowering, op: Operation, two_ctas: bool) -> int:
    """The op's cta_group (2 for a CTA pair's tensor memory), which must be the kernel's."""
    group = 2 if two_ctas else 1
    if group != cta_group(ctx.func):
        raise CompilationError(f"{op.name}: every tcgen05 instruction of a kernel uses one cta_group (PTX ISA); this "
                               f"kernel's is {cta_group(ctx.func)}, but this op's tensor memory makes it {group}",
                               op.loc)
    return group


def _column(ctx: KernelLowering, value, column: int) -> lir.Value:
    """The TMEM address ``column`` columns past a descriptor's (``lane << 16 | column``)."""
    address = ctx.get(value)
    return ctx.builder.add(address, I32(column)) if column else address


def _tile_bytes(src: SharedMemoryDescType, dst: TensorMemoryDescType, xor: int) -> np.ndarray:
    """``[lane, column]`` → byte offset in shared memory of the element a copy puts there (-1: not in the view)."""
    m, n = dst.shape
    inverse = tile_layout(dst).pseudoinvert().resize_in_dim("dim0", m).resize_in_dim("dim1", n)
    cells = inverse.transpose_outs(["row", "col"]).table()  # dim0 minor, as view_to_offset's table
    offsets = (view_to_offset(src).table()[:, 0] ^ xor) * src.element.itemsize
    table = np.full((TMEM_ROWS, max(1, int(cells[:, 1].max()) + 1)), -1, dtype=np.int64)
    table[cells[:, 0], cells[:, 1]] = offsets
    return table


def _atom(src: SharedMemoryDescType, block: np.ndarray, align: int):
    """The descriptor plan of one ``128 x C`` block of :func:`_tile_bytes` read as K-major rows, or why not."""
    constant = int(block[0, 0])
    if (block < 0).any():
        return "the view does not fill all 128 lanes of these columns"
    rows, cols = block.shape
    mn_bits = [int(block[1 << b, 0]) ^ constant for b in range(rows.bit_length() - 1)]
    k_bits = [int(block[0, 1 << b]) ^ constant for b in range(cols.bit_length() - 1)]
    linear = np.full(block.shape, constant, dtype=np.int64)
    for b, bit in enumerate(mn_bits):
        linear ^= np.where(np.arange(rows)[:, None] >> b & 1, bit, 0)
    for b, bit in enumerate(k_bits):
        linear ^= np.where(np.arange(cols)[None, :] >> b & 1, bit, 0)
    if not np.array_equal(linear, block):
        return "its elements are not a linear image of the lanes and columns"
    reasons = []
    declared = getattr(src.layout, "swizzle_byte_width", 0)
    for swizzle in dict.fromkeys([declared, 128, 64, 32, 0]):
        plan = plan_bits(src, mn_bits, k_bits, constant, align, rows, cols, swizzle, "the rows")
        if isinstance(plan, OperandDescriptor) and plan.k_major:
            return plan
        reasons.append(plan if isinstance(plan, str) else "its rows are not contiguous")
    return reasons[0]


def tile_copy_plan(src: SharedMemoryDescType, dst: TensorMemoryDescType, xor: int, align: int, loc):
    """``(column, plan)`` of each ``tcgen05.cp.128x256b`` copying ``src`` into the TensorMemoryLayout tile ``dst``.

    Eight 32-bit columns of all 128 lanes at a time (the shape Triton 3.9 emits for these copies):
    each such block must be a K-major canonical layout of :mod:`.wgmma_descriptor` (128 rows of 32
    bytes in a swizzle mode the tensor cores know); anything else is a :class:`CompilationError` at
    the user's line.
    """
    table = _tile_bytes(src, dst, xor)
    copies = []
    for c0 in range(0, table.shape[1], _COLUMNS):
        block = table[:, c0:c0 + _COLUMNS]
        plan = _atom(src, block, align) if block.shape[1] == _COLUMNS else "the tile has fewer than 8 columns"
        if not isinstance(plan, OperandDescriptor):
            raise CompilationError(f"tcgen05_copy: tcgen05.cp.128x256b cannot fill tensor memory columns "
                                   f"{c0}..{c0 + _COLUMNS - 1} of {dst} from the shared view {src}: {plan}; store "
                                   "the tile in a swizzled NVMMASharedLayout (not transposed) of the same shape, "
                                   "with dst's block N at least 8 when M is 256", loc)
        copies.append((c0, plan))
    return copies


def _issuer(ctx: KernelLowering, op: Operation, pointer) -> lir.Value:
    """Order the copy after earlier shared/tensor memory accesses; the elected issuing thread."""
    if pointer.align % 16:
        raise CompilationError(f"tcgen05_copy: the shared view is only known to be {pointer.align}-byte aligned; "
                               "tcgen05.cp reads 16-byte aligned rows", op.loc)
    order_access(ctx, op)
    synchronize(ctx)
    return elected_thread(ctx, None)


@lowering("tcgen05_copy")
def _tcgen05_copy(ctx: KernelLowering, op: Operation) -> None:
    _sm100(ctx, op)
    src, dst = op.operands
    pointer = ctx.get(src)
    b = ctx.builder
    if isinstance(dst.type.layout, TensorMemoryLayout):
        _group(ctx, op, False)  # (tiles: one CTA's copies only, as in Gluon 3.9)
        copies = tile_copy_plan(src.type, dst.type, pointer.xor, pointer.align, op.loc)
        issuer = _issuer(ctx, op, pointer)
        for column, plan in copies:
            desc = _step(ctx, _start(ctx, pointer, plan), plan, 0)
            emit_ptx(b, "@$2 tcgen05.cp.cta_group::1.128x256b [$0], $1;", "r,l,b",
                     [_column(ctx, dst, column), desc, issuer])
        return
    # A CTA pair's copy (dst split over the pair): issued by the even CTA, each CTA's share of src (at the same
    # address in both) landing in its own tensor memory.
    group = _group(ctx, op, bool(dst.type.layout.cga_layout))
    src_ty, dst_ty = pair_copy_shares(src.type, dst.type) if group == 2 else (src.type, dst.type)
    chunks = copy_chunks(src_ty, dst_ty, pointer.xor)
    if isinstance(chunks, str):
        raise CompilationError(f"tcgen05_copy: {chunks}", op.loc)
    issuer = _issuer(ctx, op, pointer)
    if group == 2:
        issuer = b.and_(issuer, even_cta(ctx))
    address = b.ptrtoint(pointer.pointer, I32)
    start = b.zext(b.and_(b.lshr(address, I32(4)), I32(0x3FFF)), I64)
    for offset, column in chunks:
        desc = b.or_(b.add(start, I64(offset >> 4)) if offset else start, I64(copy_descriptor_base(offset)))
        emit_ptx(b, f"@$2 tcgen05.cp.cta_group::{group}.warpx4.32x128b [$0], $1;", "r,l,b",
                 [_column(ctx, dst, column), desc, issuer])


@lowering("tcgen05_mma_scaled")
def _tcgen05_mma_scaled(ctx: KernelLowering, op: Operation) -> None:
    _sm100(ctx, op)
    a, b_value, acc, a_scale, b_scale = op.operands[:5]
    a_type, b_type, n_bars = op.attrs["a_type"], op.attrs["b_type"], op.attrs["num_barriers"]
    kind, vec = scaled_kind(a_type, b_type, a_scale.type.element)
    m, n = pair_mma_shape(acc.type)  # one instruction's (a cluster of pairs holds one per pair)
    group = _group(ctx, op, acc.type.layout.two_ctas)
    # cta_group::2: the descriptors describe each CTA's share, the instruction descriptor the whole [M, N].
    a_share, b_share = cta_share_type(a.type), cta_share_type(b_value.type)
    order_access(ctx, op)
    a_plan = describe_operand(a_share, 0, ctx.get(a).xor, ctx.get(a).align, a_share.shape[0], _STEP_BYTES, op.loc)
    b_plan = describe_operand(b_share, 1, ctx.get(b_value).xor, ctx.get(b_value).align, b_share.shape[1], _STEP_BYTES,
                              op.loc)
    a_k_major, b_k_major = is_k_major(a_share, 0), is_k_major(b_share, 1)
    b = ctx.builder
    synchronize(ctx)
    issuer = elected_thread(ctx, ctx.get(op.operands[6]))
    if group == 2:  # the even CTA of the pair issues the pair's MMA
        issuer = b.and_(issuer, even_cta(ctx))
    a_start, b_start = _start(ctx, ctx.get(a), a_plan), _start(ctx, ctx.get(b_value), b_plan)
    text = (f"@$7 tcgen05.mma.cta_group::{group}.kind::{kind}.block_scale.block{vec} [$0], $1, $2, $3, "
            "[$4], [$5], $6;")
    per_step = _STEP_BYTES * (2 if a_type == "e2m1" else 1)  # elements of K
    for step in range(a.type.shape[1] // _STEP_BYTES):
        k = step * _STEP_BYTES
        first_scale = step * per_step // vec
        (a_col, a_id), (b_col, b_id) = scale_cell(a_scale.type, first_scale), scale_cell(b_scale.type, first_scale)
        idesc = scaled_instruction_descriptor(kind, a_type, b_type, a_scale.type.element == uint8, a_k_major,
                                              b_k_major, m, n, a_id, b_id)
        enable_d = ctx.get(op.operands[5]) if step == 0 else I1(1)
        emit_ptx(b, text, "r,l,l,r,r,r,b,b", [ctx.get(acc), _step(ctx, a_start, a_plan, k),
                                              _step(ctx, b_start, b_plan, k), I32(idesc),
                                              _column(ctx, a_scale, a_col), _column(ctx, b_scale, b_col), enable_d,
                                              issuer])
    for i in range(n_bars):
        _commit(ctx, _barrier_address(ctx, op.operands[7 + i]), b.and_(issuer, ctx.get(op.operands[7 + n_bars + i])),
                group, op.attrs.get("multicast_bits", ()))
    if not op.attrs["is_async"]:
        _wait_synchronously(ctx, issuer)

