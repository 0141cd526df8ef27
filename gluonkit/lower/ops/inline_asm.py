"""Lowering of ``inline_asm_elementwise``: one LLVM inline-asm call per ``pack`` registers.

A thread's registers of every argument are taken ``pack`` at a time, in register order;
each group is one execution of the user's assembly.  As in Triton, an element narrower
than 32 bits is packed with its neighbours into a 32-bit register (``32 // bits`` of them,
at most ``pack``), so ``pack=4`` over ``float16`` passes two ``b32`` registers per
argument, while ``pack=1`` passes one 16-bit register; results are unpacked the same way.
Outputs come first in the constraint string.  ``is_pure`` lets LLVM drop or merge calls
whose results are unused or repeated; otherwise the call has side effects.
"""

from __future__ import annotations

from typing import List

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, TensorType, element_type
from ..context import KernelLowering
from ..llvm_types import llvm_type
from ..register_words import pack_words, unpack_word, word_type
from ..registry import lowering

__all__ = []


def _per_register(dtype, pack: int) -> int:
    """Elements of ``dtype`` that share one register when ``pack`` are processed together."""
    bits = dtype.primitive_bitwidth
    return max(1, min(pack, 32 // bits)) if bits < 32 else 1


@lowering("inline_asm_elementwise")
def _inline_asm(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    pack = op.attrs["pack"]
    first = op.results[0].type
    count = ctx.num_registers(first) if isinstance(first, TensorType) else 1
    if count % pack:
        raise CompilationError(
            f"inline_asm_elementwise: pack={pack} does not divide the {count} element(s) each thread holds in "
            f"{first}; use a smaller pack or a layout with more elements per thread", op.loc)
    args = [ctx.get(v) if isinstance(ctx.get(v), list) else [ctx.get(v)] * count for v in op.operands]
    arg_per = [_per_register(element_type(v.type), pack) for v in op.operands]
    res_elems = [llvm_type(r.type) for r in op.results]
    res_per = [_per_register(element_type(r.type), pack) for r in op.results]
    out_types = [word_type(e, p) for e, p in zip(res_elems, res_per) for _ in range(pack // p)]
    ret_ty = out_types[0] if len(out_types) == 1 else lir.LiteralStructType(out_types)
    results: List[List[lir.Value]] = [[] for _ in op.results]
    for g in range(0, count, pack):
        operands = [w for regs, per in zip(args, arg_per) for w in pack_words(b, regs[g:g + pack], per)]
        fn_ty = lir.FunctionType(ret_ty, [v.type for v in operands])
        call = b.asm(fn_ty, op.attrs["asm"], op.attrs["constraints"], operands, side_effect=not op.attrs["is_pure"])
        words = [call] if len(out_types) == 1 else [b.extract_value(call, i) for i in range(len(out_types))]
        k = 0
        for i, (elem, per) in enumerate(zip(res_elems, res_per)):
            for _ in range(pack // per):
                results[i].extend(unpack_word(b, words[k], elem, per))
                k += 1
    for r, regs in zip(op.results, results):
        ctx.set(r, regs if isinstance(r.type, TensorType) else regs[0])
