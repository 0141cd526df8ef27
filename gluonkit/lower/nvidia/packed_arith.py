"""Lowering of ``packed_arith`` to PTX's two-lane instructions: ``add.rn.f32x2``, ``fma.rn.bf16x2``, ``min.f16x2`` …

A thread's registers are taken two at a time in register order (the verifier made sure the
thread holds at least two distinct elements, so the count is even); each pair of every
operand becomes one word (:mod:`gluonkit.lower.register_words`: a 64-bit register for
float32, a 32-bit one for float16/bfloat16), one instruction computes both lanes, and the
result word is split again.  Pairing any two registers is right: the op is element-wise.

The rounding is written out (``.rn``) where Triton 3.9 leaves it implicit (``add.f32x2``):
without it ptxas may contract a ``mul`` and an ``add`` into an ``fma``, so the GPU would no
longer give the interpreter's correctly rounded result (gluonkit's scalar ``+`` and ``*`` are
``.rn`` too; docs/decisions.rst).  float32 pairs exist from sm_100a on; the 16-bit ones also on
sm_90a.
"""

from __future__ import annotations

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, element_type
from ...ir.verify_packed_arith import pairs_registers
from ..context import KernelLowering
from ..llvm_types import llvm_type
from ..register_words import pack_words, unpack_word, word_type
from ..registry import lowering

__all__ = ["packed_instruction"]

_SUFFIX = {"float32": "f32x2", "float16": "f16x2", "bfloat16": "bf16x2"}


def packed_instruction(fn: str, dtype) -> str:
    """The PTX mnemonic of ``fn`` on pairs of ``dtype``."""
    rounding = ".rn" if fn in ("add", "sub", "mul", "fma") else ""
    return f"{fn}{rounding}.{_SUFFIX[dtype.name]}"


@lowering("packed_arith")
def _packed_arith(ctx: KernelLowering, op: Operation) -> None:
    fn, result = op.attrs["fn"], op.results[0].type
    dtype = element_type(result)
    if dtype.name == "float32" and ctx.target.arch != "sm_100a":
        raise CompilationError(f"{fn}2 of float32 is Blackwell's {packed_instruction(fn, dtype)}; {ctx.target.arch} "
                               "has no float32 pairs; compile for target='sm_100a' or use the scalar operator",
                               op.loc)
    if not pairs_registers(result):
        raise CompilationError(f"{fn}2: each thread must hold at least two distinct elements to pair them, but "
                               f"{result.layout!r} gives it one of {list(result.shape)}", op.loc)
    b = ctx.builder
    elem = llvm_type(dtype)
    word = word_type(elem, 2)
    constraint = "l" if word.width == 64 else "r"
    n = len(op.operands)
    text = f"{packed_instruction(fn, dtype)} $0, {', '.join(f'${i + 1}' for i in range(n))};"
    asm_type = lir.FunctionType(word, [word] * n)
    pairs = zip(*(pack_words(b, ctx.get(v), 2) for v in op.operands))
    out = []
    for words in pairs:
        call = b.asm(asm_type, text, ",".join([f"={constraint}"] + [constraint] * n), list(words), side_effect=False)
        out.extend(unpack_word(b, call, elem, 2))
    ctx.set(op.results[0], out)
