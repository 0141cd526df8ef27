"""Lowering of values and element-wise ops: one LLVM instruction per register.

Math follows Triton's choice of PTX forms: ``exp``, ``exp2``, ``log``, ``log2``, ``sin``,
``cos``, ``sqrt`` and ``rsqrt`` of 32-bit (and narrower) floats use the hardware's
approximate instructions (``ex2.approx``, ``lg2.approx``, ``sin.approx``, ``cos.approx``,
``sqrt.approx``, ``rsqrt.approx``); ``exp2`` is ``ex2.approx.ftz.f32`` as in Triton (a
subnormal result is 0; without ``.ftz`` ptxas wraps each ``ex2`` in a range test and two
multiplies, which tripled the FMA-pipe work of attention's softmax), ``exp`` keeps the
non-flushing form.  16-bit floats are computed in float32.  Float32 (and
narrower) division is Triton's default ``div.full.f32`` (within 2 ulp; the interpreter
divides exactly), float64 division is IEEE-rounded.  Integer division and remainder follow
C, as the IR says.
"""

from __future__ import annotations

import math
from typing import Callable, List

import llvmlite.ir as lir

from ...ir import CompilationError, DType, Operation, PointerType, TensorType, element_type, float32
from ..context import KernelLowering
from ..llvm_types import F32, I1, I32, I64, llvm_type
from ..registry import lowering
from . import fp_convert

__all__: List[str] = []


def _operands(ctx: KernelLowering, op: Operation) -> List[list]:
    """Each operand as a list of per-register values (scalars as a one-element list)."""
    return [ctx.get(v) if isinstance(v.type, TensorType) else [ctx.get(v)] for v in op.operands]


def _map(ctx: KernelLowering, op: Operation, fn: Callable[..., lir.Value]) -> None:
    """Set the result to ``fn`` applied register by register to the operands."""
    columns = _operands(ctx, op)
    values = [fn(*regs) for regs in zip(*columns)]
    ctx.set(op.results[0], values if isinstance(op.results[0].type, TensorType) else values[0])


# ----------------------------------------------------------------------------- values
@lowering("constant")
def _constant(ctx: KernelLowering, op: Operation) -> None:
    ty = op.results[0].type
    constant = lir.Constant(llvm_type(ty), fp_convert.constant_bits(element_type(ty), op.attrs["value"]))
    ctx.set(op.results[0], [constant] * ctx.num_registers(ty) if isinstance(ty, TensorType) else constant)


@lowering("splat")
def _splat(ctx: KernelLowering, op: Operation) -> None:
    ctx.set(op.results[0], [ctx.get(op.operands[0])] * ctx.num_registers(op.results[0].type))


@lowering("arange")
def _arange(ctx: KernelLowering, op: Operation) -> None:
    start = op.attrs["start"]
    coords = ctx.element_coordinates(op.results[0].type)
    ctx.set(op.results[0], [ctx.builder.add(c[0], I32(start)) if start else c[0] for c in coords])


@lowering("program_id", "num_programs")
def _grid_index(ctx: KernelLowering, op: Operation) -> None:
    ctx.set(op.results[0], ctx.program_index("xyz"[op.attrs["axis"]], count=op.name == "num_programs"))


@lowering("hint")
def _hint(ctx: KernelLowering, op: Operation) -> None:
    ctx.set(op.results[0], ctx.get(op.operands[0]))


@lowering("assume")
def _assume(ctx: KernelLowering, op: Operation) -> None:
    ctx.builder.call(ctx.intrinsic("llvm.assume", lir.VoidType(), [I1]), [ctx.get(op.operands[0])])


# ----------------------------------------------------------------------- arithmetic
def _float_math(ctx: KernelLowering, dtype: DType, fn: Callable[[lir.Value], lir.Value]):
    """Wrap a float32 computation so 16-bit floats are extended before and rounded after."""
    if dtype.primitive_bitwidth >= 32:
        return fn

    def widened(*xs):
        return fp_convert.float_to_float(ctx, fn(*(fp_convert.float_to_float(ctx, x, dtype, float32) for x in xs)), float32, dtype)

    return widened


# Float32 (and narrower) divisions: Triton's default, IEEE round-to-nearest, the fast approximation.
_F32_DIVISIONS = {"div": "div.full.f32", "div_rn": "div.rn.f32", "div_approx": "div.approx.f32"}


