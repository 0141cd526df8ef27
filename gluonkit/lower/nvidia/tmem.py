"""Lowering of Blackwell tensor memory: allocation, views, ``tcgen05.ld`` / ``tcgen05.st``.

*Allocation.*  The kernel's columns are planned once (:func:`gluonkit.ir.tmem.plan_columns`,
at most 512).  At the start of the body warp 0 runs ``tcgen05.alloc`` of the planned total
(a power of two ≥ 32) into a 4-byte shared variable and gives up its allocation permit;
after ``tcgen05.fence::before_thread_sync`` / ``bar.sync`` / ``fence::after_thread_sync``
every thread reads the base address.  Before the kernel returns, all threads meet again and
warp 0 runs ``tcgen05.dealloc``.

*Addresses.*  A descriptor lowers to the i32 ``lane << 16 | column`` that ``tcgen05``
instructions take (a plain LLVM value, so ``warp_specialize`` passes it to workers like any
scalar); ``index`` adds whole tiles of columns, ``slice`` the constant of
:func:`~gluonkit.ir.tmem.slice_offset`.  In a worker partition, warp ids count from the
partition's first warp; that is a multiple of 4 for every partition that can load or store
(TMEM register layouts need at least 4 warps, and partitions of 4 or more warps start at a
warpgroup), so a warp's lane quarter is its hardware warp id modulo 4 as the rule needs.

*Loads and stores.*  The register layout's cells (:func:`~gluonkit.ir.tmem.access_map`) are
grouped into 32-bit words (``32 / bits`` packed elements per register, or one unpacked
element in the low bits of a column), then matched with a ``tcgen05`` shape: the lane (and
first register) bases must be those of ``32x32b``, ``16x64b``, ``16x128b``, ``16x256b``, or of
``16x32bx2`` (lanes 16..31 reach the columns at the immediate offset); the next register
bases that walk on by whole atoms become ``.xN`` (at most 64 registers per instruction);
any further register bases repeat the instruction at constant offsets, and warp bases add
a runtime offset.  All loads end with one ``tcgen05.wait::ld`` that the loaded registers
pass through (so nothing reads them earlier), all stores with ``tcgen05.wait::st``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation
from ...ir.tmem import access_map, cta_group, plan_columns, slice_offset, stage_columns
from ...ir.warp_specialize import enclosing_partition
from ...layouts.linear import log2_exact
from ...layouts.tmem import TMEM_ATOMS
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I32, llvm_type, struct_type
from ..memplan.scratch import barrier
from ..ops.warp_specialize import cluster_barrier
from ..registry import lowering

__all__ = ["prepare", "synchronize", "MAX_REGISTERS_PER_INSTRUCTION"]

# Registers one tcgen05.ld/st moves at most: the PTX ISA allows 128; Triton 3.9 splits at 64 (bounding the
# registers in flight), and so does gluonkit, to emit the same instructions.
MAX_REGISTERS_PER_INSTRUCTION = 64
_SHARED = 3
_TMEM_OPS = ("tmem_alloc", "tmem_load", "tmem_store", "tmem_index", "tmem_slice", "tmem_reinterpret")


# ------------------------------------------------------------------ kernel allocation
def prepare(ctx: KernelLowering) -> None:
    """Allocate the kernel's tensor memory at the start of the body (module docstring); no-op without TMEM."""
    ops = [op for op in ctx.func.walk() if op.name in _TMEM_OPS]
    if not ops:
        return
    if ctx.target.arch != "sm_100a":
        raise CompilationError(f"{ops[0].name}: tensor memory is a Blackwell (sm_100a) feature; {ctx.target.arch} "
                               "has none; compile for target='sm_100a'", ops[0].loc)
    plan = plan_columns(ctx.func)
    slot = lir.GlobalVariable(ctx.module, I32, "tmem_base_address", addrspace=_SHARED)
    slot.linkage = "internal"
    slot.initializer = lir.Constant(I32, None)
    slot.align = 4
    b = ctx.builder
    group = cta_group(ctx.func)
    if group == 2:  # both CTAs of each pair allocate together (as Triton 3.9, after a cluster barrier)
        cluster_barrier(ctx)
    is_warp0 = b.icmp_unsigned("==", ctx.warp, I32(0))
    with b.if_then(is_warp0):
        smem = b.ptrtoint(slot, I32)  # the shared-window address
        emit_ptx(b, f"tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [$0], {plan.total};", "r",
                 [smem])
        emit_ptx(b, f"tcgen05.relinquish_alloc_permit.cta_group::{group}.sync.aligned;")
    synchronize(ctx)
    ctx.tmem = _KernelTmem(b.load(slot, align=4), slot, plan.first_column, plan.total, group)
    ctx.before_return.append(_deallocate)


