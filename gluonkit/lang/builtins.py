"""The ``gl.*`` functions kernels call.

Each is a :func:`~gluonkit.lang.tensor.builtin`: the frontend calls it with the semantic
layer as ``_semantic`` (from plain Python it raises).  Names, parameters and defaults follow
Gluon/Triton 3.x; the work happens in :class:`~gluonkit.lang.semantic.Semantic`.
"""

from __future__ import annotations

from .callables import is_jit_function
from .constexpr import unwrap
from .errors import TypeMismatchError
from .tensor import builtin, shape_args, tensor, tensor_member

__all__ = [
    "program_id", "num_programs", "num_warps", "num_ctas", "arange", "full", "zeros", "full_like", "zeros_like",
    "load", "store", "cast", "where", "maximum", "minimum", "abs", "exp", "exp2", "log", "log2",
    "sqrt", "rsqrt", "sin", "cos", "floor", "ceil", "erf", "fma", "cdiv", "sum", "max", "min",
    "reduce", "expand_dims", "broadcast_to", "reshape", "permute", "split", "join",
    "convert_layout", "set_auto_layout", "static_assert", "static_print", "device_print", "device_assert", "to_tensor",
    "assume", "multiple_of", "max_contiguous", "static_range", "PropagateNan",
]


class PropagateNan:
    """How ``maximum``/``minimum`` treat NaN: ``NONE`` returns the other operand, ``ALL`` NaN."""

    NONE = "none"
    ALL = "all"


#: The most iterations a ``static_range`` unrolls: more is almost surely a runtime loop written
#: as an unrolled one, and would build the body that many times (minutes, or no end in sight).
MAX_STATIC_RANGE = 8192


class static_range:  # noqa: N801 - Gluon's spelling
    """``for i in gl.static_range(start, end, step)``: a loop unrolled at compile time;
    ``i`` is a compile-time int in each copy of the body.  Bounds must be compile-time ints,
    and it unrolls at most :data:`MAX_STATIC_RANGE` iterations."""

    def __init__(self, start, end=None, step=1):
        if end is None:
            start, end = 0, start
        for name, v in (("start", start), ("end", end), ("step", step)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"static_range {name} must be a compile-time int, got {v!r}")
        if step == 0:
            raise ValueError("static_range step must not be 0")
        self.range = range(start, end, step)
        if len(self.range) > MAX_STATIC_RANGE:
            raise ValueError(f"static_range({start}, {end}, {step}) would unroll {len(self.range)} copies of the "
                             f"loop body (at most {MAX_STATIC_RANGE}); use range() for a loop that runs at run time")


# ------------------------------------------------------------------ program and grid
@builtin
def program_id(axis, _semantic=None):
    return _semantic.program_id("program_id", axis)


@builtin
def num_programs(axis, _semantic=None):
    return _semantic.program_id("num_programs", axis)


@builtin
def num_warps(_semantic=None):
    """The number of warps the kernel is compiled for (a compile-time int)."""
    return _semantic.num_warps


@builtin
def num_ctas(_semantic=None):
    """The number of CTAs in the kernel's cluster (the ``num_ctas`` launch option; a compile-time int)."""
    return _semantic.num_ctas


# -------------------------------------------------------------------------- creation
@builtin
def arange(start, end, layout=None, _semantic=None):
    return _semantic.arange(start, end, layout)


@builtin
def full(shape, value, dtype, layout=None, _semantic=None):
    return _semantic.full(shape, value, dtype, layout)


@builtin
def zeros(shape, dtype, layout=None, _semantic=None):
    return _semantic.full(shape, 0, dtype, layout)


@builtin
def full_like(input, value, shape=None, dtype=None, layout=None, _semantic=None):
    input = _semantic.require_tensor(input, "full_like input", block=True)
    return _semantic.full(input.shape if shape is None else shape, value,
                          input.dtype if dtype is None else dtype,
                          input.layout if layout is None else layout)


@builtin
def zeros_like(input, shape=None, dtype=None, layout=None, _semantic=None):
    return full_like(input, 0, shape, dtype, layout, _semantic=_semantic)


# ---------------------------------------------------------------------------- memory
@builtin
def load(pointer, mask=None, other=None, cache_modifier="", eviction_policy="", volatile=False,
         _semantic=None):
    return _semantic.load(pointer, mask, other, cache_modifier, eviction_policy, volatile)


@builtin
def store(pointer, value, mask=None, cache_modifier="", eviction_policy="", _semantic=None):
    return _semantic.store(pointer, value, mask, cache_modifier, eviction_policy)


# ---------------------------------------------------------------------- element-wise
@tensor_member
@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
    return _semantic.cast(input, dtype, bitcast=bitcast, rounding=fp_downcast_rounding)


@builtin
def where(condition, x, y, _semantic=None):
    return _semantic.where(condition, x, y)


@builtin
def maximum(x, y, propagate_nan=PropagateNan.NONE, _semantic=None):
    return _semantic.minmax("maximum", x, y, propagate_nan)


@builtin
def minimum(x, y, propagate_nan=PropagateNan.NONE, _semantic=None):
    return _semantic.minmax("minimum", x, y, propagate_nan)


def _unary(fn_name: str):
    @builtin
    def fn(x, _semantic=None):
        return _semantic.unary(fn_name, x)

    fn.__name__ = fn.__qualname__ = fn_name
    fn.__doc__ = f"Element-wise {fn_name} (float32/float64 operands for the math functions)."
    return tensor_member(fn)  # also x.exp() etc., as in Gluon


