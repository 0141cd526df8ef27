"""Lowering of the atomics: ``atomic_rmw`` / ``atomic_cas`` to PTX ``atom`` / ``red``,
``atomic_load`` / ``atomic_store`` to ``ld`` / ``st`` with ``.{sem}.{scope}``.

Each element is updated by exactly one thread, once (in a cluster: by CTA rank 0, whose
result the other CTAs cannot see, so there the old value may not be used): a layout that holds an element in
several registers, lanes or warps (a zero basis) leaves the work to the copy whose
replicated bits are zero, and a scalar pointer is updated by thread 0, as Triton does.  The
instruction is ``atom{.sem}{.scope}.global.{op}.{type}`` predicated by the mask; where the
old values are needed by threads that did not perform the atomic, the performing thread
writes them to scratch shared memory and every thread reads its copies after a
``bar.sync`` (:func:`~..memplan.scratch_use.atomic_broadcasts_through_scratch`).  When the
result is unused, ``sem`` is ``relaxed`` or ``release`` and the operation has a reduction
form the instruction is ``red``, which returns nothing (PTX has no ``red.exch`` or
``red.cas``: an exchange or compare-and-swap whose old value is dropped still uses
``atom``).  Float ``max``/``min`` have no PTX instruction: as in Triton, non-negative
values use the signed-integer operation on the bits and negative values the unsigned
opposite one.  An atomic load runs in every thread (masked-off elements read 0);
an atomic store, like the read-modify-writes, in one thread per element; 8-bit and ``int1``
elements travel as bytes in 16-bit registers.
"""

from __future__ import annotations

import math
from typing import List, Optional

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, TensorType, element_type
from ..context import KernelLowering
from ..llvm_types import I1, I32, llvm_type
from ..memplan import scratch
from ..memplan.scratch_use import atomic_broadcasts_through_scratch, is_used
from ..registry import lowering

__all__ = []

_CONSTRAINT = {16: "h", 32: "r", 64: "l"}
_REDUCTIONS = frozenset({"add", "and", "or", "xor", "max", "min"})  # the operations PTX's red has


def _ptx_type(fn: str, dtype) -> str:
    bits = dtype.primitive_bitwidth
    if fn in ("and", "or", "xor", "xchg", "cas"):
        return f"b{bits}"
    if dtype.is_floating():
        if bits == 16:
            return "noftz." + ("bf16" if dtype.name == "bfloat16" else "f16")
        return f"f{bits}"
    if fn == "add":
        return f"u{bits}"
    return f"{'u' if dtype.is_int_unsigned() else 's'}{bits}"


def _instruction(op: Operation, fn: str, ptx_type: str, returns: bool) -> str:
    sem, scope = op.attrs["sem"], op.attrs["scope"]
    ptx_op = {"xchg": "exch"}.get(fn, fn)
    if returns:
        return f"atom.{sem}.{scope}.global.{ptx_op}.{ptx_type}"
    return f"red.{sem}.{scope}.global.{ptx_op}.{ptx_type}"


def _atom(ctx: KernelLowering, text: str, bits: int, pointer, values: List[lir.Value], pred, returns: bool):
    """One predicated ``atom``/``red``: ``values`` are integers of ``bits``; returns the old bits."""
    c = _CONSTRAINT[bits]
    word = lir.IntType(bits)
    first = 1 if returns else 0
    slots = ", ".join(f"${first + 1 + i}" for i in range(len(values)))
    pred_slot = first + 1 + len(values)
    operands = [pointer] + values + [pred]
    constraints = [f"={c}"] if returns else []
    constraints += ["l"] + [c] * len(values) + ["b"]
    dest = "$0, " if returns else ""
    asm = f"@${pred_slot} {text} {dest}[ ${first} + 0 ], {slots};"
    fn_ty = lir.FunctionType(word if returns else lir.VoidType(), [v.type for v in operands])
    return ctx.builder.asm(fn_ty, asm, ",".join(constraints + ["~{memory}"]), operands, side_effect=True)


def _replication(ctx: KernelLowering, ty) -> tuple:
    """(register bits that repeat an element, predicate: this thread is the one that performs it)."""
    b = ctx.builder
    reg_bits, owner = _thread_replication(ctx, ty)
    if ctx.func.num_ctas > 1:  # in a cluster, rank 0 performs it for the CTAs that replicate it
        owner = b.and_(owner, ctx.cluster_leader())
    return reg_bits, owner