@dataclass(frozen=True)
class _KernelTmem:
    base: lir.Value  # the allocation's address (lane 0, first column), loaded on the kernel's own warps
    slot: lir.GlobalVariable  # the shared word tcgen05.alloc wrote it to (workers read it from there)
    first_column: Dict[int, int]
    total: int
    group: int = 1  # the cta_group of alloc/dealloc: 2 when a two_ctas MMA writes into the pair's TMEM


def synchronize(ctx: KernelLowering) -> None:
    """Order tcgen05 work before and after a CTA barrier (the PTX ISA's thread-sync fences)."""
    emit_ptx(ctx.builder, "tcgen05.fence::before_thread_sync;")
    barrier(ctx)
    emit_ptx(ctx.builder, "tcgen05.fence::after_thread_sync;")


def _deallocate(ctx: KernelLowering) -> None:
    b = ctx.builder
    synchronize(ctx)
    group = ctx.tmem.group
    if group == 2:  # the peer's MMAs may still write into this CTA's TMEM until it is done too
        cluster_barrier(ctx)
    with b.if_then(b.icmp_unsigned("==", ctx.warp, I32(0))):
        emit_ptx(b, f"tcgen05.dealloc.cta_group::{group}.sync.aligned.b32 $0, {ctx.tmem.total};", "r",
                 [ctx.tmem.base])


@lowering("tmem_alloc")
def _tmem_alloc(ctx: KernelLowering, op: Operation) -> None:
    column = ctx.tmem.first_column[op.results[0].uid]
    where = enclosing_partition(op)
    # A worker partition's warps branch off before the kernel's warps load the base: they read the slot.
    base = ctx.builder.load(ctx.tmem.slot, align=4) if where is not None and where[1] > 0 else ctx.tmem.base
    address = ctx.builder.add(base, I32(column))
    ctx.set(op.results[0], address)
    if op.operands:
        _store(ctx, op, address, op.results[0].type, op.operands[0], None)


