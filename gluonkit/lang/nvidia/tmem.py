"""Blackwell tensor memory in kernels: ``allocate_tensor_memory`` and its descriptor.

A :class:`tensor_memory_descriptor` names a view of a TMEM buffer (Gluon's
``tensor_memory_descriptor``): the programmer picks the ``TensorMemoryLayout``, and
``load(layout)`` / ``store(value)`` move a distributed tensor in or out with ``tcgen05.ld`` /
``tcgen05.st``; the register layout must be one those instructions can produce
(``desc.get_reg_layout()``; warp ``w`` only reaches TMEM lanes ``32*(w%4) … +31``).  Views
(``index``, ``slice``, ``reinterpret``) move no data; their addresses come from
:mod:`gluonkit.ir.tmem`, which also plans the kernel's columns (at most 512, an error at
compile time otherwise — Gluon does not check this).
"""

from __future__ import annotations

from typing import Tuple

from ...ir.tmem import layout_problem, slice_offset
from ...ir.types import TensorMemoryDescType, TensorType, int1, int32
from ...layouts.distributed import AutoLayout, SliceLayout
from ..builtins import PropagateNan
from ..errors import ArgumentError, LayoutMismatchError, ShapeMismatchError, TypeMismatchError
from ..tensor import builtin, shape_args, tensor

__all__ = ["tensor_memory_descriptor", "tensor_memory_descriptor_type", "allocate_tensor_memory"]

tensor_memory_descriptor_type = TensorMemoryDescType


