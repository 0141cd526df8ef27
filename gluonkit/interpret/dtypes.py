"""IR element types as numpy dtypes, and the conversions between them.

``bfloat16`` and the fp8 types come from ``ml_dtypes`` (``float8e4nv`` is OCP e4m3fn,
``float8e5`` is e5m2); ``int1`` is numpy ``bool``; pointers are ``int64`` byte addresses in
the interpreter's simulated memory (:mod:`.memory`).

Conversions follow the GPU lowering (Triton's semantics): float narrowing rounds to nearest
even (``rtne``) or toward zero (``rtz``); conversion to fp8 goes through float32 and
saturates to the largest finite value (PTX ``cvt.rn.satfinite``); float → int truncates
toward zero, saturating at the integer range, NaN → 0 (PTX ``cvt.rzi``); int → int wraps;
anything → ``int1`` tests for non-zero; int → a float narrower than 32 bits goes through
float32.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.types import DType, PointerType, float32

__all__ = ["numpy_dtype", "compute_dtype", "convert", "from_python", "ADDRESS_DTYPE"]

ADDRESS_DTYPE = np.dtype(np.int64)

_NUMPY = {
    "int1": np.dtype(np.bool_),
    "int8": np.dtype(np.int8), "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32), "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8), "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
    "float8e4nv": np.dtype(ml_dtypes.float8_e4m3fn), "float8e5": np.dtype(ml_dtypes.float8_e5m2),
}


def numpy_dtype(ty) -> np.dtype:
    """The numpy dtype that holds values of IR scalar type ``ty`` (a DType or PointerType)."""
    if isinstance(ty, PointerType):
        return ADDRESS_DTYPE
    try:
        return _NUMPY[ty.name]
    except (KeyError, AttributeError):
        raise ValueError(f"numpy_dtype: expected an IR DType or PointerType, got {ty!r}") from None


def compute_dtype(ty: DType) -> np.dtype:
    """The dtype arithmetic on ``ty`` is carried out in before rounding back to ``ty``.

    Floats narrower than 32 bits compute in float32 and round once per op, as the GPU does;
    every other type computes in itself.
    """
    if ty.is_floating() and ty.primitive_bitwidth < 32:
        return np.dtype(np.float32)
    return numpy_dtype(ty)


def from_python(value, ty) -> np.ndarray:
    """A Python/numpy number (or array) as an array of ``ty`` (constants and arguments).

    Integers wrap to the type's width; bools become 0/1 for integer types.
    """
    dt = numpy_dtype(ty)
    if isinstance(ty, PointerType) or ty.is_int() and not ty.is_bool():
        bits = 64 if isinstance(ty, PointerType) else ty.primitive_bitwidth
        wrapped = np.vectorize(lambda v: int(v) & ((1 << bits) - 1), otypes=[object])(value)
        signed = isinstance(ty, PointerType) or ty.is_int_signed()
        unsigned = np.array(wrapped, dtype=np.dtype(f"uint{bits}"))
        return unsigned.view(np.dtype(f"int{bits}")) if signed else unsigned
    if ty.is_bool():
        return np.asarray(value).astype(np.bool_)
    # Constants round to nearest even without saturating (an fp8 -inf stays -inf or NaN),
    # fp8 by way of float32, as the lowering materializes them.
    wide = np.asarray(value, dtype=np.float32 if ty.is_fp8() else np.float64)
    return wide.astype(dt)


def convert(x: np.ndarray, src, dst, rounding: str = "rtne") -> np.ndarray:
    """Value-preserving conversion of array ``x`` from IR type ``src`` to ``dst``."""
    x = np.asarray(x)
    if isinstance(src, PointerType) or isinstance(dst, PointerType):
        return _int_to_int(x, 64 if isinstance(dst, PointerType) else dst.primitive_bitwidth,
                           numpy_dtype(dst))
    out = numpy_dtype(dst)
    if src == dst:
        return x.astype(out)
    if dst.is_bool():
        return x.astype(compute_dtype(src)) != 0
    if src.is_floating() and dst.is_floating():
        return _float_to_float(x, dst, rounding)
    if src.is_floating():
        return _float_to_int(x.astype(np.float64), out)
    if dst.is_floating():
        wide = np.float32 if dst.primitive_bitwidth < 32 else out
        return _float_to_float(x.astype(wide), dst, rounding)
    return _int_to_int(x, dst.primitive_bitwidth, out)


def _int_to_int(x: np.ndarray, bits: int, out: np.dtype) -> np.ndarray:
    """Wrap integers (or booleans, zero-extended) to ``bits`` bits of dtype ``out``."""
    if x.dtype == np.bool_:
        x = x.astype(np.uint8)
    return x.astype(out, casting="unsafe")


def _float_to_int(x: np.ndarray, out: np.dtype) -> np.ndarray:
    info = np.iinfo(out)
    with np.errstate(invalid="ignore"):
        t = np.trunc(np.nan_to_num(x, nan=0.0))
        t = np.clip(t, float(info.min), float(info.max))
    # float(info.max) of a 64-bit type rounds up past the range; clamp after converting.
    result = np.where(t >= 2.0 ** (info.bits - (1 if info.min < 0 else 0)), info.max,
                      t.astype(out, casting="unsafe"))
    return result.astype(out)


def _float_to_float(x: np.ndarray, dst: DType, rounding: str) -> np.ndarray:
    if rounding not in ("rtne", "rtz"):
        raise ValueError(f"cast rounding must be 'rtne' or 'rtz', got {rounding!r}")
    out = numpy_dtype(dst)
    if x.dtype.itemsize < 4:
        x = x.astype(np.float32)  # fp8/16-bit sources widen exactly to float32 first
    if dst.is_fp8():
        if x.dtype != np.float32:
            x = _float_to_float(x, float32, rounding)
        finite_max = np.float32(ml_dtypes.finfo(out).max)
        with np.errstate(invalid="ignore"):
            x = np.clip(x, -finite_max, finite_max)  # satfinite; NaN stays NaN
    if x.dtype.itemsize <= out.itemsize:
        return x.astype(out)
    nearest = x.astype(out)
    if rounding == "rtne":
        return nearest
    return _toward_zero(x, nearest, out)


def _toward_zero(x: np.ndarray, nearest: np.ndarray, out: np.dtype) -> np.ndarray:
    """Round-to-nearest results that overshot ``|x|`` stepped one ulp toward zero.

    Floats are sign-magnitude, so decrementing the bit pattern of a non-zero value lowers
    its magnitude by one ulp; an overflow to infinity (or to e4m3fn's NaN) steps back to
    the largest finite value.
    """
    back = nearest.astype(x.dtype)
    with np.errstate(invalid="ignore"):
        overshot = (np.abs(back) > np.abs(x)) & ~np.isnan(x)
    bits = nearest.view(np.dtype(f"uint{8 * out.itemsize}")).copy()
    bits[overshot] -= 1
    return bits.view(out)
