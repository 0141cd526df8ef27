"""Lowering of global ``load``/``store``: vectorized, predicated PTX accesses.

A tensor access is split into groups of ``vec`` registers that hold consecutive elements
along one dimension (from the layout's linear layout) whose addresses are known to be
consecutive and aligned (from :mod:`.axis_info`: pointer contiguity and divisibility, and
the mask's constancy); each group is one ``ld.global.v{n}.b32``-style instruction of up to
16 bytes.  Masked accesses are predicated (``@p``) and masked-off loads keep ``other``, as
in Triton; ``cache_modifier`` and ``eviction_policy`` become PTX qualifiers.
"""

from __future__ import annotations

from typing import List, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, TensorType, element_type
from ...layouts.vectorize import aligned_register_run
from ..context import KernelLowering
from ..llvm_types import I8, I16, I32, bit_width, llvm_type
from ..registry import lowering

__all__ = ["vector_width"]

_LOAD_CACHE = {"": "", ".ca": ".ca", ".cg": ".cg", ".cv": ".cv", ".cs": ".cs", ".lu": ".lu"}
_STORE_CACHE = {"": "", ".wb": ".wb", ".cg": ".cg", ".cs": ".cs", ".wt": ".wt"}
_EVICTION = {"": "", "evict_normal": ".L1::evict_normal", "evict_first": ".L1::evict_first",
             "evict_last": ".L1::evict_last"}


