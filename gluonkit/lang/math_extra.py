"""Gluon 3.9's remaining element-wise and reduction helpers, built from existing ops.

``add``/``sub``/``mul`` are the operators as functions; ``clamp`` is ``minimum(maximum(…))``
(Triton's ``clampf`` means the same for floats); ``umulhi`` and the IEEE-rounded
``div_rn``/``sqrt_rn`` (and ``fdiv``'s choices) are ``binary``/``unary`` functions of the
IR; ``xor_sum``/``reduce_or`` are reductions; ``ravel``, ``broadcast``, ``to_tensor`` and
``max_constancy`` are the shape helpers and hint of Triton's core.  ``flip`` and ``sigmoid``
exist only as tensor methods (``x.flip(0)``), as in Gluon 3.9, whose ``gl`` has no such
functions; ``flip`` is a ``gather`` (through shared memory on the GPU).  Names, parameters and defaults are Gluon 3.9's.
"""

from __future__ import annotations

from ..ir.types import float32
from ..layouts.distributed import AutoLayout
from .collective import gather
from .constexpr import unwrap
from .errors import ArgumentError, TypeMismatchError
from .sem_core import is_power_of_two
from .tensor import builtin, tensor, tensor_member

__all__ = ["add", "sub", "mul", "clamp", "umulhi", "fdiv", "div_rn", "sqrt_rn", "xor_sum", "reduce_or", "ravel",
           "broadcast", "max_constancy"]


@builtin
def add(x, y, sanitize_overflow=True, _semantic=None):
    """``x + y`` (``sanitize_overflow`` is accepted for Gluon's signature; overflow wraps)."""
    return _semantic.arith("add", x, y)


@builtin
def sub(x, y, sanitize_overflow=True, _semantic=None):
    """``x - y`` (see :func:`add`)."""
    return _semantic.arith("sub", x, y)


@builtin
def mul(x, y, sanitize_overflow=True, _semantic=None):
    """``x * y`` (see :func:`add`)."""
    return _semantic.arith("mul", x, y)


@builtin
def clamp(x, min, max, propagate_nan="none", _semantic=None):  # noqa: A002 - Gluon's names
    """``x`` limited to ``[min, max]`` (undefined when ``min > max``); with
    ``propagate_nan=PropagateNan.ALL`` a NaN ``x`` stays NaN, by default it becomes ``min``."""
    sem = _semantic
    propagate_nan = unwrap(propagate_nan)
    types = [v.dtype if isinstance(v, tensor) else None for v in (x, min, max)]
    if any(t is not None and not (t.is_floating() or t.is_int()) for t in types):
        sem.error(f"clamp needs numbers, got {[str(t) for t in types if t is not None]}", TypeMismatchError)
    return sem.minmax("minimum", sem.minmax("maximum", x, min, propagate_nan), max, propagate_nan)


def _require(sem, x: tensor, allowed, who: str) -> None:
    if x.dtype not in allowed:
        sem.error(f"{who} expects {' or '.join(str(a) for a in allowed)} operands, got {x.dtype}",
                  TypeMismatchError)


@builtin
def umulhi(x, y, _semantic=None):
    """The high half of the double-width product of two 32- or 64-bit integers."""
    sem = _semantic
    x, y = sem.promote(x, y, "umulhi")
    if not x.dtype.is_int() or x.dtype.primitive_bitwidth not in (32, 64):
        sem.error(f"umulhi expects int32, int64, uint32 or uint64 operands, got {x.dtype}", TypeMismatchError)
    return sem.create1("binary", [x, y], x.type, {"fn": "umulhi"})


def _float_pair(sem, x, y, who: str, allowed):
    x, y = sem.promote(x, y, who)
    _require(sem, x, allowed, who)
    return x, y


@builtin
def fdiv(x, y, ieee_rounding=False, approx=False, _semantic=None):
    """Float division ``x / y``: by default as ``/`` (within 2 ulp on the GPU), IEEE
    round-to-nearest with ``ieee_rounding``, ``div.approx.f32`` with ``approx`` (float32)."""
    sem = _semantic
    ieee_rounding, approx = bool(unwrap(ieee_rounding)), bool(unwrap(approx))
    if ieee_rounding and approx:
        sem.error("fdiv: ieee_rounding=True and approx=True cannot be combined", ArgumentError)
    x, y = sem.promote(x, y, "fdiv")
    if not x.dtype.is_floating():
        sem.error(f"fdiv expects floating-point operands, got {x.dtype}", TypeMismatchError)
    if approx and x.dtype != float32:
        sem.error(f"fdiv(approx=True) needs float32 operands, got {x.dtype}", TypeMismatchError)
    fn = "div_rn" if ieee_rounding else "div_approx" if approx else "div"
    return sem.create1("binary", [x, y], x.type, {"fn": fn})


