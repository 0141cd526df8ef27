"""Lowering of ``scan``, ``histogram``, ``gather`` and ``map_elementwise``.

``scan``: each bit ``j`` of the position along the axis is carried by one register, lane
or warp bit of the operand's linear layout.  Every register keeps ``P`` (the scan so far
inside its aligned block of ``2^j`` positions) and ``T`` (that block's total); for each
bit, from the lowest, the two halves of each block of ``2^(j+1)`` meet — between
registers of a thread, by a butterfly shuffle between lanes, or through scratch shared
memory between warps — and with ``e`` the earlier half and ``l`` the later one::

    T = f(T_e, T_l)  (both halves)        P_l = f(T_e, P_l)

This is the interpreter's order (:mod:`gluonkit.interpret.collective`), so results agree
bit for bit.  A layout basis that moves along the axis and another dimension, or along
the axis by a non-power of two, is refused with the advice to convert the layout.

``histogram`` zeroes ``num_bins`` int32 counters in scratch memory, adds each element
held by its first owner with a shared-memory atomic, and reads the counts back in the
result layout.  ``gather`` writes the source to scratch memory row-major and reads the
index-chosen elements.  ``map_elementwise`` lowers its region once per group of ``pack``
consecutive registers.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, TensorType
from ..context import KernelLowering
from ..llvm_types import I1, I32, byte_size, llvm_type
from ..memplan import scratch as scratch
from ..memplan.scratch_size import packed_arrays
from ..registry import lowering
from ..walk import lower_block
from .shuffle import shuffle

__all__: List[str] = []


def _apply(ctx: KernelLowering, block, args: List[lir.Value]) -> List[lir.Value]:
    """Lower ``block`` (a combine or mapped function) on scalar ``args``; its yielded values."""
    for arg, value in zip(block.args, args):
        ctx.set(arg, value)
    terminator = lower_block(ctx, block)
    return [ctx.get(v) for v in terminator.operands]


# ----------------------------------------------------------------------------- scan
def _axis_bits(op: Operation, ll, axis: int) -> Dict[int, Tuple[str, int]]:
    """Axis position bit → (input dim, bit) of the layout that carries it."""
    owners: Dict[int, Tuple[str, int]] = {}
    for dim in ("register", "lane", "warp", "block"):
        for bit, basis in enumerate(ll.bases.get(dim, [])):
            along = basis[axis]
            if not along:
                continue
            if dim == "block" or along & (along - 1) or any(c for d, c in enumerate(basis) if d != axis) \
                    or along.bit_length() - 1 in owners:
                raise CompilationError(
                    f"scan along axis {axis}: the {dim} basis {basis} of the operand's layout "
                    f"{op.operands[0].type.layout!r} does not move along the axis alone by a power of two; "
                    "convert_layout the operand to a blocked layout first (a block basis: scans across the CTAs of a "
                    "cluster are not built; use a cga_layout that keeps the axis in each CTA)", op.loc)
            owners[along.bit_length() - 1] = (dim, bit)
    return owners


@lowering("scan")
def _scan(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    ty: TensorType = op.operands[0].type
    ll = ctx.linear_layout(ty)
    combine = op.regions[0]
    n_regs = ll.in_dim_size("register")
    operands = [ctx.get(v) for v in op.operands]
    prefix = [[regs[r] for regs in operands] for r in range(n_regs)]
    total = [list(p) for p in prefix]
    owners = _axis_bits(op, ll, axis)
    coords = None
    for j in range(ty.shape[axis].bit_length() - 1):
        dim, bit = owners[j]
        if dim == "register":
            for r in range(n_regs):
                if r >> bit & 1:
                    continue
                lo, hi = r, r | (1 << bit)
                e, l_ = (hi, lo) if reverse else (lo, hi)
                new_total = _apply(ctx, combine, total[e] + total[l_])
                prefix[l_] = _apply(ctx, combine, total[e] + prefix[l_])
                total[lo], total[hi] = new_total, list(new_total)
            continue
        index = ctx.lane if dim == "lane" else ctx.warp
        upper = b.trunc(b.lshr(index, I32(bit)), I1)
        later = b.not_(upper) if reverse else upper
        if dim == "lane":
            other = [[shuffle(ctx, "bfly", v, I32(1 << bit)) for v in total[r]] for r in range(n_regs)]
        else:
            coords = coords or ctx.element_coordinates(ty)
            other = _exchange_across_warps(ctx, op, ty, coords, total, axis, 1 << j)
        for r in range(n_regs):
            mine, theirs = total[r], other[r]
            first = [b.select(later, t, m) for m, t in zip(mine, theirs)]
            second = [b.select(later, m, t) for m, t in zip(mine, theirs)]
            total[r] = _apply(ctx, combine, first + second)
            combined = _apply(ctx, combine, theirs + prefix[r])
            prefix[r] = [b.select(later, c, p) for c, p in zip(combined, prefix[r])]
    for i, result in enumerate(op.results):
        ctx.set(result, [prefix[r][i] for r in range(n_regs)])


def _exchange_across_warps(ctx, op, ty, coords, total, axis: int, step: int) -> List[List[lir.Value]]:
    """Each register's ``T`` as held for the element ``step`` further along the axis (XOR),
    through scratch memory: one row-major array per operand."""
    b = ctx.builder
    types = [llvm_type(r.type.element) for r in op.results]
    bases, _ = packed_arrays([byte_size(t) for t in types], ty.numel)
    scratch.begin_use(ctx, op)
    for r, values in enumerate(total):
        element = scratch.row_major_offset(ctx, coords[r], ty.shape)
        for v, base in zip(values, bases):
            scratch.store_scratch(ctx, [v], [b.add(element, I32(base))])
    scratch.barrier(ctx)
    out = []
    for r in range(len(total)):
        partner = list(coords[r])
        partner[axis] = b.xor(partner[axis], I32(step))
        element = scratch.row_major_offset(ctx, partner, ty.shape)
        out.append([scratch.load_scratch(ctx, t, [b.add(element, I32(base))])[0] for t, base in zip(types, bases)])
    return out


# ------------------------------------------------------------------------ histogram
def _first_owner(ctx: KernelLowering, ll) -> lir.Value:
    """Whether this thread holds the first copy of its elements: its lane and warp bits
    whose bases are zero (replication) are all clear."""
    b = ctx.builder
    owner = I1(1)
    for dim, index in (("lane", ctx.lane), ("warp", ctx.warp)):
        for bit, basis in enumerate(ll.bases.get(dim, [])):
            if not any(basis):
                clear = b.icmp_unsigned("==", b.and_(index, I32(1 << bit)), I32(0))
                owner = b.and_(owner, clear)
    return owner


def _unique_registers(ll) -> List[int]:
    seen, regs = set(), []
    for r in range(ll.in_dim_size("register")):
        coord = tuple(ll.apply({"register": r}).values())
        if coord not in seen:
            seen.add(coord)
            regs.append(r)
    return regs


@lowering("histogram")
def _histogram(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    bins = op.attrs["num_bins"]
    x_ty: TensorType = op.operands[0].type
    ll = ctx.linear_layout(x_ty)
    values = ctx.get(op.operands[0])
    mask = ctx.get(op.operands[1]) if op.attrs["has_mask"] else None
    scratch.begin_use(ctx, op)
    tid = b.add(ctx.lane, b.mul(ctx.warp, I32(32)))
    threads = ctx.num_threads
    for start in range(0, bins, threads):
        slot = b.add(tid, I32(start))
        if start + threads <= bins:
            scratch.store_scratch(ctx, [I32(0)], [slot])
        else:
            with b.if_then(b.icmp_unsigned("<", slot, I32(bins))):
                scratch.store_scratch(ctx, [I32(0)], [slot])
    scratch.barrier(ctx)
    owner = _first_owner(ctx, ll)
    signed = x_ty.element.is_int_signed()
    for r in _unique_registers(ll):
        v = values[r]
        width = v.type.width
        ok = owner
        if signed:
            ok = b.and_(ok, b.icmp_signed(">=", v, lir.Constant(v.type, 0)))
        if bins < 1 << (width - signed):  # else every non-negative value is a bin
            ok = b.and_(ok, b.icmp_unsigned("<", v, lir.Constant(v.type, bins)))
        if mask is not None:
            ok = b.and_(ok, mask[r])
        with b.if_then(ok):
            slot = b.trunc(v, I32) if width > 32 else (b.zext(v, I32) if width < 32 else v)
            b.atomic_rmw("add", scratch.scratch_pointer(ctx, I32, slot), I32(1), "monotonic")
    scratch.barrier(ctx)
    res_ty = op.results[0].type
    counts = [scratch.load_scratch(ctx, I32, [c[0]])[0] for c in ctx.element_coordinates(res_ty)]
    ctx.set(op.results[0], counts)


# --------------------------------------------------------------------------- gather
@lowering("gather")
def _gather(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    axis = op.attrs["axis"]
    src_ty: TensorType = op.operands[0].type
    idx_ty: TensorType = op.operands[1].type
    element = llvm_type(src_ty.element)
    scratch.begin_use(ctx, op)
    src = ctx.get(op.operands[0])
    src_coords = ctx.element_coordinates(src_ty)
    for r in _unique_registers(ctx.linear_layout(src_ty)):
        scratch.store_scratch(ctx, [src[r]], [scratch.row_major_offset(ctx, src_coords[r], src_ty.shape)])
    scratch.barrier(ctx)
    index = ctx.get(op.operands[1])
    out = []
    for r, coords in enumerate(ctx.element_coordinates(idx_ty)):
        i = index[r]
        i = b.trunc(i, I32) if i.type.width > 32 else (b.zext(i, I32) if i.type.width < 32 else i)
        coords = list(coords)
        coords[axis] = b.and_(i, I32(src_ty.shape[axis] - 1))  # stay inside the scratch array
        out.append(scratch.load_scratch(ctx, element, [scratch.row_major_offset(ctx, coords, src_ty.shape)])[0])
    ctx.set(op.results[0], out)


# ------------------------------------------------------------------ map_elementwise
@lowering("map_elementwise")
def _map_elementwise(ctx: KernelLowering, op: Operation) -> None:
    pack = op.attrs["pack"]
    fn = op.regions[0]
    operands = [ctx.get(v) for v in op.operands]
    n_regs = len(operands[0])
    if n_regs % pack:
        raise CompilationError(
            f"map_elementwise: each thread holds {n_regs} register(s) of the operands' layout, not a multiple of "
            f"pack={pack}; choose a layout with a multiple of {pack} elements per thread", op.loc)
    results: List[List[lir.Value]] = [[] for _ in op.results]
    for g in range(0, n_regs, pack):
        out = _apply(ctx, fn, [regs[g + k] for regs in operands for k in range(pack)])
        for i in range(len(op.results)):
            results[i].extend(out[i * pack:(i + 1) * pack])
    for result, values in zip(op.results, results):
        ctx.set(result, values)
