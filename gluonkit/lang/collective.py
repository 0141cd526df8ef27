"""Gluon 3.9's scan, histogram, gather and map_elementwise builtins.

``associative_scan`` (with ``cumsum``/``cumprod``) and ``map_elementwise`` take a ``@jit``
function whose body becomes a region of the IR op: the frontend inlines it once on scalar
block arguments.  ``histogram`` and ``gather`` move elements between threads; their
result layouts follow Gluon (``histogram``'s is given, ``gather``'s is the index's).
Names, parameters and defaults are Gluon 3.9's.
"""

from __future__ import annotations

from typing import Sequence, Tuple

from ..ir import Block
from ..ir.types import TensorType, int32, uint32
from .callables import is_jit_function
from .constexpr import unwrap
from .errors import ArgumentError, ShapeMismatchError, TypeMismatchError
from .tensor import builtin, tensor, tensor_member

__all__ = ["associative_scan", "cumsum", "cumprod", "histogram", "gather", "map_elementwise"]


def _region(sem, arg_types: Sequence, fn, n_out, what: str) -> Tuple[Block, bool]:
    """A block with scalar arguments ``arg_types`` whose body is ``fn`` applied to them,
    ending in a ``yield`` of ``n_out`` scalars (``n_out`` None: as many as ``fn`` returns),
    and whether ``fn`` returned a tuple."""
    region = Block(list(arg_types))
    with sem.builder.at_end_of(region):
        args = [tensor(a) for a in region.args]
        out = sem.call_jit(fn, args) if is_jit_function(fn) else fn(*args)
        was_tuple = isinstance(out, tuple)
        out = out if was_tuple else (out,)
        if n_out is not None and len(out) != n_out:
            sem.error(f"the {what} must return {n_out} value(s), got {len(out)}", ArgumentError)
        out = [sem.to_tensor(v) for v in out]
        for v in out:
            if v.is_block():
                sem.error(f"the {what} must return scalars, got {v.type}", TypeMismatchError)
        sem.create("yield", out, [])
    return region, was_tuple


def _require_jit(sem, fn, who: str) -> None:
    if not is_jit_function(fn):
        sem.error(f"{who}'s function must be a @gluonkit.jit function, got {fn!r}", ArgumentError)


def _scan(sem, xs, axis, combine, reverse):
    single = not isinstance(xs, tuple)
    xs = [sem.require_tensor(x, "associative_scan input", block=True) for x in ((xs,) if single else xs)]
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            sem.error(f"associative_scan inputs must have one shape, got {list(xs[0].shape)} and {list(x.shape)}",
                      ShapeMismatchError)
    xs = sem.broadcast_all(xs)
    rank = xs[0].rank
    axis = sem.require_int(axis, "associative_scan axis")
    if not -rank <= axis < rank:
        sem.error(f"scan axis {axis} is out of range for rank {rank}", ArgumentError)
    reverse = bool(unwrap(sem.require_constexpr(reverse, "reverse")))
    elems = [x.dtype for x in xs]
    region, _ = _region(sem, elems + elems, combine, len(xs), "combine function")
    got = [a.type for a in region.terminator.operands]
    if got != elems:
        sem.error(f"the combine function must return scalars of types {[str(e) for e in elems]}, got "
                  f"{[str(g) for g in got]}", TypeMismatchError)
    op = sem.create("scan", xs, [x.type for x in xs], {"axis": axis % rank, "reverse": reverse}, [region])
    out = tuple(tensor(r) for r in op.results)
    return out[0] if single else out


@tensor_member
@builtin
def associative_scan(input, axis, combine_fn, reverse=False, _semantic=None):
    """Inclusive scan of ``input`` (a tensor or a tuple of tensors of one shape) along
    ``axis`` with the ``@jit`` function ``combine_fn`` (``2n`` scalars in, ``n`` out);
    ``reverse`` scans from the last element to the first.  Results keep the input layout."""
    _require_jit(_semantic, combine_fn, "associative_scan")
    return _scan(_semantic, input, axis, combine_fn, reverse)


def _scan_dtype(sem, x: tensor, dtype):
    """Triton's accumulation type: narrow signed ints → int32, narrow unsigned/bool → uint32."""
    if dtype is not None:
        return sem.require_dtype(dtype)
    if x.dtype.is_int() and x.dtype.primitive_bitwidth < 32:
        return int32 if x.dtype.is_int_signed() else uint32
    return x.dtype


def _arith_scan(sem, input, axis, reverse, dtype, op: str):
    x = sem.require_tensor(input, f"cum{op} input", block=True)
    x = sem.cast(x, _scan_dtype(sem, x, unwrap(dtype)))
    return _scan(sem, x, axis, lambda a, b: sem.arith(op, a, b), reverse)


@tensor_member
@builtin
def cumsum(input, axis=0, reverse=False, dtype=None, _semantic=None):
    """Running sum along ``axis`` (see :func:`associative_scan`); ``dtype`` (default: int32 or
    uint32 for narrower integers, else the input's) is the type summed in and returned."""
    return _arith_scan(_semantic, input, axis, reverse, dtype, "add")


