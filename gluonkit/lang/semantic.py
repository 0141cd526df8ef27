"""The full semantic layer: shapes and layouts, creation, memory and reductions.

:class:`Semantic` is what builtins receive as ``_semantic``.  Layouts follow Gluon: ops
that move data between layouts (``convert_layout``) or pin one (``set_auto_layout``) take it
explicitly; ``expand_dims`` turns ``SliceLayout(axis, P)`` into ``P`` and reductions do the
reverse; ``reshape``/``permute``/``split``/``join`` results are ``AutoLayout`` here and get
the layout derived from their operand's during layout inference (the derivation lives in
:mod:`gluonkit.lower`, which the frontend may not import).
"""

from __future__ import annotations

from typing import List, Optional

from ..ir import Block
from ..ir.types import DType, PointerType, TensorType, int32, uint32, float32
from ..layouts.conversion import moves_between_ctas, plan_conversion
from ..layouts.distributed import AutoLayout, SliceLayout
from .callables import is_jit_function
from .errors import (
    ArgumentError, LayoutMismatchError, ShapeMismatchError, TypeMismatchError,
)
from .sem_elementwise import ElementwiseSemantic
from .sem_core import is_power_of_two
from .tensor import tensor

__all__ = ["Semantic"]

_LOAD_CACHE = ("", ".ca", ".cg", ".cv")
_STORE_CACHE = ("", ".wb", ".cg", ".cs", ".wt")
_EVICTION = ("", "evict_normal", "evict_first", "evict_last")