@builtin
def div_rn(x, y, _semantic=None):
    """IEEE round-to-nearest float32 division."""
    x, y = _float_pair(_semantic, x, y, "div_rn", (float32,))
    return _semantic.create1("binary", [x, y], x.type, {"fn": "div_rn"})


@tensor_member
@builtin
def sqrt_rn(x, _semantic=None):
    """IEEE round-to-nearest float32 square root."""
    sem = _semantic
    x = sem.to_tensor(x)
    _require(sem, x, (float32,), "sqrt_rn")
    return sem.create1("unary", [x], x.type, {"fn": "sqrt_rn"})


def _int_reduce(sem, input, axis, keep_dims, op: str, who: str):
    x = sem.require_tensor(input, f"{who} input", block=True)
    if not x.dtype.is_int():
        sem.error(f"{who} only supports integers, got {x.dtype}", TypeMismatchError)
    return sem.reduce(x, axis, lambda a, b: sem.bitwise(op, a, b), keep_dims)


@tensor_member
@builtin
def xor_sum(input, axis=None, keep_dims=False, _semantic=None):
    """Bitwise XOR of the elements along ``axis`` (all of them when None); integers only."""
    return _int_reduce(_semantic, input, axis, keep_dims, "xor", "xor_sum")


@tensor_member
@builtin
def reduce_or(input, axis, keep_dims=False, _semantic=None):
    """Bitwise OR of the elements along ``axis``; integers only."""
    return _int_reduce(_semantic, input, axis, keep_dims, "or", "reduce_or")


@tensor_member
@builtin
def ravel(x, can_reorder=False, _semantic=None):
    """``x`` as a 1-D tensor of its elements in row-major order."""
    x = _semantic.require_tensor(x, "ravel input", block=True)
    return _semantic.reshape(x, (x.type.numel,), bool(unwrap(can_reorder)))


@builtin
def broadcast(input, other, _semantic=None):
    """``input`` and ``other`` broadcast to their common shape (and layout)."""
    return tuple(_semantic.broadcast_all([_semantic.to_tensor(input), _semantic.to_tensor(other)]))


@builtin
def max_constancy(input, values, _semantic=None):
    """Promise that runs of ``values[d]`` (powers of two) elements along each dimension are
    equal.  Accepted for Gluon's API; gluonkit's vectorization does not use the fact yet,
    so ``input`` is returned unchanged."""
    sem = _semantic
    x = sem.require_tensor(input, "max_constancy input")
    values = unwrap(values)
    values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
    if len(values) != max(1, x.rank) or not all(is_power_of_two(v) for v in values):
        sem.error(f"max_constancy values must be {max(1, x.rank)} power(s) of two, got {list(values)}", ArgumentError)
    return x


@tensor_member
@builtin
def flip(x, dim=None, _semantic=None):
    """``x`` reversed along ``dim`` (default: the last dimension).  A ``gather`` with the
    reversed positions: the result has ``x``'s shape, its layout is inferred (``AutoLayout``)."""
    sem = _semantic
    x = sem.require_tensor(x, "flip input", block=True)
    rank = x.rank
    dim = rank - 1 if dim is None else sem.require_int(dim, "flip dim")
    if not -rank <= dim < rank:
        sem.error(f"flip: dim {dim} is out of range for rank {rank}", ArgumentError)
    dim %= rank
    n = x.shape[dim]
    index = sem.arith("sub", n - 1, sem.arange(0, n, AutoLayout()))
    for d in range(rank):
        if d != dim:
            index = sem.expand_dims(index, d)
    return gather(x, sem.broadcast_to(index, x.shape), dim, _semantic=sem)


@tensor_member
@builtin
def sigmoid(x, _semantic=None):
    """``1 / (1 + exp(-x))`` (float32/float64, as ``exp``)."""
    sem = _semantic
    return sem.arith("truediv", 1, sem.arith("add", 1, sem.unary("exp", sem.unary("neg", sem.to_tensor(x)))))