@tensor_member
@builtin
def cumprod(input, axis=0, reverse=False, dtype=None, _semantic=None):
    """Running product along ``axis``; ``dtype`` as for :func:`cumsum`."""
    return _arith_scan(_semantic, input, axis, reverse, dtype, "mul")


@tensor_member
@builtin
def histogram(input, num_bins, mask=None, layout=None, _semantic=None):
    """Counts (int32, ``num_bins`` of them, in ``layout``) of the values ``0 … num_bins-1`` in
    the 1-D integer tensor ``input``, skipping elements where ``mask`` is false; values
    outside the bins are not counted."""
    sem = _semantic
    x = sem.require_tensor(input, "histogram input", block=True)
    if x.rank != 1:
        sem.error(f"histogram only supports 1-D input, got shape {list(x.shape)}", ShapeMismatchError)
    if not x.dtype.is_int() or x.dtype.is_bool():
        sem.error(f"histogram only supports integer input, got {x.dtype}", TypeMismatchError)
    num_bins = sem.require_int(num_bins, "histogram num_bins")
    if num_bins < 1 or num_bins & (num_bins - 1):
        sem.error(f"histogram num_bins must be a power of two (the result is a tensor), got {num_bins}",
                  ShapeMismatchError)
    if layout is None:
        sem.error("histogram requires a destination layout (layout=...)", ArgumentError)
    layout = sem.check_layout(layout, (num_bins,))
    operands = [x]
    if mask is not None:
        mask, x = sem.broadcast_all([sem.to_bool(mask, "histogram mask"), x])
        operands = [x, mask]
    return sem.create1("histogram", operands, TensorType(int32, (num_bins,), layout),
                       {"num_bins": num_bins, "has_mask": mask is not None})


@tensor_member
@builtin
def gather(src, index, axis, _semantic=None):
    """``result[i…] = src[i… with its axis coordinate replaced by index[i…]]``: the result has
    ``index``'s shape and layout and ``src``'s element type (an index outside ``src`` is
    undefined behaviour on the GPU and an error in the interpreter)."""
    sem = _semantic
    src = sem.require_tensor(src, "gather source", block=True)
    index = sem.require_tensor(index, "gather index", block=True)
    if not index.dtype.is_int() or index.dtype.is_bool():
        sem.error(f"gather index must hold integers, got {index.dtype}", TypeMismatchError)
    rank = src.rank
    if index.rank != rank:
        sem.error(f"gather source and index must have the same rank, got {rank} and {index.rank}",
                  ShapeMismatchError)
    axis = sem.require_int(axis, "gather axis")
    if not -rank <= axis < rank:
        sem.error(f"gather axis {axis} is out of range for rank {rank}", ArgumentError)
    axis %= rank
    for d in range(rank):
        if d != axis and index.shape[d] != src.shape[d]:
            sem.error(f"gather index shape {list(index.shape)} must match source shape {list(src.shape)} in "
                      f"every dimension but axis {axis}", ShapeMismatchError)
    ty = TensorType(src.dtype, index.shape, index.layout)
    return sem.create1("gather", [src, index], ty, {"axis": axis})


@builtin
def map_elementwise(scalar_fn, *args, pack=1, _semantic=None):
    """Apply the ``@jit`` function ``scalar_fn`` to every element of the (broadcast) tensors
    ``args``; it may branch per element.  With ``pack`` > 1 each call gets ``pack``
    consecutive elements of each input (input-major) and returns ``pack`` values per
    result.  Returns one tensor or a tuple, as ``scalar_fn`` returns one value or a tuple."""
    sem = _semantic
    _require_jit(sem, scalar_fn, "map_elementwise")
    pack = sem.require_int(pack, "map_elementwise pack")
    if pack < 1:
        sem.error(f"map_elementwise pack must be >= 1, got {pack}", ArgumentError)
    if not args:
        sem.error("map_elementwise needs at least one tensor argument", ArgumentError)
    xs = [sem.to_tensor(a) for a in args]
    if not any(x.is_block() for x in xs):
        sem.error("map_elementwise needs at least one distributed tensor argument", ShapeMismatchError)
    xs = sem.broadcast_all(xs)
    region, was_tuple = _region(sem, [x.dtype for x in xs for _ in range(pack)], scalar_fn, None,
                                "mapped function")
    returned = region.terminator.operands
    if len(returned) % pack:
        sem.error(f"the mapped function must return a multiple of pack={pack} values, got {len(returned)}",
                  ArgumentError)
    types = [v.type for v in returned]
    result_elems = types[::pack]
    for offset in range(1, pack):
        if types[offset::pack] != result_elems:
            sem.error("the mapped function's packed results must have one type per result", TypeMismatchError)
    shape, layout = xs[0].shape, xs[0].layout
    op = sem.create("map_elementwise", xs, [TensorType(e, shape, layout) for e in result_elems],
                    {"pack": pack}, [region])
    out = tuple(tensor(r) for r in op.results)
    return out if was_tuple else out[0]
