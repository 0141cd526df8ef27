"""How IR types are represented in LLVM IR.

Scalars map to the LLVM type of the same width; ``float8e4nv``/``float8e5`` have no LLVM
type and are kept as ``i8`` bit patterns (converted with ``cvt`` instructions); pointers
are opaque ``ptr addrspace(1)`` (global memory).  A distributed tensor has no LLVM type of
its own: it lowers to a list of per-thread values of its element type, one per register.
A TMA descriptor parameter is a generic ``ptr`` to the 128-byte tensor map passed by value
(:class:`TensorMapParamAttributes`).
"""

from __future__ import annotations

import struct

import llvmlite.ir as lir
import llvmlite.ir.types as lir_types

from llvmlite.ir.values import ArgumentAttributes

from ..ir import DType, PointerType, TensorDescType, element_type

__all__ = ["llvm_type", "struct_type", "TensorMapParamAttributes", "bit_width", "byte_size", "I1", "I8", "I16", "I32", "I64", "F16", "BF16", "F32", "F64", "GLOBAL_PTR"]



class BFloatType(lir_types._BaseFloatType):
    """LLVM's ``bfloat``, which llvmlite.ir lacks; constants print as ``0xR`` bit patterns."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value: float) -> str:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        if value != value:  # NaN: keep it quiet
            return "0xR7FC0"
        bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
        return f"0xR{(bits >> 16) & 0xFFFF:04X}"


BFloatType._create_instance()

I1, I8, I16, I32, I64 = (lir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, BF16, F32, F64 = lir.HalfType(), BFloatType(), lir.FloatType(), lir.DoubleType()
GLOBAL_PTR = lir.PointerType(addrspace=1)

_FLOATS = {"float16": F16, "bfloat16": BF16, "float32": F32, "float64": F64}


def struct_type(module: lir.Module, element: lir.Type, count: int) -> lir.Type:
    """The struct of ``count`` values of type ``element`` that multi-output inline asm returns,
    as a type named in ``module``'s context (``%"floatx128"``).

    LLVM IR text spells a literal struct out in full on every ``extractvalue``: a wgmma
    accumulator's 128 floats made 90% of the WS GEMM's 830 KB of IR, which Python prints
    and LLVM parses on every compile.  A named type prints as its name (the generated code
    is the same)."""
    struct = module.context.get_identified_type(f"{element}x{count}")
    if struct.elements is None:  # first use in this module: give it its body
        struct.set_body(*[element] * count)
    return struct


def llvm_type(ty) -> lir.Type:
    """The LLVM type of one element (or scalar) of IR type ``ty``."""
    if isinstance(ty, TensorDescType):
        return lir.PointerType()
    ty = element_type(ty)
    if isinstance(ty, PointerType):
        return GLOBAL_PTR
    assert isinstance(ty, DType), ty
    if ty.is_floating():
        return _FLOATS.get(ty.name, I8)  # fp8: raw bits
    return lir.IntType(ty.primitive_bitwidth)


def bit_width(ty: lir.Type) -> int:
    """Bits of an LLVM scalar type (int or float)."""
    if isinstance(ty, lir.IntType):
        return ty.width
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(ty)]


def byte_size(ty: lir.Type) -> int:
    """Bytes one value of ``ty`` occupies in memory (``i1`` takes a byte)."""
    return max(1, bit_width(ty) // 8)


class TensorMapParamAttributes(ArgumentAttributes):
    """A kernel parameter holding a ``CUtensorMap`` by value: ``.param .align 64 .b8 [128]``.

    ``"nvvm.grid_constant"`` (LLVM's NVPTX parameter attribute) keeps it in the parameter
    space: its address is taken with ``cvta.param`` instead of copying the 128 bytes to
    local memory, and ``cp.async.bulk.tensor`` reads the map there, as CUDA's
    ``const __grid_constant__ CUtensorMap`` does.  (llvmlite's own ``byval`` needs a typed pointer.)
    """

    def _to_list(self, typ):
        return ["byval([128 x i8])", "align 64", '"nvvm.grid_constant"']