def _thread_replication(ctx: KernelLowering, ty) -> tuple:
    """:func:`_replication` within one CTA."""
    b = ctx.builder
    if not isinstance(ty, TensorType):
        return 0, b.icmp_unsigned("==", b.or_(ctx.lane, ctx.warp), I32(0))
    ll = ctx.linear_layout(ty)
    reg_bits = sum(1 << i for i, basis in enumerate(ll.bases.get("register", [])) if not any(basis))
    owner: Optional[lir.Value] = None
    for dim, index in (("lane", ctx.lane), ("warp", ctx.warp)):
        bits = sum(1 << i for i, basis in enumerate(ll.bases.get(dim, [])) if not any(basis))
        if bits:
            test = b.icmp_unsigned("==", b.and_(index, I32(bits)), I32(0))
            owner = test if owner is None else b.and_(owner, test)
    return reg_bits, owner if owner is not None else I1(1)


def _as_bits(ctx: KernelLowering, value: lir.Value, bits: int) -> lir.Value:
    return value if isinstance(value.type, lir.IntType) else ctx.builder.bitcast(value, lir.IntType(bits))


def _perform(ctx, op, fn, dtype, pointer, values, pred, returns):
    """The atomic on one element; returns its old value (of ``dtype``'s LLVM type) or None."""
    b = ctx.builder
    bits = dtype.primitive_bitwidth
    words = [_as_bits(ctx, v, bits) for v in values]
    if fn in ("max", "min") and dtype.is_floating():
        negative = b.icmp_signed("<", words[0], lir.IntType(bits)(0))
        signed = _instruction(op, fn, f"s{bits}", returns)
        unsigned = _instruction(op, "min" if fn == "max" else "max", f"u{bits}", returns)
        old_pos = _atom(ctx, signed, bits, pointer, words, b.and_(pred, b.not_(negative)), returns)
        old_neg = _atom(ctx, unsigned, bits, pointer, words, b.and_(pred, negative), returns)
        old = b.select(negative, old_neg, old_pos) if returns else None
    else:
        old = _atom(ctx, _instruction(op, fn, _ptx_type(fn, dtype), returns), bits, pointer, words, pred, returns)
    if not returns:
        return None
    target = llvm_type(dtype)
    return old if old.type == target else b.bitcast(old, target)


def _lower(ctx: KernelLowering, op: Operation, fn: str, n_values: int) -> None:
    b = ctx.builder
    ty = op.results[0].type
    dtype = element_type(ty)
    is_tensor = isinstance(ty, TensorType)
    count = ctx.num_registers(ty) if is_tensor else 1

    def registers(v):
        x = ctx.get(v)
        return x if isinstance(x, list) else [x] * count

    pointers = registers(op.operands[0])
    values = [registers(v) for v in op.operands[1:1 + n_values]]
    masks = registers(op.operands[-1]) if op.attrs.get("has_mask") else None
    used = is_used(ctx.func, op.results[0])
    if used and ctx.func.num_ctas > 1:
        raise CompilationError(f"{op.name}: in a cluster (num_ctas={ctx.func.num_ctas}) the atomic is performed "
                               "once, by CTA rank 0, so its old value is not available to the cluster's other CTAs; "
                               "drop the use of the result, or launch with num_ctas=1", op.loc)
    returns = used or op.attrs["sem"] in ("acquire", "acq_rel") or fn not in _REDUCTIONS
    reg_bits, owner = _replication(ctx, ty)
    old: List[Optional[lir.Value]] = [None] * count
    for r in range(count):
        if r & reg_bits:
            continue
        pred = owner if masks is None else b.and_(owner, masks[r])
        old[r] = _perform(ctx, op, fn, dtype, pointers[r], [v[r] for v in values], pred, returns)
    if not used:
        return
    if atomic_broadcasts_through_scratch(ctx.func, op):
        old = _broadcast(ctx, op, old, owner)
    else:
        old = [old[r & ~reg_bits] for r in range(count)]
    ctx.set(op.results[0], old if is_tensor else old[0])