# -------------------------------------------------------------------------- views
@lowering("tmem_index")
def _tmem_index(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    step = stage_columns(op.operands[0].type)[0]
    offset = b.mul(ctx.get(op.operands[1]), I32(step))
    ctx.set(op.results[0], b.add(ctx.get(op.operands[0]), offset))


@lowering("tmem_slice")
def _tmem_slice(ctx: KernelLowering, op: Operation) -> None:
    lanes, columns = slice_offset(op.operands[0].type, op.attrs["dim"], op.attrs["start"])
    ctx.set(op.results[0], ctx.builder.add(ctx.get(op.operands[0]), I32(lanes << 16 | columns)))


@lowering("tmem_reinterpret")
def _tmem_reinterpret(ctx: KernelLowering, op: Operation) -> None:
    ctx.set(op.results[0], ctx.get(op.operands[0]))


# ------------------------------------------------------------- instruction planning
@dataclass(frozen=True)
class _Instruction:
    """One tcgen05.ld/st: ``shape`` (``"32x32b"`` …), ``.xN``, the word registers it moves, its offset."""

    shape: str
    repeat: int
    first_word: int
    words: int
    offset: int  # lane << 16 | column, XORed with the warp's part
    half_split: int  # 16x32bx2's immediate column offset of lanes 16..31 (else 0)


@dataclass(frozen=True)
class _Plan:
    pack: int  # elements per 32-bit register word
    pairs: bool  # unpacked 16-bit elements of two adjacent columns per register (.pack::16b / .unpack::16b)
    instructions: Tuple[_Instruction, ...]
    warp_bases: Tuple[int, ...]  # per warp bit: lane << 16 | column
    num_words: int


def _fail(op: Operation, message: str):
    raise CompilationError(f"{op.name}: {message}", op.loc)


def _plan(op: Operation, view, tensor_type, reg_ll) -> _Plan:
    amap, problem = access_map(view, reg_ll)
    if problem:
        _fail(op, problem)
    cells = amap.cells.bases
    bits = view.element.primitive_bitwidth
    per_column = 32 // bits
    regs = cells["register"]
    pack = 1
    while pack < per_column and len(regs) > log2_exact(pack) and regs[log2_exact(pack)] == [0, pack]:
        pack *= 2
    col_bases = view.layout.to_linear_layout(list(view.alloc_shape[-2:])).bases["col"]
    low_slots_unused = all(v == [0, 0] for v in col_bases[:log2_exact(per_column)])
    # Unpacked 16-bit elements (one per column): a register holds two adjacent columns (.pack::16b).
    pairs = bits == 16 and pack == 1 and low_slots_unused and bool(regs) and regs[0] == [0, 2]
    if pairs:
        pack = 2
    k = log2_exact(pack)
    if per_column > 1 and pack not in (1, per_column) and not pairs:
        _fail(op, f"the register layout packs {pack} of the {per_column} {bits}-bit elements of a TMEM column")
    if per_column > 1 and pack == 1 and not low_slots_unused:
        _fail(op, f"the register layout holds one {bits}-bit element per register but the TMEM layout packs "
                  f"{per_column} per column; use desc.get_reg_layout()")
    unit = 2 if pairs else 1  # TMEM columns per word column
    words = {}
    for dim, vs in (("register", regs[k:]), ("lane", cells["lane"]), ("warp", cells["warp"])):
        out = []
        for row, slot in vs:
            if slot % (per_column * unit):
                _fail(op, f"the register layout's {dim} bases split a 32-bit TMEM column between threads "
                          f"({cells}); use desc.get_reg_layout()")
            out.append([row, slot // (per_column * unit)])
        words[dim] = out
    shape, atom_regs, tile_cols, half_split = _match_atom(op, words["lane"], words["register"])
    rest = words["register"][atom_regs:]
    repeat = 0
    max_repeat = log2_exact(MAX_REGISTERS_PER_INSTRUCTION) - atom_regs
    while repeat < len(rest) and repeat < max_repeat and rest[repeat] == [0, tile_cols << repeat]:
        repeat += 1
    per_instruction = 1 << (atom_regs + repeat)
    others = rest[repeat:]
    instructions = []
    for combo in range(1 << len(others)):
        row = col = 0
        for i, (r, c) in enumerate(others):
            if combo >> i & 1:
                row ^= r
                col ^= c
        instructions.append(_Instruction(shape, 1 << repeat, combo * per_instruction, per_instruction,
                                         row << 16 | col * unit, half_split * unit))
    warp_bases = tuple(r << 16 | c * unit for r, c in words["warp"])
    return _Plan(pack, pairs, tuple(instructions), warp_bases, per_instruction << len(others))


def _match_atom(op: Operation, lanes, regs):
    """``(shape, atom register bits, atom columns, half split)`` of the tcgen05 shape with these lane bases."""
    for shape, (atom_reg, atom_lane) in TMEM_ATOMS.items():
        if lanes == atom_lane and regs[:len(atom_reg)] == atom_reg:
            width = 1 << max(c for _, c in atom_reg + atom_lane).bit_length()
            return shape, len(atom_reg), width, 0
    if lanes[:4] == [[1, 0], [2, 0], [4, 0], [8, 0]] and lanes[4][0] == 0 and lanes[4][1] > 0:
        return "16x32bx2", 0, 1, lanes[4][1]
    _fail(op, f"no tcgen05.ld/st shape has the lane arrangement {lanes} of this register layout; use "
              "desc.get_reg_layout(instr_variant=...)")


def _warp_part(ctx: KernelLowering, bases) -> lir.Value:
    b = ctx.builder
    part = I32(0)
    for i, basis in enumerate(bases):
        if basis:
            bit = b.and_(b.lshr(ctx.warp, I32(i)), I32(1))
            part = b.xor(part, b.mul(bit, I32(basis)))
    return part


def _addresses(ctx: KernelLowering, address: lir.Value, plan: _Plan) -> List[lir.Value]:
    b = ctx.builder
    warp = _warp_part(ctx, plan.warp_bases)
    return [b.add(address, b.xor(warp, I32(ins.offset))) for ins in plan.instructions]


def _suffix(ins: _Instruction, plan: _Plan, load: bool) -> str:
    pairs = (".pack::16b" if load else ".unpack::16b") if plan.pairs else ""
    return f"{ins.shape}.x{ins.repeat}{pairs}.b32"


def _operands(first: int, count: int) -> str:
    return "{" + ", ".join(f"${i}" for i in range(first, first + count)) + "}"


# ----------------------------------------------------------------------- loads
@lowering("tmem_load")
def _tmem_load(ctx: KernelLowering, op: Operation) -> None:
    view, result = op.operands[0].type, op.results[0].type
    plan = _plan(op, view, result, ctx.linear_layout(result))
    b = ctx.builder
    words: List[lir.Value] = []
    for ins, taddr in zip(plan.instructions, _addresses(ctx, ctx.get(op.operands[0]), plan)):
        n = ins.words
        split = f", {ins.half_split}" if ins.shape == "16x32bx2" else ""
        text = f"tcgen05.ld.sync.aligned.{_suffix(ins, plan, True)} {_operands(0, n)}, [${n}]{split};"
        ret = struct_type(ctx.module, I32, n) if n > 1 else I32
        out = b.asm(lir.FunctionType(ret, [I32]), text, ",".join(["=r"] * n + ["r"]), [taddr], side_effect=True)
        words += [b.extract_value(out, i) for i in range(n)] if n > 1 else [out]
    words = _wait(ctx, words)
    registers = _unpack(ctx, words, plan.pack, view.element, llvm_type(view.element))
    ctx.set(op.results[0], registers)
    if op.attrs["red"] != "none":
        ctx.set(op.results[1], _reduce_rows(ctx, op, registers))


def _wait(ctx: KernelLowering, words: List[lir.Value]) -> List[lir.Value]:
    """``tcgen05.wait::ld`` with the loaded words passed through it, so no use moves above the wait."""
    b = ctx.builder
    n = len(words)
    ret = struct_type(ctx.module, I32, n) if n > 1 else I32
    constraints = ["=r"] * n + [str(i) for i in range(n)]
    out = b.asm(lir.FunctionType(ret, [I32] * n), "tcgen05.wait::ld.sync.aligned;", ",".join(constraints), words,
                side_effect=True)
    return [b.extract_value(out, i) for i in range(n)] if n > 1 else [out]


def _unpack(ctx: KernelLowering, words, pack: int, element, ty: lir.Type) -> List[lir.Value]:
    b = ctx.builder
    bits = element.primitive_bitwidth
    out = []
    for word in words:
        for p in range(pack):
            if bits == 32:
                value = word
            else:
                shifted = b.lshr(word, I32(p * bits)) if p else word
                value = b.trunc(shifted, lir.IntType(bits))
            out.append(value if isinstance(ty, lir.IntType) else b.bitcast(value, ty))
    return out


def _reduce_rows(ctx: KernelLowering, op: Operation, registers) -> List[lir.Value]:
    """load_min/load_max: each row's reduction, from the registers of the thread that holds the row."""
    result, red = op.results
    ll, red_ll = ctx.linear_layout(result.type), ctx.linear_layout(red.type)
    if any(v[1] for dim in ("lane", "warp") for v in ll.bases.get(dim, [])):
        _fail(op, f"load_{op.attrs['red']} reduces each row within one thread; this register layout spreads "
                  "dim 1 over lanes or warps (use num_warps=4, or load() and gl.min/gl.max)")
    b = ctx.builder
    name = {("min", "none"): "llvm.minnum", ("max", "none"): "llvm.maxnum",
            ("min", "all"): "llvm.minimum", ("max", "all"): "llvm.maximum"}[op.attrs["red"], op.attrs["propagate_nan"]]
    ty = llvm_type(result.type.element)
    fn = ctx.intrinsic(f"{name}.f32", ty, [ty, ty])
    fabs = ctx.intrinsic("llvm.fabs.f32", ty, [ty])
    by_row: Dict[int, lir.Value] = {}
    for r, value in enumerate(registers):
        row = ll.apply({"register": r})["dim0"]
        if op.attrs["abs"]:
            value = b.call(fabs, [value])
        by_row[row] = b.call(fn, [by_row[row], value]) if row in by_row else value
    return [by_row[red_ll.apply({"register": s})["dim0"]] for s in range(red_ll.in_dim_size("register"))]


# ----------------------------------------------------------------------- stores
def _store(ctx: KernelLowering, op: Operation, address: lir.Value, view, value, pred) -> None:
    plan = _plan(op, view, value.type, ctx.linear_layout(value.type))
    words = _pack(ctx, ctx.get(value), plan.pack, view.element)
    b = ctx.builder
    inputs_pred = [] if pred is None else [b.zext(ctx.get(pred), I32)]
    for ins, taddr in zip(plan.instructions, _addresses(ctx, address, plan)):
        n = ins.words
        split = f", {ins.half_split}" if ins.shape == "16x32bx2" else ""
        body = f"tcgen05.st.sync.aligned.{_suffix(ins, plan, False)} [$0]{split}, {_operands(1, n)};"
        if pred is not None:
            body = f"{{ .reg .pred p; setp.ne.b32 p, ${n + 1}, 0; @p {body} }}"
        emit_ptx(b, body, ",".join(["r"] * (n + 1 + len(inputs_pred))),
                 [taddr] + words[ins.first_word:ins.first_word + n] + inputs_pred)
    emit_ptx(b, "tcgen05.wait::st.sync.aligned;")


def _pack(ctx: KernelLowering, registers, pack: int, element) -> List[lir.Value]:
    b = ctx.builder
    bits = element.primitive_bitwidth
    as_int = [v if isinstance(v.type, lir.IntType) else b.bitcast(v, lir.IntType(bits)) for v in registers]
    if bits == 32:
        return as_int
    words = []
    for w in range(len(as_int) // pack):
        word = I32(0)
        for p in range(pack):
            part = b.zext(as_int[w * pack + p], I32)
            word = b.or_(word, b.shl(part, I32(p * bits)) if p else part)
        words.append(word)
    return words


@lowering("tmem_store")
def _tmem_store(ctx: KernelLowering, op: Operation) -> None:
    _store(ctx, op, ctx.get(op.operands[0]), op.operands[0].type, op.operands[1], op.operands[2])
