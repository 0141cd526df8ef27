"""Conversions between element types in LLVM IR, with Triton's rounding behaviour.

Float narrowing rounds to nearest even (``rtne``) or toward zero (``rtz``); float → int
truncates toward zero; int → int1 and float → int1 test for non-zero.  The fp8 types have
no LLVM type: they are ``i8`` bit patterns converted with Hopper's ``cvt`` instructions
(``e4m3x2``/``e5m2x2``, saturating to the largest finite value as Triton does on sm_90).
"""

from __future__ import annotations

import llvmlite.ir as lir

from ...ir import CompilationError, DType, PointerType, float16, float32
from ..llvm_types import F16, F32, I16, I64, llvm_type

__all__ = ["constant_bits", "convert", "float_to_float", "bitcast"]

_FP8_PTX = {"float8e4nv": "e4m3", "float8e5": "e5m2"}


def constant_bits(dtype, value):
    """The value an ``lir.Constant`` of ``dtype`` takes for the Python number ``value``."""
    if isinstance(dtype, PointerType):
        raise CompilationError("pointer constants are not supported")
    if dtype.is_fp8():
        import ml_dtypes
        import numpy as np

        np_type = {"float8e4nv": ml_dtypes.float8_e4m3fn, "float8e5": ml_dtypes.float8_e5m2}[dtype.name]
        return int(np.array(value, dtype=np.float32).astype(np_type).view(np.uint8))
    if dtype.is_floating():
        return float(value)
    bits = dtype.primitive_bitwidth
    value = int(value) & ((1 << bits) - 1)
    return value - (1 << bits) if dtype.is_int_signed() and value >> (bits - 1) else value


def _cvt(ctx, ptx: str, result: lir.Type, constraint: str, x: lir.Value) -> lir.Value:
    return ctx.builder.asm(lir.FunctionType(result, [x.type]), ptx, constraint, [x], side_effect=False)


def float_to_float(ctx, x: lir.Value, src: DType, dst: DType, rounding: str = "rtne") -> lir.Value:
    """Convert a float of type ``src`` to ``dst`` (any of the float dtypes, fp8 included)."""
    b = ctx.builder
    if src == dst:
        return x
    if src.is_fp8():
        # e4m3x2/e5m2x2 → f16x2 is exact; take the low half.
        packed = _cvt(ctx, f"cvt.rn.f16x2.{_FP8_PTX[src.name]}x2 $0, $1;", lir.IntType(32), "=r,h",
                      b.zext(x, I16))
        half = b.bitcast(b.trunc(packed, I16), F16)
        return float_to_float(ctx, half, float16, dst, rounding)
    if dst.is_fp8():
        wide = float_to_float(ctx, x, src, float32, rounding)
        if rounding != "rtne":
            raise CompilationError(f"conversion to {dst} supports only round-to-nearest-even")
        pair = ctx.builder.asm(lir.FunctionType(I16, [F32, F32]),
                               f"cvt.rn.satfinite.{_FP8_PTX[dst.name]}x2.f32 $0, $2, $1;", "=h,f,f",
                               [wide, F32(0.0)], side_effect=False)
        return b.trunc(pair, lir.IntType(8))
    dst_ty = llvm_type(dst)
    if src.primitive_bitwidth < dst.primitive_bitwidth:
        return b.fpext(x, dst_ty)
    if src.primitive_bitwidth == dst.primitive_bitwidth:  # float16 <-> bfloat16
        return float_to_float(ctx, float_to_float(ctx, x, src, float32), float32, dst, rounding)
    if rounding == "rtz":
        suffix = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}[dst.name]
        source = {"float32": "f32", "float64": "f64"}[src.name]
        constraint = {"float16": "=h", "bfloat16": "=h", "float32": "=f"}[dst.name]
        constraint += ",f" if source == "f32" else ",d"
        bits = _cvt(ctx, f"cvt.rz.{suffix}.{source} $0, $1;",
                    I16 if dst.primitive_bitwidth == 16 else F32, constraint, x)
        return b.bitcast(bits, dst_ty) if dst.primitive_bitwidth == 16 else bits
    return b.fptrunc(x, dst_ty)


def convert(ctx, x: lir.Value, src, dst, rounding: str = "rtne") -> lir.Value:
    """Value-preserving conversion of ``x`` from ``src`` to ``dst`` (Triton's semantics)."""
    b = ctx.builder
    if src == dst:
        return x
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        if isinstance(src, PointerType) and isinstance(dst, PointerType):
            return x
        if isinstance(src, PointerType):
            return b.trunc(b.ptrtoint(x, I64), llvm_type(dst)) if dst.primitive_bitwidth < 64 else b.ptrtoint(x, I64)
        return b.inttoptr(b.zext(x, I64) if src.primitive_bitwidth < 64 else x, llvm_type(dst))
    dst_ty = llvm_type(dst)
    if dst.is_bool():
        if src.is_floating():
            return b.fcmp_unordered("!=", float_to_float(ctx, x, src, float32), F32(0.0))
        return b.icmp_unsigned("!=", x, x.type(0))
    if src.is_floating() and dst.is_floating():
        return float_to_float(ctx, x, src, dst, rounding)
    if src.is_floating():
        wide = float_to_float(ctx, x, src, float32) if src.primitive_bitwidth < 32 else x
        return b.fptosi(wide, dst_ty) if dst.is_int_signed() else b.fptoui(wide, dst_ty)
    if dst.is_floating():
        target = float32 if dst.primitive_bitwidth < 32 else dst
        wide = b.sitofp(x, llvm_type(target)) if src.is_int_signed() else b.uitofp(x, llvm_type(target))
        return float_to_float(ctx, wide, target, dst, rounding)
    if src.primitive_bitwidth > dst.primitive_bitwidth:
        return b.trunc(x, dst_ty)
    if src.primitive_bitwidth < dst.primitive_bitwidth:
        return b.sext(x, dst_ty) if src.is_int_signed() else b.zext(x, dst_ty)
    return x


def bitcast(ctx, x: lir.Value, src, dst) -> lir.Value:
    """Reinterpret the bits of ``x`` (equal widths; fp8 and int8 share ``i8``)."""
    src_ty, dst_ty = llvm_type(src), llvm_type(dst)
    return x if src_ty == dst_ty else ctx.builder.bitcast(x, dst_ty)
