"""Lowering of ``device_print`` to CUDA's ``vprintf``.

Every thread prints, for each register of each operand, one line in the interpreter's
format: ``pid (x, y, z) idx (i, j) <prefix><value>`` — so elements a layout replicates
are printed once per holder, as on any GPU.  Floats are passed as doubles (C varargs),
integers as 32- or 64-bit, with ``hex`` printing the bits.
"""

from __future__ import annotations

from typing import List

import llvmlite.ir as lir

from ...ir import Operation, PointerType, TensorType, element_type, float64
from . import fp_convert
from ..context import KernelLowering
from ..llvm_types import I8, I32, I64, bit_width
from ..registry import lowering

__all__: List[str] = ["global_string"]

_GENERIC_PTR = lir.PointerType()


def global_string(ctx: KernelLowering, text: str, prefix: str = "printf_format_") -> lir.Value:
    """A generic pointer to a NUL-terminated constant copy of ``text`` in global memory."""
    data = bytearray(text.encode()) + b"\0"
    name = f"{prefix}{len([g for g in ctx.module.globals if g.startswith(prefix)])}"
    var = lir.GlobalVariable(ctx.module, lir.ArrayType(I8, len(data)), name, addrspace=1)
    var.global_constant = True
    var.linkage = "internal"
    var.initializer = lir.Constant(lir.ArrayType(I8, len(data)), data)
    var.type = lir.PointerType(addrspace=1)
    return ctx.builder.addrspacecast(var, _GENERIC_PTR)


def _printable(ctx: KernelLowering, value: lir.Value, dtype, hex_: bool):
    """(format spec, value passed to vprintf) for one element."""
    b = ctx.builder
    if isinstance(dtype, PointerType):
        return "%p", value if not hex_ else b.ptrtoint(value, I64)
    if dtype.is_floating():
        if hex_:
            bits = bit_width(value.type)
            raw = b.bitcast(value, lir.IntType(bits)) if bits > 8 else value
            return ("0x%llx", b.zext(raw, I64)) if bits == 64 else ("0x%x", b.zext(raw, I32) if bits < 32 else raw)
        wide = fp_convert.float_to_float(ctx, value, dtype, float64)
        return "%f", wide
    bits = dtype.primitive_bitwidth
    signed = dtype.is_int_signed()
    if bits == 64:
        return ("0x%llx" if hex_ else "%lld" if signed else "%llu"), value
    widened = (b.sext if signed and not hex_ else b.zext)(value, I32) if bits < 32 else value
    return ("0x%x" if hex_ else "%d" if signed else "%u"), widened


@lowering("device_print")
def _device_print(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    vprintf = ctx.intrinsic("vprintf", I32, [_GENERIC_PTR, _GENERIC_PTR])
    prefix = op.attrs.get("prefix") or ""
    if prefix and not prefix[-1].isspace():
        prefix += " "
    pid = [ctx.program_index(a) for a in "xyz"]
    for k, operand in enumerate(op.operands):
        label = f"(operand {k}) " if len(op.operands) > 1 else ""
        dtype = element_type(operand.type)
        if isinstance(operand.type, TensorType):
            registers = ctx.get(operand)
            coordinates = ctx.element_coordinates(operand.type)
        else:
            registers, coordinates = [ctx.get(operand)], [[]]
        for value, coords in zip(registers, coordinates):
            spec, printable = _printable(ctx, value, dtype, bool(op.attrs.get("hex")))
            index = ", ".join(["%d"] * len(coords))
            text = f"pid (%u, %u, %u) idx ({index}) {prefix.replace('%', '%%')}{label}{spec}\n"
            args = pid + list(coords) + [printable]
            frame_type = lir.LiteralStructType([a.type for a in args])
            frame = ctx.prologue.alloca(frame_type)  # in the entry block: no stack growth in loops
            frame.type = _GENERIC_PTR  # llvmlite gives allocas typed pointers; LLVM wants opaque ones
            for i, a in enumerate(args):
                b.store(a, b.gep(frame, [I32(0), I32(i)], source_etype=frame_type))
            b.call(vprintf, [global_string(ctx, text), frame])