def vector_width(ctx: KernelLowering, ptr, mask) -> Tuple[int, int]:
    """``(vec, dim)``: elements per access and the dimension they run along."""
    ty = ptr.type
    if not isinstance(ty, TensorType):
        return 1, 0
    ll = ctx.linear_layout(ty)
    info = ctx.axis_info(ptr)
    mask_info = ctx.axis_info(mask) if mask is not None else None
    elem_bytes = max(1, element_type(ty).element.primitive_bitwidth // 8)
    best = (1, 0)
    for d in range(len(ty.shape)):
        vec = min(aligned_register_run(ll, d), info.contiguity[d], max(1, info.divisibility[d] // elem_bytes),
                  max(1, 16 // elem_bytes))
        if mask_info is not None:
            vec = min(vec, mask_info.constancy[d])
        vec = 1 << (vec.bit_length() - 1)  # a power of two
        if vec > best[0]:
            best = (vec, d)
    return best


def _groups(ctx: KernelLowering, ptr, vec: int) -> List[List[int]]:
    """Register indices of each access group (the low register bits vary within a group)."""
    count = ctx.num_registers(ptr.type) if isinstance(ptr.type, TensorType) else 1
    return [list(range(g, g + vec)) for g in range(0, count, vec)]


def _word_layout(total_bits: int) -> Tuple[int, int]:
    """(words, bits per word) of a ``total_bits`` access: b8, b16, b32, v2.b32 or v4.b32."""
    if total_bits <= 32:
        return 1, total_bits
    return total_bits // 32, 32


def _memory_type(dtype):
    """Loads and stores of int1 use one byte per element, as Triton does."""
    return I8 if dtype.name == "int1" else llvm_type(dtype)


def _as_registers(value, n: int) -> list:
    return value if isinstance(value, list) else [value] * n


@lowering("load")
def _load(ctx: KernelLowering, op: Operation) -> None:
    ptr = op.operands[0]
    mask = op.operands[1] if op.attrs.get("has_mask") else None
    other = op.operands[2] if op.attrs.get("has_other") else None
    dtype = element_type(op.results[0].type)
    mem_ty = _memory_type(dtype)
    vec, _ = vector_width(ctx, ptr, mask)
    pointers = _as_registers(ctx.get(ptr), 1)
    count = len(pointers)
    masks = _as_registers(ctx.get(mask), count) if mask is not None else None
    others = _as_registers(ctx.get(other), count) if other is not None else None
    cache = _LOAD_CACHE.get(op.attrs.get("cache_modifier") or "")
    eviction = _EVICTION.get(op.attrs.get("eviction_policy") or "")
    if cache is None or eviction is None:
        raise CompilationError(f"unknown cache_modifier/eviction_policy {op.attrs}", op.loc)
    qualifiers = (".volatile" if op.attrs.get("volatile") else "") + ".global" + cache + eviction
    results: List[lir.Value] = []
    for group in _groups(ctx, ptr, vec):
        first = group[0]
        other_values = [_to_memory(ctx, others[r], dtype) for r in group] if others else None
        loaded = _predicated_load(ctx, pointers[first], masks[first] if masks else None, other_values,
                                  mem_ty, len(group), qualifiers)
        results.extend(_from_memory(ctx, x, dtype) for x in loaded)
    ctx.set(op.results[0], results if isinstance(op.results[0].type, TensorType) else results[0])


@lowering("store")
def _store(ctx: KernelLowering, op: Operation) -> None:
    ptr, value = op.operands[0], op.operands[1]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    dtype = element_type(value.type)
    vec, _ = vector_width(ctx, ptr, mask)
    pointers = _as_registers(ctx.get(ptr), 1)
    count = len(pointers)
    values = _as_registers(ctx.get(value), count)
    masks = _as_registers(ctx.get(mask), count) if mask is not None else None
    if ctx.func.num_ctas > 1:  # CTAs holding the same values: one writes them (ctx.cluster_leader)
        leader = ctx.cluster_leader(ctx.linear_layout(value.type) if isinstance(value.type, TensorType) else None)
        masks = [leader] * count if masks is None else [ctx.builder.and_(leader, m) for m in masks]
    cache = _STORE_CACHE.get(op.attrs.get("cache_modifier") or "")
    eviction = _EVICTION.get(op.attrs.get("eviction_policy") or "")
    if cache is None or eviction is None:
        raise CompilationError(f"unknown cache_modifier/eviction_policy {op.attrs}", op.loc)
    for group in _groups(ctx, ptr, vec):
        first = group[0]
        _predicated_store(ctx, pointers[first], masks[first] if masks else None,
                          [_to_memory(ctx, values[r], dtype) for r in group], ".global" + cache + eviction)


def _to_memory(ctx: KernelLowering, x: lir.Value, dtype) -> lir.Value:
    return ctx.builder.zext(x, I8) if dtype.name == "int1" else x


def _from_memory(ctx: KernelLowering, x: lir.Value, dtype) -> lir.Value:
    return ctx.builder.icmp_unsigned("!=", x, I8(0)) if dtype.name == "int1" else x


def _pack(ctx: KernelLowering, values: List[lir.Value], words: int, word_bits: int) -> List[lir.Value]:
    """Reinterpret equal-typed ``values`` as ``words`` integers of ``word_bits``."""
    b = ctx.builder
    elem = values[0].type
    vector = lir.Constant(lir.VectorType(elem, len(values)), None)
    for i, v in enumerate(values):
        vector = b.insert_element(vector, v, I32(i))
    word_ty = lir.IntType(word_bits)
    as_words = b.bitcast(vector, lir.VectorType(word_ty, words))
    return [b.extract_element(as_words, I32(i)) for i in range(words)]


def _unpack(ctx: KernelLowering, words: List[lir.Value], elem: lir.Type, count: int) -> List[lir.Value]:
    b = ctx.builder
    vector = lir.Constant(lir.VectorType(words[0].type, len(words)), None)
    for i, w in enumerate(words):
        vector = b.insert_element(vector, w, I32(i))
    as_elems = b.bitcast(vector, lir.VectorType(elem, count))
    return [b.extract_element(as_elems, I32(i)) for i in range(count)]


def _constraint(bits: int) -> str:
    return {8: "c", 16: "h", 32: "r", 64: "l"}[bits]


def _predicated_load(ctx, pointer, mask, others, elem_ty, count, qualifiers) -> List[lir.Value]:
    """One (possibly vector) load of ``count`` elements; masked-off lanes keep ``others``."""
    b = ctx.builder
    bits = bit_width(elem_ty)
    words, word_bits = _word_layout(bits * count)
    reg = f"b{word_bits}" if word_bits >= 16 else "b8"
    c = _constraint(max(word_bits, 16))
    word_ty = lir.IntType(max(word_bits, 16))
    outputs = ", ".join(f"${i}" for i in range(words))
    outputs = f"{{ {outputs} }}" if words > 1 else outputs
    vector = f".v{words}" if words > 1 else ""
    operands: List[lir.Value] = [pointer]
    constraints = [f"={c}"] * words + ["l"]
    text = []
    predicate = ""
    if mask is not None:
        operands.append(mask)
        constraints.append("b")
        predicate = f"@${words + 1} "
    if others is not None:
        other_words = _pack(ctx, others, words, word_bits)
        if word_bits < 16:
            other_words = [b.zext(w, I16) for w in other_words]
        base = len(operands) + words
        for i, w in enumerate(other_words):
            operands.append(w)
            constraints.append(c)
            text.append(f"mov.b{max(word_bits, 16)} ${i}, ${base + i};")
    load_reg = reg if word_bits >= 16 else "u8"
    text.append(f"{predicate}ld{qualifiers}{vector}.{load_reg} {outputs}, [ ${words} + 0 ];")
    result_ty = lir.LiteralStructType([word_ty] * words) if words > 1 else word_ty
    fn_ty = lir.FunctionType(result_ty, [v.type for v in operands])
    result = b.asm(fn_ty, "\n".join(text), ",".join(constraints), operands, side_effect=True)
    loaded = [b.extract_value(result, i) for i in range(words)] if words > 1 else [result]
    if word_bits < 16:
        loaded = [b.trunc(w, lir.IntType(word_bits)) for w in loaded]
    return _unpack(ctx, loaded, elem_ty, count)


def _predicated_store(ctx, pointer, mask, values, qualifiers) -> None:
    """One (possibly vector) store of ``values``, predicated by ``mask``."""
    b = ctx.builder
    elem_ty = values[0].type
    bits = bit_width(elem_ty)
    words, word_bits = _word_layout(bits * len(values))
    data = _pack(ctx, values, words, word_bits)
    if word_bits < 16:
        data = [b.zext(w, I16) for w in data]
    c = _constraint(max(word_bits, 16))
    operands: List[lir.Value] = [pointer] + data
    constraints = ["l"] + [c] * words
    predicate = ""
    if mask is not None:
        operands.append(mask)
        constraints.append("b")
        predicate = f"@${words + 1} "
    slots = ", ".join(f"${1 + i}" for i in range(words))
    slots = f"{{ {slots} }}" if words > 1 else slots
    vector = f".v{words}" if words > 1 else ""
    reg = f"b{word_bits}" if word_bits >= 16 else "u8"
    text = f"{predicate}st{qualifiers}{vector}.{reg} [ $0 + 0 ], {slots};"
    b.asm(lir.FunctionType(lir.VoidType(), [v.type for v in operands]), text, ",".join(constraints), operands,
          side_effect=True)