abs = _unary("abs")  # noqa: A001 - Gluon's name
exp = _unary("exp")
exp2 = _unary("exp2")
log = _unary("log")
log2 = _unary("log2")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sin = _unary("sin")
cos = _unary("cos")
floor = _unary("floor")
ceil = _unary("ceil")
erf = _unary("erf")


@builtin
def fma(x, y, z, _semantic=None):
    return _semantic.fma(x, y, z)


@tensor_member
@builtin
def cdiv(x, div, _semantic=None):
    """``(x + div - 1) // div``; compile-time when both operands are."""
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return (x + div - 1) // div
    return _semantic.arith("floordiv", _semantic.arith("sub", _semantic.arith("add", x, div), 1), div)


# ------------------------------------------------------------------------ reductions
@tensor_member
@builtin
def sum(input, axis=None, keep_dims=False, dtype=None, _semantic=None):  # noqa: A001
    return _semantic.sum(input, axis, keep_dims, dtype)


@tensor_member
@builtin
def max(input, axis=None, keep_dims=False, _semantic=None):  # noqa: A001
    return _semantic.reduce_minmax(input, axis, keep_dims, "maximum")


@tensor_member
@builtin
def min(input, axis=None, keep_dims=False, _semantic=None):  # noqa: A001
    return _semantic.reduce_minmax(input, axis, keep_dims, "minimum")


@tensor_member
@builtin
def reduce(input, axis, combine_fn, keep_dims=False, _semantic=None):
    if not is_jit_function(combine_fn):
        _semantic.error(f"reduce's combine_fn must be a @gluonkit.jit function, got {combine_fn!r}")
    return _semantic.reduce(input, axis, combine_fn, keep_dims)


# ---------------------------------------------------------------- shapes and layouts
@tensor_member
@builtin
def expand_dims(input, axis, _semantic=None):
    return _semantic.expand_dims(input, axis)


@tensor_member
@builtin
def broadcast_to(input, *shape, _semantic=None):
    return _semantic.broadcast_to(input, shape_args(shape))


@tensor_member
@builtin
def reshape(input, *shape, can_reorder=False, _semantic=None):
    return _semantic.reshape(input, shape_args(shape), can_reorder)


@tensor_member
@builtin
def permute(input, *dims, _semantic=None):
    return _semantic.permute(input, shape_args(dims))


@tensor_member
@builtin
def split(a, _semantic=None):
    return _semantic.split(a)


@builtin
def join(a, b, _semantic=None):
    return _semantic.join(a, b)


@builtin
def convert_layout(value, layout, assert_trivial=False, _semantic=None):
    return _semantic.convert_layout(value, layout, bool(unwrap(assert_trivial)))


@builtin
def set_auto_layout(value, layout, _semantic=None):
    return _semantic.set_auto_layout(value, layout)


# --------------------------------------------------------------- debugging and hints
@builtin
def static_assert(cond, msg="", _semantic=None):
    """Fail compilation with ``msg`` unless the compile-time ``cond`` holds."""
    _semantic.require_constexpr(cond, "the static_assert condition")
    if not cond:
        _semantic.error(f"static_assert failed{': ' + str(msg) if msg else ''}")


@builtin
def static_print(*values, sep=" ", end="\n", file=None, flush=False, _semantic=None):
    """Print at compile time, like Python's ``print`` (tensors print as their type)."""
    print(*values, sep=sep, end=end, file=file, flush=flush)


@builtin
def device_print(prefix, *args, hex=False, _semantic=None):  # noqa: A002 - Gluon's name
    """Print ``prefix`` and the values at run time, once per element and program."""
    if not isinstance(prefix, str):
        _semantic.error(f"device_print's first argument must be a string prefix, got {prefix!r}")
    values = [_semantic.to_tensor(a) for a in args]
    _semantic.create("device_print", values, [], {"prefix": prefix, "hex": bool(hex)})


@builtin
def device_assert(cond, msg="", mask=None, _semantic=None):
    """Stop the kernel with ``msg`` where ``cond`` (a scalar or tensor) is false, ignoring
    elements where ``mask`` is false.  As in Gluon, it is compiled in only in debug mode
    (``@gluonkit.jit(debug=True)`` or ``GLUONKIT_DEBUG=1``); otherwise it does nothing."""
    _semantic.device_assert(cond, msg, mask)


@builtin
def to_tensor(x, _semantic=None):
    """``x`` as a runtime value: a Python bool/int/float becomes a scalar of its literal type
    (int1, int32/int64/uint64 by range, float32); tensors pass through."""
    return _semantic.to_tensor(x)


@builtin
def assume(cond, _semantic=None):
    """Promise that the runtime scalar ``cond`` holds (compile-time ``True`` is a no-op)."""
    if not isinstance(cond, tensor):
        if not cond:
            _semantic.error(f"assume of a compile-time false condition ({cond!r})")
        return
    if cond.is_block():
        _semantic.error(f"assume needs a scalar condition, got a tensor of shape {list(cond.shape)}",
                        TypeMismatchError)
    _semantic.create("assume", [_semantic.to_bool(cond, "the assumed condition")], [])


@builtin
def multiple_of(input, values, _semantic=None):
    return _semantic.hint(input, multiple_of=values)


@builtin
def max_contiguous(input, values, _semantic=None):
    return _semantic.hint(input, max_contiguous=values)
