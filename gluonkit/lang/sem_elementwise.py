"""Element-wise semantics: arithmetic, bitwise, comparison, math, ``where``, min/max.

Operand types are reconciled by :mod:`gluonkit.lang.promotion` (Triton's rules, listed
there), then cast, splat and broadcast by :class:`~gluonkit.lang.sem_core.CoreSemantic`.
"""

from __future__ import annotations

from typing import Tuple

from ..ir.types import PointerType, float32, float64, int1
from . import promotion
from .errors import ArgumentError, TypeMismatchError
from .sem_core import CoreSemantic
from .tensor import tensor

__all__ = ["ElementwiseSemantic", "MATH_FNS"]

# Unary math functions and the element types they accept (Triton: fp32 and fp64 only).
MATH_FNS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "erf")

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "eq": "==", "ne": "!=",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "maximum": "maximum", "minimum": "minimum",
           "where": "where", "fma": "fma"}


class ElementwiseSemantic(CoreSemantic):
    """Element-wise ops with promotion (see the module docstring)."""

    # -------------------------------------------------------------- promotion
    def _operand_type(self, x, op: str):
        if isinstance(x, tensor):
            return x.dtype, False
        if not promotion.is_literal(x):
            self.error(f"operand of {_SYMBOL.get(op, op)} must be a tensor or a number, got {x!r}",
                       TypeMismatchError)
        try:
            return promotion.literal_dtype(x), True
        except ValueError as e:
            self.error(str(e), TypeMismatchError)

    def promote(self, a, b, op: str, div_or_mod: bool = False) -> Tuple[tensor, tensor]:
        """Convert ``a`` and ``b`` to their common type and broadcast them together."""
        ta, la = self._operand_type(a, op)
        tb, lb = self._operand_type(b, op)
        if isinstance(ta, PointerType) or isinstance(tb, PointerType):
            self.error(f"{_SYMBOL.get(op, op)} is not defined for {ta} and {tb}", TypeMismatchError)
        try:
            ct = promotion.computation_type(ta, la, tb, lb, div_or_mod)
        except TypeError as e:
            self.error(f"{_SYMBOL.get(op, op)}: {e}", TypeMismatchError)
        return tuple(self.broadcast_all([self._convert(v, ct, op) for v in (a, b)]))

    def _convert(self, v, ct, op: str) -> tensor:
        if isinstance(v, tensor):
            return self.cast(v, ct)
        if isinstance(v, (int, float)) and v < 0 and ct.is_int_unsigned():
            self.error(f"{_SYMBOL.get(op, op)} between an unsigned {ct} tensor and the negative constant {v}; "
                       "cast one of them explicitly", TypeMismatchError)
        return self.to_tensor(v, ct)

    def _binary(self, fn: str, a: tensor, b: tensor, attrs=None) -> tensor:
        return self.create1("binary", [a, b], a.type, dict({"fn": fn}, **(attrs or {})))

    # ------------------------------------------------------------- arithmetic
    def arith(self, op: str, a, b) -> tensor:
        """``a <op> b`` for op in add, sub, mul, truediv, floordiv, mod (Python's operators)."""
        ptr_a = isinstance(a, tensor) and isinstance(a.dtype, PointerType)
        ptr_b = isinstance(b, tensor) and isinstance(b.dtype, PointerType)
        if ptr_a or ptr_b:
            return self._pointer_arith(op, a, b, ptr_a, ptr_b)
        div_or_mod = op in ("truediv", "floordiv", "mod")
        zero_divisor = op in ("floordiv", "mod") and _is_int_literal(b) and b == 0
        a, b = self.promote(a, b, op, div_or_mod)
        if zero_divisor and a.dtype.is_int():
            self.error(f"integer {_SYMBOL[op]} by the constant 0: the result is unspecified on the GPU (PTX gives "
                       "no error); guard the divisor or divide by a non-zero value", ArgumentError)
        if op == "truediv":
            if a.dtype.is_int():
                a, b = self.cast(a, float32), self.cast(b, float32)
            return self._binary("div", a, b)
        if op == "floordiv":
            if not a.dtype.is_int():
                self.error(f"// needs integer operands, got {a.dtype}; use / for floating point",
                           TypeMismatchError)
            return self._binary("div", a, b)
        return self._binary({"add": "add", "sub": "sub", "mul": "mul", "mod": "rem"}[op], a, b)

    def _pointer_arith(self, op, a, b, ptr_a, ptr_b) -> tensor:
        if op == "add" and ptr_a != ptr_b:
            ptr, off = (a, b) if ptr_a else (b, a)
        elif op == "sub" and ptr_a and not ptr_b:
            ptr, off = a, self.unary("neg", b)
        else:
            left = a.dtype if isinstance(a, tensor) else type(a).__name__
            right = b.dtype if isinstance(b, tensor) else type(b).__name__
            self.error(f"{_SYMBOL[op]} is not defined for {left} and {right}: pointers support only "
                       "pointer + integer and pointer - integer", TypeMismatchError)
        off = self.to_tensor(off)
        if not off.dtype.is_int():
            self.error(f"a pointer offset must be an integer, got {off.dtype}", TypeMismatchError)
        ptr, off = self.broadcast_all([ptr, off])
        return self.create1("addptr", [ptr, off], ptr.type)

    def bitwise(self, op: str, a, b) -> tensor:
        """``a <op> b`` for op in and, or, xor, shl, shr: integers only."""
        shift = b if op in ("shl", "shr") and _is_int_literal(b) else None
        a, b = self.promote(a, b, op)
        if not a.dtype.is_int():
            self.error(f"{_SYMBOL[op]} needs integer operands, got {a.dtype}", TypeMismatchError)
        bits = a.dtype.primitive_bitwidth
        if shift is not None and not 0 <= shift < bits:
            self.error(f"{_SYMBOL[op]} by {shift} is out of range for {a.dtype}: a shift must be in [0, {bits}) "
                       f"(shifting by the width or more is undefined in LLVM and PTX); cast to a wider type "
                       "first (.to(gl.int64)) or shift by less", ArgumentError)
        return self._binary(op, a, b)

    def compare(self, predicate: str, a, b) -> tensor:
        """Element-wise comparison; the result is ``int1`` shaped like the operands."""
        ptrs = [isinstance(v, tensor) and isinstance(v.dtype, PointerType) for v in (a, b)]
        if all(ptrs):
            a, b = self.broadcast_all([a, b])
        else:
            a, b = self.promote(a, b, predicate)
        return self.create1("compare", [a, b], self.retype(a, int1), {"predicate": predicate})

    def logical(self, op: str, a, b) -> tensor:
        """``and``/``or`` of runtime values: both as ``int1``, then bitwise."""
        a, b = self.broadcast_all([self.to_bool(a, "operand of " + op), self.to_bool(b, "operand of " + op)])
        return self._binary(op, a, b)

    # ------------------------------------------------------------------ unary
    def unary(self, fn: str, x) -> tensor:
        """neg, not (bitwise ~), abs and the math functions of :data:`MATH_FNS`."""
        x = self.to_tensor(x)
        dt = x.dtype
        if isinstance(dt, PointerType):
            self.error(f"{fn} is not defined for pointers ({dt})", TypeMismatchError)
        if fn == "not" and not dt.is_int():
            self.error(f"~ needs an integer operand, got {dt}", TypeMismatchError)
        if fn in MATH_FNS and dt not in (float32, float64):
            self.error(f"{fn} expects a float32 or float64 operand, got {dt}; convert with .to(gl.float32)",
                       TypeMismatchError)
        if fn == "abs" and (dt.is_int_unsigned() or dt.is_bool()):
            return x
        return self.create1("unary", [x], x.type, {"fn": fn})

    def logical_not(self, x) -> tensor:
        """Python's ``not`` on a runtime value: ``x == 0``."""
        return self.compare("eq", self.to_tensor(x), 0)

    # ------------------------------------------------------------ ternary etc.
    def minmax(self, fn: str, a, b, propagate_nan: str = "none") -> tensor:
        """``maximum``/``minimum``; floats honour ``propagate_nan`` ('none' or 'all')."""
        if propagate_nan not in ("none", "all"):
            self.error(f"propagate_nan must be 'none' or 'all' (gl.PropagateNan), got {propagate_nan!r}",
                       TypeMismatchError)
        a, b = self.promote(a, b, fn)
        attrs = {"propagate_nan": propagate_nan} if a.dtype.is_floating() else {}
        return self._binary(fn, a, b, attrs)

    def where(self, cond, x, y) -> tensor:
        """Element-wise ``cond ? x : y`` (Triton's ``where``)."""
        cond = self.to_bool(cond, "the condition of where")
        ptrs = [isinstance(v, tensor) and isinstance(v.dtype, PointerType) for v in (x, y)]
        if all(ptrs) and x.dtype == y.dtype:
            x, y = self.broadcast_all([x, y])
        else:
            x, y = self.promote(x, y, "where")
        cond, x, y = self.broadcast_all([cond, x, y])
        return self.create1("select", [cond, x, y], x.type)

    def fma(self, a, b, c) -> tensor:
        """``a * b + c`` with one rounding; the operands are promoted together."""
        ts = [self._operand_type(v, "fma") for v in (a, b, c)]
        try:
            ct = promotion.computation_type(ts[0][0], ts[0][1], ts[1][0], ts[1][1])
            ct = promotion.computation_type(ct, ts[0][1] and ts[1][1], ts[2][0], ts[2][1])
        except TypeError as e:
            self.error(f"fma: {e}", TypeMismatchError)
        if not ct.is_floating():
            self.error(f"fma needs floating-point operands, got {ct}", TypeMismatchError)
        a, b, c = self.broadcast_all([self._convert(v, ct, "fma") for v in (a, b, c)])
        return self.create1("fma", [a, b, c], a.type)


def _is_int_literal(value) -> bool:
    """A Python int (not a bool) given as an operand: its value is known while the IR is built."""
    return isinstance(value, int) and not isinstance(value, bool)