class tensor_memory_descriptor:  # noqa: N801 - Gluon's spelling
    """A view of tensor memory: an IR value of :class:`~gluonkit.ir.TensorMemoryDescType`."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    @property
    def type(self) -> TensorMemoryDescType:
        return self.handle.type

    @property
    def dtype(self):
        return self.type.element

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.type.shape

    @property
    def layout(self):
        return self.type.layout

    @property
    def rank(self) -> int:
        return self.type.rank

    def __repr__(self) -> str:
        return f"tensor_memory_descriptor({self.type})"

    @builtin
    def get_reg_layout(self, num_warps=None, instr_variant="32x32b", _semantic=None, _generator=None):
        """The register layout ``tcgen05.ld``/``st`` of ``instr_variant`` gives this view with ``num_warps``
        warps (default: the code's warps)."""
        return reg_layout(_semantic, self, num_warps, instr_variant)

    @builtin
    def load(self, layout=None, _semantic=None, _generator=None) -> tensor:
        """The view as a distributed tensor in ``layout`` (default: :meth:`get_reg_layout`)."""
        return tmem_load(_semantic, self, layout)[0]

    @builtin
    def load_min(self, layout=None, abs=False, propagate_nan=PropagateNan.NONE, _semantic=None,  # noqa: A002
                 _generator=None):
        """``(x, min of each row of x)``: the load and its minimum along dim 1 (of ``|x|`` when ``abs``)."""
        return tmem_load(_semantic, self, layout, "min", abs, propagate_nan)

    @builtin
    def load_max(self, layout=None, abs=False, propagate_nan=PropagateNan.NONE, _semantic=None,  # noqa: A002
                 _generator=None):
        """``(x, max of each row of x)``: the load and its maximum along dim 1 (of ``|x|`` when ``abs``)."""
        return tmem_load(_semantic, self, layout, "max", abs, propagate_nan)

    @builtin
    def store(self, value, pred=True, _semantic=None) -> None:
        """Write the distributed tensor ``value`` (shape and dtype of the view); skipped when ``pred`` is false."""
        tmem_store(_semantic, self, value, pred)

    @builtin
    def slice(self, start, length, dim=1, _semantic=None) -> "tensor_memory_descriptor":
        """Elements ``start … start+length-1`` along ``dim`` (compile-time ints; default the N dimension)."""
        return tmem_slice(_semantic, self, start, length, dim)

    @builtin
    def index(self, index, _semantic=None) -> "tensor_memory_descriptor":
        """Tile ``index`` along the leading stage dimension (a runtime or constant int)."""
        return tmem_index(_semantic, self, index)

    @builtin
    def reinterpret(self, dtype=None, shape=None, layout=None, _semantic=None) -> "tensor_memory_descriptor":
        """The same columns as a buffer of ``dtype``, ``shape`` and ``layout`` (each defaults to this view's)."""
        return tmem_reinterpret(_semantic, self, self.dtype if dtype is None else dtype,
                                self.shape if shape is None else shape, self.layout if layout is None else layout)

    @builtin
    def _reinterpret(self, dtype, shape, layout, _semantic=None) -> "tensor_memory_descriptor":
        """Gluon 3.6's spelling of :meth:`reinterpret` (all three arguments required)."""
        return tmem_reinterpret(_semantic, self, dtype, shape, layout)


@builtin
def allocate_tensor_memory(element_ty, shape, layout, value=None, _semantic=None) -> tensor_memory_descriptor:
    """A new TMEM buffer of ``shape`` ``element_ty`` elements placed by ``layout`` (a ``TensorMemoryLayout``).

    Leading dimensions beyond the last two are stages (``[2, BM, BN]`` double-buffers an
    accumulator); ``value``, a tensor of ``shape`` in a TMEM register layout, initializes it.
    """
    sem = _semantic
    dtype = sem.require_dtype(element_ty, "allocate_tensor_memory's element_ty")
    shape = tuple(sem.require_int(s, "each allocate_tensor_memory shape entry") for s in shape_args((shape,)))
    sem.require_constexpr(layout, "allocate_tensor_memory's layout")
    _check_layout(sem, "allocate_tensor_memory", dtype, shape, layout)
    if getattr(layout, "two_ctas", False) and 1 << len(layout.cga_layout) != sem.num_ctas:
        sem.error(f"allocate_tensor_memory: a two_ctas layout holds the accumulator of CTA pairs, one cga_layout "
                  f"basis per CTA-rank bit ({len(layout.cga_layout)} bases: {1 << len(layout.cga_layout)} CTAs); "
                  f"launch the kernel with num_ctas={1 << len(layout.cga_layout)} (it runs with {sem.num_ctas})",
                  LayoutMismatchError)
    ty = TensorMemoryDescType(dtype, shape, layout, shape)
    operands = []
    if value is not None:
        operands.append(_stored_value(sem, ty, value, "the initial value of allocate_tensor_memory"))
    return tensor_memory_descriptor(sem.create("tmem_alloc", operands, [ty]).result)


def _check_layout(sem, what: str, dtype, shape, layout) -> None:
    if dtype == int1:
        sem.error(f"{what}: int1 cannot live in tensor memory; use int8 (x.to(gl.int8))", TypeMismatchError)
    problem = layout_problem(layout, shape, dtype)
    if problem:
        sem.error(f"{what}({dtype}, {list(shape)}, {layout!r}): {problem}", LayoutMismatchError)


def _value_for(sem, value, ty: TensorMemoryDescType, what: str) -> tensor:
    value = sem.require_tensor(value, what, block=True)
    if value.shape != ty.shape:
        sem.error(f"{what} has shape {list(value.shape)} but the tensor memory view has shape {list(ty.shape)}",
                  ShapeMismatchError)
    if value.dtype != ty.element:
        sem.error(f"{what} has type {value.dtype} but the tensor memory holds {ty.element}; convert it with "
                  f".to(gl.{ty.element})", TypeMismatchError)
    return value


def _stored_value(sem, ty: TensorMemoryDescType, value, what: str) -> tensor:
    """``value`` checked to be storable into ``ty`` by tcgen05.st (shape, dtype, register layout)."""
    value = _value_for(sem, value, ty, what)
    if isinstance(value.type.layout, AutoLayout):
        sem.error(f"{what} needs a concrete layout: convert it to desc.get_reg_layout() first", LayoutMismatchError)
    _check_access(sem, ty, value.type.layout, f"the layout of {what}")
    return value


def _require_desc(sem, desc, what: str) -> TensorMemoryDescType:
    if not isinstance(desc, tensor_memory_descriptor):
        sem.error(f"{what} must be a tensor memory descriptor, got {desc!r}", TypeMismatchError)
    return desc.type


def _check_access(sem, ty: TensorMemoryDescType, layout, what: str) -> None:
    """``layout`` must be a register layout tcgen05.ld/st can move ``ty`` with (the lane-quarter rule)."""
    from ...ir.tmem import access_map

    if len(ty.shape) != 2:
        sem.error(f"tensor memory loads and stores need a 2-D view, got {list(ty.shape)}; index() the stage "
                  "dimensions first", ShapeMismatchError)
    _, problem = access_map(ty, layout.to_linear_layout(list(ty.shape)))
    if problem:
        sem.error(f"{what} {layout!r}: {problem}", LayoutMismatchError)


def reg_layout(sem, desc, num_warps, instr_variant):
    ty = _require_desc(sem, desc, "get_reg_layout's descriptor")
    num_warps = sem.num_warps if num_warps is None else sem.require_int(num_warps, "num_warps")
    instr_variant = sem.require_constexpr(instr_variant, "instr_variant")
    if len(ty.shape) != 2:
        sem.error(f"get_reg_layout needs a 2-D view, got {list(ty.shape)}; index() the stage dimensions first",
                  ShapeMismatchError)
    try:
        return ty.get_reg_layout(num_warps, instr_variant)
    except ValueError as e:
        sem.error(str(e), LayoutMismatchError)


# ------------------------------------------------------------------- loads, stores
def tmem_load(sem, desc, layout, red: str = "none", abs=False, propagate_nan="none"):  # noqa: A002
    """``[x]``, or ``[x, reduction]`` when ``red`` is ``"min"``/``"max"``."""
    ty = _require_desc(sem, desc, "load's descriptor")
    layout = reg_layout(sem, desc, None, "32x32b") if layout is None else layout
    layout = sem.check_layout(layout, ty.shape, "the layout of load", allow_auto=False)
    _check_access(sem, ty, layout, "the layout of load")
    result = TensorType(ty.element, ty.shape, layout)
    results = [result]
    attrs = {"red": red, "abs": False, "propagate_nan": "none"}
    if red != "none":
        abs = sem.require_constexpr(abs, "abs")
        propagate_nan = sem.require_constexpr(propagate_nan, "propagate_nan")
        if not isinstance(abs, bool):
            sem.error(f"abs must be a bool, got {abs!r}", TypeMismatchError)
        if propagate_nan not in ("none", "all"):
            sem.error(f"propagate_nan must be gl.PropagateNan.NONE or .ALL, got {propagate_nan!r}", ArgumentError)
        if not ty.element.is_floating() or ty.element.primitive_bitwidth != 32:
            sem.error(f"load_{red} reduces float32 tensor memory, got {ty.element}", TypeMismatchError)
        attrs = {"red": red, "abs": abs, "propagate_nan": propagate_nan}
        results.append(TensorType(ty.element, ty.shape[:1], SliceLayout(1, layout)))
    op = sem.create("tmem_load", [desc.handle], results, attrs)
    return tuple(tensor(r) for r in op.results)


def tmem_store(sem, desc, value, pred) -> None:
    ty = _require_desc(sem, desc, "store's descriptor")
    value = _stored_value(sem, ty, value, "the stored value")
    pred = sem.to_bool(sem.to_tensor(pred), "store's pred")
    if pred.is_block():
        sem.error(f"store's pred must be a scalar, got {pred.type}", TypeMismatchError)
    sem.create("tmem_store", [desc.handle, value, pred], [])


# -------------------------------------------------------------------------- views
def _view(sem, name: str, desc, result: TensorMemoryDescType, operands=(), attrs=None) -> tensor_memory_descriptor:
    op = sem.create(name, [desc.handle] + list(operands), [result], attrs)
    return tensor_memory_descriptor(op.result)


def tmem_index(sem, desc, index) -> tensor_memory_descriptor:
    ty = _require_desc(sem, desc, "index's descriptor")
    if ty.num_stage_dims < 1:
        sem.error(f"index() selects a tile along a leading stage dimension, but {list(ty.shape)} has none; "
                  "allocate [stages, M, N] to get one, or use slice()", ShapeMismatchError)
    if not isinstance(index, tensor):
        index = sem.require_int(index, "the index")
        if not 0 <= index < ty.shape[0]:
            sem.error(f"index {index} is out of range for {ty.shape[0]} stages", ArgumentError)
    index = sem.to_tensor(index, int32)
    if index.is_block() or not index.dtype.is_int() or index.dtype.is_bool():
        sem.error(f"the index must be an integer scalar, got {index.type}", TypeMismatchError)
    index = sem.cast(index, int32)
    result = TensorMemoryDescType(ty.element, ty.shape[1:], ty.layout, ty.alloc_shape[1:])
    return _view(sem, "tmem_index", desc, result, [index])


def tmem_slice(sem, desc, start, length, dim) -> tensor_memory_descriptor:
    ty = _require_desc(sem, desc, "slice's descriptor")
    start, length, dim = (sem.require_int(v, f"slice {n}") for v, n in ((start, "start"), (length, "length"), (dim, "dim")))
    dim = dim % ty.rank if -ty.rank <= dim < ty.rank else dim
    if not ty.num_stage_dims <= dim < ty.rank:
        sem.error(f"slice dim {dim} is not a tile dimension of {list(ty.shape)}; use index() on stage dimensions",
                  ArgumentError)
    if length <= 0 or length & (length - 1) or start < 0 or start % length or start + length > ty.shape[dim]:
        sem.error(f"slice(start={start}, length={length}, dim={dim}) of shape {list(ty.shape)}: length must be a "
                  "power of two, start a multiple of it, and start + length at most the dimension's size",
                  ArgumentError)
    try:
        slice_offset(ty, dim, start)
    except ValueError as e:
        sem.error(f"slice(start={start}, length={length}, dim={dim}): {e}", ArgumentError)
    shape = ty.shape[:dim] + (length,) + ty.shape[dim + 1:]
    result = TensorMemoryDescType(ty.element, shape, ty.layout, ty.alloc_shape)
    return _view(sem, "tmem_slice", desc, result, attrs={"start": start, "length": length, "dim": dim})


def tmem_reinterpret(sem, desc, dtype, shape, layout) -> tensor_memory_descriptor:
    from ...ir.tmem import alloc_columns

    ty = _require_desc(sem, desc, "reinterpret's descriptor")
    dtype = sem.require_dtype(dtype)
    shape = tuple(sem.require_int(s, "each reinterpret shape entry") for s in shape_args((shape,)))
    sem.require_constexpr(layout, "reinterpret's layout")
    _check_layout(sem, "reinterpret", dtype, shape, layout)
    result = TensorMemoryDescType(dtype, shape, layout, shape)
    have, need = alloc_columns(TensorMemoryDescType(ty.element, ty.shape, ty.layout, ty.shape)), alloc_columns(result)
    if need > have:
        sem.error(f"reinterpret as {list(shape)} {dtype} needs {need} TMEM columns but the view has {have}",
                  ShapeMismatchError)
    return _view(sem, "tmem_reinterpret", desc, result)