def _binary_fn(ctx: KernelLowering, fn: str, dtype) -> Callable:
    b = ctx.builder
    if isinstance(dtype, PointerType):
        raise AssertionError("pointers take addptr, not binary")
    if dtype.is_floating():
        if fn in _F32_DIVISIONS and dtype.primitive_bitwidth <= 32:
            instruction = _F32_DIVISIONS[fn]
            return _float_math(ctx, dtype, lambda x, y: _approx2(ctx, instruction, x, y))
        if fn in ("div_rn", "div_approx"):  # float64: IEEE division
            return b.fdiv
        simple = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv, "rem": b.frem}
        if fn in simple:
            op = simple[fn]
            return _float_math(ctx, dtype, op) if fn == "rem" or dtype.name == "bfloat16" else op
        if fn in ("maximum", "minimum"):
            # maxnum/minnum ignore a NaN operand (propagate_nan='none', Triton's default).
            name = {"maximum": "llvm.maxnum", "minimum": "llvm.minnum"}[fn]
            ty = llvm_type(dtype)
            return lambda x, y: b.call(ctx.intrinsic(f"{name}.{ty.intrinsic_name}", ty, [ty, ty]), [x, y])
        if fn == "pow":
            def pow_(x, y):
                log2 = _approx(ctx, "lg2.approx.f32", x)
                return _approx(ctx, "ex2.approx.f32", b.fmul(y, log2))
            return _float_math(ctx, dtype, pow_)
        raise CompilationError(f"binary {fn} is not defined for {dtype}")
    signed = dtype.is_int_signed()
    table = {
        "add": b.add, "sub": b.sub, "mul": b.mul,
        "div": b.sdiv if signed else b.udiv, "rem": b.srem if signed else b.urem,
        "and": b.and_, "or": b.or_, "xor": b.xor, "shl": b.shl,
        "shr": b.ashr if signed else b.lshr,
    }
    if fn in table:
        return table[fn]
    if fn in ("maximum", "minimum"):
        pred = {"maximum": ">", "minimum": "<"}[fn]
        cmp = b.icmp_signed if signed else b.icmp_unsigned
        return lambda x, y: b.select(cmp(pred, x, y), x, y)
    if fn == "umulhi":  # Triton's mulhiui: the operands' bits as unsigned, whatever the dtype's sign
        ty = llvm_type(dtype)
        wide = lir.IntType(2 * ty.width)

        def mulhi(x, y):  # unsigned for every operand type, as Triton's (and the interpreter's)
            product = b.mul(b.zext(x, wide), b.zext(y, wide))
            return b.trunc(b.lshr(product, wide(ty.width)), ty)
        return mulhi
    raise CompilationError(f"binary {fn} is not defined for {dtype}")


@lowering("binary")
def _binary(ctx: KernelLowering, op: Operation) -> None:
    _map(ctx, op, _binary_fn(ctx, op.attrs["fn"], element_type(op.operands[0].type)))


def _approx(ctx: KernelLowering, instruction: str, x: lir.Value) -> lir.Value:
    """One approximate float32 PTX math instruction, e.g. ``ex2.approx.f32``."""
    fn_type = lir.FunctionType(F32, [F32])
    return ctx.builder.asm(fn_type, f"{instruction} $0, $1;", "=f,f", [x], side_effect=False)


def _approx2(ctx: KernelLowering, instruction: str, x: lir.Value, y: lir.Value) -> lir.Value:
    """One two-operand float32 PTX instruction, e.g. ``div.full.f32``."""
    fn_type = lir.FunctionType(F32, [F32, F32])
    return ctx.builder.asm(fn_type, f"{instruction} $0, $1, $2;", "=f,f,f", [x, y], side_effect=False)


_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)