def _broadcast(ctx: KernelLowering, op: Operation, old, owner) -> List[lir.Value]:
    """Every thread's copies of the old values, from the threads that performed the atomics."""
    b = ctx.builder
    ty = op.results[0].type
    elem = llvm_type(ty)
    bits = element_type(ty).primitive_bitwidth
    if isinstance(ty, TensorType):
        offsets = [scratch.row_major_offset(ctx, coords, ty.shape) for coords in ctx.element_coordinates(ty)]
        numel = math.prod(ty.shape)
    else:
        offsets, numel = [I32(0)], 1
    scratch.begin_use(ctx, op)
    for r, value in enumerate(old):
        if value is None:
            continue
        address = b.ptrtoint(scratch.scratch_pointer(ctx, elem, offsets[r]), I32)
        word = _as_bits(ctx, value, bits)
        fn_ty = lir.FunctionType(lir.VoidType(), [I32, word.type, I1])
        b.asm(fn_ty, f"@$2 st.shared.b{bits} [$0], $1;", f"r,{_CONSTRAINT[bits]},b,~{{memory}}",
              [address, word, owner], side_effect=True)
    scratch.barrier(ctx)
    return scratch.load_scratch(ctx, elem, offsets)


@lowering("atomic_rmw")
def _atomic_rmw(ctx: KernelLowering, op: Operation) -> None:
    _lower(ctx, op, op.attrs["fn"], 1)


@lowering("atomic_cas")
def _atomic_cas(ctx: KernelLowering, op: Operation) -> None:
    _lower(ctx, op, "cas", 2)


def _memory_bits(dtype) -> int:
    return 8 if dtype.primitive_bitwidth in (1, 8) else dtype.primitive_bitwidth


def _to_word(ctx: KernelLowering, value: lir.Value, dtype) -> lir.Value:
    """``value`` as the integer register a ``st`` of its element writes (bytes widened to 16 bits)."""
    bits = dtype.primitive_bitwidth
    word = _as_bits(ctx, value, bits)
    return ctx.builder.zext(word, lir.IntType(16)) if bits < 16 else word


def _from_word(ctx: KernelLowering, word: lir.Value, dtype) -> lir.Value:
    b = ctx.builder
    bits = dtype.primitive_bitwidth
    if bits == 1:
        return b.icmp_unsigned("!=", word, word.type(0))
    if bits < 16:
        word = b.trunc(word, lir.IntType(bits))
    target = llvm_type(dtype)
    return word if word.type == target else b.bitcast(word, target)


@lowering("atomic_load")
def _atomic_load(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    ty = op.results[0].type
    dtype = element_type(ty)
    count = ctx.num_registers(ty) if isinstance(ty, TensorType) else 1

    def registers(v):
        x = ctx.get(v)
        return x if isinstance(x, list) else [x] * count

    pointers = registers(op.operands[0])
    masks = registers(op.operands[1]) if op.attrs.get("has_mask") else None
    mem_bits = _memory_bits(dtype)
    reg_bits = max(16, mem_bits)
    kind = "u8" if mem_bits == 8 else f"b{mem_bits}"
    text = (f"mov.b{reg_bits} $0, 0;\n@$2 ld.{op.attrs['sem']}.{op.attrs['scope']}.global.{kind} $0, [ $1 + 0 ];")
    fn_ty = lir.FunctionType(lir.IntType(reg_bits), [pointers[0].type, I1])
    loaded = []
    for r in range(count):
        pred = masks[r] if masks is not None else I1(1)
        word = b.asm(fn_ty, text, f"=&{_CONSTRAINT[reg_bits]},l,b,~{{memory}}", [pointers[r], pred], side_effect=True)
        loaded.append(_from_word(ctx, word, dtype))
    ctx.set(op.results[0], loaded if isinstance(ty, TensorType) else loaded[0])


@lowering("atomic_store")
def _atomic_store(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    ptr_ty = op.operands[0].type
    dtype = element_type(ptr_ty).element
    count = ctx.num_registers(ptr_ty) if isinstance(ptr_ty, TensorType) else 1

    def registers(v):
        x = ctx.get(v)
        return x if isinstance(x, list) else [x] * count

    pointers, values = registers(op.operands[0]), registers(op.operands[1])
    masks = registers(op.operands[2]) if op.attrs.get("has_mask") else None
    mem_bits = _memory_bits(dtype)
    kind = "u8" if mem_bits == 8 else f"b{mem_bits}"
    text = f"@$2 st.{op.attrs['sem']}.{op.attrs['scope']}.global.{kind} [ $0 + 0 ], $1;"
    reg_bits, owner = _replication(ctx, ptr_ty)
    for r in range(count):
        if r & reg_bits:
            continue
        word = _to_word(ctx, values[r], dtype)
        pred = owner if masks is None else b.and_(owner, masks[r])
        fn_ty = lir.FunctionType(lir.VoidType(), [pointers[r].type, word.type, I1])
        b.asm(fn_ty, text, f"l,{_CONSTRAINT[max(16, mem_bits)]},b,~{{memory}}", [pointers[r], word, pred],
              side_effect=True)