class Semantic(ElementwiseSemantic):
    """Everything builtins need to build IR (see the module docstrings)."""

    # ----------------------------------------------------------------- creation
    def program_id(self, op: str, axis) -> tensor:
        axis = self.require_int(axis, "axis")
        if axis not in (0, 1, 2):
            self.error(f"{op} axis must be 0, 1 or 2, got {axis}", ArgumentError)
        return self.create1(op, [], int32, {"axis": axis})

    def arange(self, start, end, layout) -> tensor:
        start, end = self.require_int(start, "arange start"), self.require_int(end, "arange end")
        n = end - start
        if not is_power_of_two(n):
            self.error(f"arange(start, end) needs end - start to be a positive power of two, "
                       f"got {end} - {start} = {n}", ShapeMismatchError)
        layout = self.check_layout(layout, (n,))
        return self.create1("arange", [], TensorType(int32, (n,), layout), {"start": start, "end": end})

    def full(self, shape, value, dtype, layout) -> tensor:
        shape = self.check_shape(shape)
        dtype = self.require_dtype(dtype)
        layout = self.check_layout(layout, shape)
        if isinstance(value, tensor):
            if value.is_block():
                self.error(f"full needs a scalar value, got a tensor of shape {list(value.shape)}",
                           TypeMismatchError)
            return self.splat(self.cast(value, dtype), shape, layout)
        self.check_literal(value, dtype)
        return self.constant(value, TensorType(dtype, shape, layout))

    # ---------------------------------------------------------- shapes, layouts
    def expand_dims(self, x, axis) -> tensor:
        x = self.to_tensor(x)
        axes = axis if isinstance(axis, (tuple, list)) else (axis,)
        rank = len(x.shape) + len(axes)
        axes = sorted(self._axis(a, rank) for a in axes)
        for a in axes:
            x = self._expand_one(x, a)
        return x

    def _axis(self, axis, rank: int) -> int:
        axis = self.require_int(axis, "axis")
        if not -rank <= axis < rank:
            self.error(f"axis {axis} is out of range for rank {rank}", ArgumentError)
        return axis % rank

    def _expand_one(self, x: tensor, axis: int) -> tensor:
        if not x.is_block():
            return self.splat(x, (1,), AutoLayout())
        layout = x.layout
        if isinstance(layout, AutoLayout):
            parent = layout
        elif isinstance(layout, SliceLayout) and layout.dim == axis:
            parent = layout.parent
        else:
            self.error(f"expand_dims at axis {axis} needs an operand in SliceLayout({axis}, parent) "
                       f"(or AutoLayout), got {layout!r}", LayoutMismatchError)
        shape = x.shape[:axis] + (1,) + x.shape[axis:]
        return self.create1("expand_dims", [x], TensorType(x.dtype, shape, parent), {"axis": axis})

    def subscript(self, x: tensor, index) -> tensor:
        """``x[None, :]``-style indexing: every ``None`` inserts a size-1 dimension."""
        index = index if isinstance(index, tuple) else (index,)
        full = slice(None, None, None)
        if any(i is not None and i != full for i in index) or sum(i == full for i in index) != len(x.shape):
            self.error(f"tensors support only indexing with None and ':' (one ':' per dimension, "
                       f"{len(x.shape)} here), got {list(index)!r}", ArgumentError)
        for pos, i in enumerate(index):
            if i is None:
                x = self._expand_one(x, pos)
        return x

    def reshape(self, x, shape, can_reorder: bool = False) -> tensor:
        x = self.require_tensor(x, "reshape operand", block=True)
        shape = self.check_shape(shape)
        if can_reorder:
            self.error("reshape(can_reorder=True) is not supported (as in Gluon)", ArgumentError)
        n = 1
        for s in shape:
            n *= s
        if n != x.type.numel:
            self.error(f"cannot reshape {list(x.shape)} ({x.type.numel} elements) to {list(shape)} ({n} elements)",
                       ShapeMismatchError)
        if not shape:  # as in Gluon, a one-element tensor reshaped to [] is a scalar
            return self.reduce(x, None, lambda first, _: first)
        return self.create1("reshape", [x], TensorType(x.dtype, shape, AutoLayout()), {"can_reorder": False})

    def permute(self, x, order) -> tensor:
        x = self.require_tensor(x, "permute operand", block=True)
        order = tuple(self.require_int(o, "permute dims") for o in order)
        if sorted(order) != list(range(x.rank)):
            self.error(f"permute dims must be a permutation of {list(range(x.rank))}, got {list(order)}",
                       ArgumentError)
        shape = tuple(x.shape[i] for i in order)
        return self.create1("permute", [x], TensorType(x.dtype, shape, AutoLayout()), {"order": order})

    def split(self, x):
        x = self.require_tensor(x, "split operand", block=True)
        if x.rank < 2 or x.shape[-1] != 2:
            self.error(f"split needs a tensor of rank >= 2 whose last dimension is 2, got shape {list(x.shape)}",
                       ShapeMismatchError)
        ty = TensorType(x.dtype, x.shape[:-1], AutoLayout())
        op = self.create("split", [x], [ty, ty])
        return tensor(op.results[0]), tensor(op.results[1])

    def join(self, a, b) -> tensor:
        a, b = self.to_tensor(a), self.to_tensor(b)
        if not (a.is_block() and b.is_block()):
            self.error("join needs two distributed tensors, got a scalar", ShapeMismatchError)
        if a.dtype != b.dtype:
            self.error(f"join needs operands of one type, got {a.dtype} and {b.dtype}", TypeMismatchError)
        a, b = self.broadcast_all([a, b])
        return self.create1("join", [a, b], TensorType(a.dtype, a.shape + (2,), AutoLayout()))

    def convert_layout(self, x, layout, assert_trivial: bool = False) -> tensor:
        """Change ``x``'s layout; with ``assert_trivial`` (Gluon's flag) the conversion must
        move no data between threads (the planner's identical / register permutation)."""
        x = self.require_tensor(x, "convert_layout operand", block=True)
        layout = self.check_layout(layout, x.shape)
        concrete = not isinstance(x.layout, AutoLayout) and not isinstance(layout, AutoLayout)
        if self.partition_warps is not None and concrete and moves_between_ctas(x.layout, layout, list(x.shape)):
            self.error(f"convert_layout inside a warp_specialize partition from {x.layout!r} to {layout!r} moves "
                       "values between the CTAs of the cluster (the cga_layouts differ), which takes cluster barriers "
                       "that the warps of the other partitions never reach; convert outside warp_specialize")
        if assert_trivial and concrete:
            plan = plan_conversion(x.layout, layout, list(x.shape))
            if plan.kind not in ("identical", "register_permutation"):
                self.error(f"convert_layout(assert_trivial=True) from {x.layout!r} to {layout!r} is not trivial: "
                           f"it needs a {plan.kind.replace('_', ' ')}; drop assert_trivial or choose layouts that "
                           "keep every element in its thread", LayoutMismatchError)
        return self.create1("convert_layout", [x], x.type.with_layout(layout))

    def set_auto_layout(self, x, layout) -> tensor:
        x = self.require_tensor(x, "set_auto_layout operand", block=True)
        if not isinstance(x.layout, AutoLayout):
            self.error(f"set_auto_layout needs an operand with AutoLayout, got {x.layout!r} "
                       "(use convert_layout to change a concrete layout)", LayoutMismatchError)
        layout = self.check_layout(layout, x.shape, allow_auto=False)
        return self.create1("set_auto_layout", [x], x.type.with_layout(layout))

    # ------------------------------------------------------------------ memory
    def _memory_operands(self, what, ptr, mask, cache, eviction, caches):
        ptr = self.require_pointer(ptr, what)
        if cache not in caches:
            self.error(f"{what} cache_modifier must be one of {caches}, got {cache!r}", ArgumentError)
        if eviction not in _EVICTION:
            self.error(f"{what} eviction_policy must be one of {_EVICTION}, got {eviction!r}", ArgumentError)
        mask = self.require_mask(mask, what)
        if mask is not None:
            mask = self._fit(mask, ptr, f"the mask of {what}")
        return ptr, mask

    def _fit(self, v: tensor, ptr: tensor, what: str) -> tensor:
        """``v`` broadcast to the pointer's shape (and layout)."""
        if not ptr.is_block():
            if v.is_block():
                self.error(f"{what} is a tensor of shape {list(v.shape)} but the pointer is a scalar",
                           ShapeMismatchError)
            return v
        if v.is_block() and len(v.shape) == len(ptr.shape) and all(
                a in (1, b) for a, b in zip(v.shape, ptr.shape)):
            v, _ = self.broadcast_all([v, ptr])
            return v
        if v.is_block():
            self.error(f"{what} of shape {list(v.shape)} does not broadcast to the pointer shape {list(ptr.shape)}",
                       ShapeMismatchError)
        return self.splat(v, ptr.shape, ptr.layout)

    def load(self, ptr, mask, other, cache_modifier, eviction_policy, volatile) -> tensor:
        ptr, mask = self._memory_operands("load", ptr, mask, cache_modifier, eviction_policy, _LOAD_CACHE)
        elem = ptr.dtype.element
        operands = [ptr] + ([mask] if mask is not None else [])
        if other is not None:
            if mask is None:
                self.error("load: `other` needs a `mask` (it fills the masked-off elements)", ArgumentError)
            other = self.cast(self.to_tensor(other, elem) if not isinstance(other, tensor) else other, elem)
            operands.append(self._fit(other, ptr, "the `other` of load"))
        attrs = {"cache_modifier": cache_modifier, "eviction_policy": eviction_policy,
                 "volatile": bool(volatile), "has_mask": mask is not None, "has_other": other is not None}
        return self.create1("load", operands, self.retype(ptr, elem), attrs)

    def store(self, ptr, value, mask, cache_modifier, eviction_policy) -> None:
        ptr, mask = self._memory_operands("store", ptr, mask, cache_modifier, eviction_policy, _STORE_CACHE)
        elem = ptr.dtype.element
        value = self.to_tensor(value, elem) if not isinstance(value, tensor) else value
        if isinstance(value.dtype, PointerType):
            self.error(f"store: cannot store pointers ({value.dtype}) through {ptr.dtype}", TypeMismatchError)
        value = self._fit(self.cast(value, elem), ptr, "the stored value")
        operands = [ptr, value] + ([mask] if mask is not None else [])
        self.create("store", operands, [], {"cache_modifier": cache_modifier, "eviction_policy": eviction_policy,
                                            "has_mask": mask is not None})

    def device_assert(self, cond, msg, mask) -> None:
        """``gl.device_assert``: an assert op at the current line when debugging is on
        (``cond | ~mask`` with a mask, as in Triton)."""
        msg = self.require_constexpr(msg, "the device_assert message")
        if not isinstance(msg, str):
            self.error(f"the device_assert message must be a string, got {msg!r}", TypeMismatchError)
        if not self.debug:
            return
        cond = self.to_bool(cond, "the device_assert condition")
        if mask is not None:
            cond = self.logical("or", cond, self.logical_not(self.to_bool(mask, "the device_assert mask")))
        loc = self.builder.loc
        self.create("device_assert", [cond], [], {"message": msg, "file": loc.file if loc else "",
                                                  "line": loc.line if loc else 0,
                                                  "function": loc.function if loc else ""})

    def hint(self, x, multiple_of=None, max_contiguous=None) -> tensor:
        x = self.require_tensor(x, "the hinted value")
        values = multiple_of if multiple_of is not None else max_contiguous
        values = tuple(values) if isinstance(values, (tuple, list)) else (values,)
        n = max(1, x.rank)
        if len(values) != n or not all(is_power_of_two(v) for v in values):
            self.error(f"hint values must be {n} power(s) of two (one per dimension), got {list(values)}",
                       ArgumentError)
        attrs = {"multiple_of": values if multiple_of is not None else None,
                 "max_contiguous": values if max_contiguous is not None else None}
        return self.create1("hint", [x], x.type, attrs)

    # -------------------------------------------------------------- reductions
    def reduce(self, xs, axis, combine, keep_dims: bool = False):
        """Reduce one tensor or a tuple of tensors along ``axis`` (all axes if None).

        ``combine`` is a ``@jit`` function taking ``2n`` scalars (all left operands, then all
        right operands) and returning ``n``, or a Python callable doing the same with this
        semantic (the built-in ``sum``/``max``/``min``).
        """
        single = not isinstance(xs, tuple)
        xs = [self.require_tensor(x, "reduce operand", block=True) for x in ((xs,) if single else xs)]
        shape = xs[0].shape
        for x in xs[1:]:
            if x.shape != shape:
                self.error(f"reduce operands must have one shape, got {list(shape)} and {list(x.shape)}",
                           ShapeMismatchError)
        xs = self.broadcast_all(xs)
        keep_dims = self.require_constexpr(keep_dims, "keep_dims")
        if axis is None:
            rank, layout = len(shape), xs[0].layout
            for _ in range(rank):
                xs = self._reduce_axis(xs, 0, combine)
            if keep_dims:
                xs = [self.splat(x, (1,) * rank, layout) for x in xs]
        else:
            axis = self._axis(axis, len(shape))
            parent_layout = xs[0].layout
            xs = self._reduce_axis(xs, axis, combine)
            if keep_dims:
                xs = [self._keep_dim(x, axis, parent_layout) for x in xs]
        return xs[0] if single else tuple(xs)

    def _keep_dim(self, x: tensor, axis: int, parent_layout) -> tensor:
        if not x.is_block():
            return self.splat(x, (1,), parent_layout)
        return self._expand_one(x, axis)

    def _reduce_axis(self, xs: List[tensor], axis: int, combine) -> List[tensor]:
        src = xs[0].type
        if self.partition_warps is not None and not isinstance(src.layout, AutoLayout) and any(
                b[axis] for b in src.layout.to_linear_layout(list(src.shape)).bases.get("block", [])):
            self.error(f"reduce along axis {axis} inside a warp_specialize partition: the operand's cga_layout splits "
                       "the axis between the CTAs of the cluster, and combining their partials takes cluster "
                       "barriers, which the warps of the other partitions never reach; reduce outside "
                       "warp_specialize")
        elems = [x.dtype for x in xs]
        region = Block(elems + elems)
        with self.builder.at_end_of(region):
            args = [tensor(a) for a in region.args]
            if is_jit_function(combine):
                out = self.call_jit(combine, args)
            else:
                out = combine(*args)
            out = out if isinstance(out, tuple) else (out,)
            if len(out) != len(xs):
                self.error(f"the combine function must return {len(xs)} value(s), got {len(out)}", ArgumentError)
            out = [self.to_tensor(v, e) for v, e in zip(out, elems)]
            for v, e in zip(out, elems):
                if v.is_block() or v.dtype != e:
                    self.error(f"the combine function must return scalars of type {e}, got {v.type}",
                               TypeMismatchError)
            self.create("yield", out, [])
        if src.rank == 1:
            result_types = elems
        else:
            layout = src.layout
            layout = layout if isinstance(layout, AutoLayout) else SliceLayout(axis, layout)
            shape = src.shape[:axis] + src.shape[axis + 1:]
            result_types = [TensorType(e, shape, layout) for e in elems]
        op = self.create("reduce", xs, result_types, {"axis": axis}, [region])
        return [tensor(r) for r in op.results]

    def sum(self, x, axis, keep_dims, dtype: Optional[DType]):
        """Triton's ``sum``: integers narrower than 32 bits accumulate in (u)int32."""
        x = self.require_tensor(x, "sum operand", block=True)
        if dtype is not None:
            x = self.cast(x, dtype)
        elif x.dtype.is_int() and x.dtype.primitive_bitwidth < 32:
            x = self.cast(x, uint32 if x.dtype.is_int_unsigned() else int32)
        return self.reduce(x, axis, lambda a, b: self.arith("add", a, b), keep_dims)

    def reduce_minmax(self, x, axis, keep_dims, fn: str):
        """Triton's ``max``/``min``: types narrower than 32 bits reduce in float32/int32."""
        x = self.require_tensor(x, f"{fn} operand", block=True)
        if x.dtype.primitive_bitwidth < 32:
            x = self.cast(x, float32 if x.dtype.is_floating() else int32)
        return self.reduce(x, axis, lambda a, b: self.minmax(fn, a, b), keep_dims)