def _unary_fn(ctx: KernelLowering, fn: str, dtype) -> Callable:
    b = ctx.builder
    if fn == "not":
        return lambda x: b.not_(x)
    if dtype.is_floating():
        ty = llvm_type(dtype)

        def intrinsic(name):
            return lambda x: b.call(ctx.intrinsic(f"llvm.{name}.{ty.intrinsic_name}", ty, [ty]), [x])

        if fn == "neg":
            return b.fneg
        if fn in ("abs", "floor", "ceil"):
            return intrinsic({"abs": "fabs"}.get(fn, fn))
        if dtype.primitive_bitwidth == 64:
            if fn in ("sqrt", "sqrt_rn"):
                return intrinsic("sqrt")
            raise CompilationError(f"{fn} of float64 has no GPU lowering yet; compute it in float32")
        approx = {
            "exp2": lambda x: _approx(ctx, "ex2.approx.ftz.f32", x),
            "exp": lambda x: _approx(ctx, "ex2.approx.f32", b.fmul(x, F32(_LOG2E))),
            "log2": lambda x: _approx(ctx, "lg2.approx.f32", x),
            "log": lambda x: b.fmul(_approx(ctx, "lg2.approx.f32", x), F32(_LN2)),
            "sin": lambda x: _approx(ctx, "sin.approx.f32", x),
            "cos": lambda x: _approx(ctx, "cos.approx.f32", x),
            "sqrt": lambda x: _approx(ctx, "sqrt.approx.f32", x),
            "sqrt_rn": lambda x: _approx(ctx, "sqrt.rn.f32", x),
            "rsqrt": lambda x: _approx(ctx, "rsqrt.approx.f32", x),
        }
        if fn in approx:
            return _float_math(ctx, dtype, approx[fn])
        raise CompilationError(f"{fn} of {dtype} has no GPU lowering yet")
    if fn == "neg":
        return b.neg
    if fn == "abs":
        if not dtype.is_int_signed():
            return lambda x: x
        return lambda x: b.select(b.icmp_signed("<", x, x.type(0)), b.neg(x), x)
    raise CompilationError(f"{fn} is not defined for {dtype}")


@lowering("unary")
def _unary(ctx: KernelLowering, op: Operation) -> None:
    _map(ctx, op, _unary_fn(ctx, op.attrs["fn"], element_type(op.operands[0].type)))


_PREDICATES = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@lowering("compare")
def _compare(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    dtype = element_type(op.operands[0].type)
    pred = _PREDICATES[op.attrs["predicate"]]
    if isinstance(dtype, PointerType):
        _map(ctx, op, lambda x, y: b.icmp_unsigned(pred, b.ptrtoint(x, I64), b.ptrtoint(y, I64)))
    elif dtype.is_floating():
        ordered = b.fcmp_unordered if pred == "!=" else b.fcmp_ordered
        if dtype.name == "bfloat16" or dtype.is_fp8():
            widen = lambda x: fp_convert.float_to_float(ctx, x, dtype, float32)  # noqa: E731
            _map(ctx, op, lambda x, y: ordered(pred, widen(x), widen(y)))
        else:
            _map(ctx, op, lambda x, y: ordered(pred, x, y))
    elif dtype.is_int_signed():
        _map(ctx, op, lambda x, y: b.icmp_signed(pred, x, y))
    else:
        _map(ctx, op, lambda x, y: b.icmp_unsigned(pred, x, y))


@lowering("fma")
def _fma(ctx: KernelLowering, op: Operation) -> None:
    dtype = element_type(op.operands[0].type)
    ty = llvm_type(dtype)
    fn = ctx.intrinsic(f"llvm.fma.{ty.intrinsic_name}", ty, [ty, ty, ty])
    _map(ctx, op, lambda a, b_, c: ctx.builder.call(fn, [a, b_, c]))


@lowering("select")
def _select(ctx: KernelLowering, op: Operation) -> None:
    _map(ctx, op, ctx.builder.select)


@lowering("addptr")
def _addptr(ctx: KernelLowering, op: Operation) -> None:
    pointee = llvm_type(element_type(op.operands[0].type).element)
    _map(ctx, op, lambda p, i: ctx.builder.gep(p, [i], source_etype=pointee))


@lowering("cast")
def _cast(ctx: KernelLowering, op: Operation) -> None:
    src = element_type(op.operands[0].type)
    dst = op.attrs["to"]
    if op.attrs.get("bitcast"):
        _map(ctx, op, lambda x: fp_convert.bitcast(ctx, x, src, dst))
    else:
        rounding = op.attrs.get("rounding") or "rtne"
        _map(ctx, op, lambda x: fp_convert.convert(ctx, x, src, dst, rounding))
