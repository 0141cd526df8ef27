"""Shared memory in kernels: ``gl.allocate_shared_memory`` and its descriptor.

A :class:`shared_memory_descriptor` names a view of a shared-memory buffer the kernel
allocated (Gluon's ``shared_memory_descriptor``): the programmer picks the shared layout,
and ``load(layout)`` / ``store(value)`` move a distributed tensor in or out of it, so a
store in one distributed layout and a load in another is a layout conversion the user
controls.  Views (``index``, ``slice``, ``permute``, ``reshape``, ``_reinterpret``) move no
data; their offsets come from :mod:`gluonkit.ir.memdesc`.

Descriptors are compile-time handles to runtime buffers: they may be passed to ``@jit``
functions and used inside loops, but not reassigned inside a runtime loop or branch (a
loop-carried descriptor is not supported yet; index the buffer inside the loop instead).
"""

from __future__ import annotations

from typing import Tuple

from ..ir.memdesc import alloc_elements, cta_shares, layout_problem, permuted_layout, reshaped_layout
from ..ir.types import SharedMemoryDescType, TensorType, int1, int32
from ..layouts.shared import SharedLinearLayout
from .errors import ArgumentError, LayoutMismatchError, ShapeMismatchError, TypeMismatchError
from .tensor import builtin, shape_args, tensor

__all__ = ["shared_memory_descriptor", "allocate_shared_memory"]


class shared_memory_descriptor:  # noqa: N801 - Gluon's spelling
    """A view of shared memory: an IR value of :class:`~gluonkit.ir.SharedMemoryDescType`."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    @property
    def type(self) -> SharedMemoryDescType:
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
        return f"shared_memory_descriptor({self.type})"

    @builtin
    def load(self, layout, _semantic=None) -> tensor:
        """The view's elements as a distributed tensor in ``layout`` (``AutoLayout`` lets
        layout inference choose)."""
        return local_load(_semantic, self, layout)

    @builtin
    def store(self, value, _semantic=None) -> None:
        """Write the distributed tensor ``value`` (any layout) into the view."""
        local_store(_semantic, self, value)

    @builtin
    def index(self, index, _semantic=None) -> "shared_memory_descriptor":
        """Tile ``index`` along the leading stage dimension (a runtime or constant int)."""
        return memdesc_index(_semantic, self, index)

    @builtin
    def slice(self, start, length, dim=0, _semantic=None) -> "shared_memory_descriptor":
        """Elements ``start … start+length-1`` along ``dim`` (compile-time ints)."""
        return memdesc_slice(_semantic, self, start, length, dim)

    @builtin
    def permute(self, order, _semantic=None) -> "shared_memory_descriptor":
        """The view with dimensions reordered: result dim ``i`` is dim ``order[i]``."""
        return memdesc_permute(_semantic, self, order)

    @builtin
    def reshape(self, shape, _semantic=None) -> "shared_memory_descriptor":
        """The whole buffer seen with another shape (row-major)."""
        return memdesc_reshape(_semantic, self, shape)

    @builtin
    def reinterpret(self, dtype=None, shape=None, layout=None, _semantic=None) -> "shared_memory_descriptor":
        """The same bytes as a buffer of ``dtype``, ``shape`` and ``layout`` (each defaults to
        this buffer's own), as Gluon 3.9's ``reinterpret``."""
        return memdesc_reinterpret(_semantic, self, self.dtype if dtype is None else dtype,
                                   self.shape if shape is None else shape, self.layout if layout is None else layout)

    @builtin
    def _reinterpret(self, dtype, shape, layout, _semantic=None) -> "shared_memory_descriptor":
        """Gluon 3.6's spelling of :meth:`reinterpret` (all three arguments required)."""
        return memdesc_reinterpret(_semantic, self, dtype, shape, layout)


@builtin
def allocate_shared_memory(element_ty, shape, layout, value=None, _semantic=None) -> shared_memory_descriptor:
    """A new shared-memory buffer of ``shape`` ``element_ty`` elements placed by ``layout``.

    Leading dimensions beyond the layout's rank are stages (``[STAGES, BM, BK]`` with a
    rank-2 layout); ``value``, a tensor of ``shape``, initializes the buffer.
    """
    sem = _semantic
    dtype = sem.require_dtype(element_ty, "allocate_shared_memory's element_ty")
    shape = tuple(sem.require_int(s, "each allocate_shared_memory shape entry") for s in shape_args((shape,)))
    sem.require_constexpr(layout, "allocate_shared_memory's layout")
    if dtype == int1:
        sem.error("int1 cannot live in shared memory; allocate int8 and store x.to(gl.int8)", TypeMismatchError)
    problem = layout_problem(layout, shape)
    if problem:
        sem.error(f"allocate_shared_memory({dtype}, {list(shape)}, {layout!r}): {problem}", LayoutMismatchError)
    ty = SharedMemoryDescType(dtype, shape, layout, shape)
    operands = []
    if value is not None:
        operands.append(_value_for(sem, value, ty, "the initial value of allocate_shared_memory"))
    return shared_memory_descriptor(sem.create("local_alloc", operands, [ty]).result)


def _value_for(sem, value, ty: SharedMemoryDescType, what: str) -> tensor:
    value = sem.require_tensor(value, what, block=True)
    if value.shape != ty.shape:
        sem.error(f"{what} has shape {list(value.shape)} but the shared memory view has shape {list(ty.shape)}",
                  ShapeMismatchError)
    if value.dtype != ty.element:
        sem.error(f"{what} has type {value.dtype} but the shared memory holds {ty.element}; convert it with "
                  f".to(gl.{ty.element})", TypeMismatchError)
    return value


def _require_desc(sem, desc, what: str) -> SharedMemoryDescType:
    if not isinstance(desc, shared_memory_descriptor):
        sem.error(f"{what} must be a shared memory descriptor, got {desc!r}", TypeMismatchError)
    return desc.type


def _view(sem, name: str, desc, result: SharedMemoryDescType, operands=(), attrs=None) -> shared_memory_descriptor:
    op = sem.create(name, [desc.handle] + list(operands), [result], attrs)
    return shared_memory_descriptor(op.result)


# ------------------------------------------------------------------- loads, stores
def local_load(sem, desc, layout) -> tensor:
    ty = _require_desc(sem, desc, "load's descriptor")
    if any(s & (s - 1) for s in ty.shape):
        sem.error(f"cannot load a view of shape {list(ty.shape)} into a tensor: tensor dimensions are powers of "
                  "two; index() or slice() the view first", ShapeMismatchError)
    layout = sem.check_layout(layout, ty.shape, "the layout of load")
    return sem.create1("local_load", [desc.handle], TensorType(ty.element, ty.shape, layout))


def local_store(sem, desc, value) -> None:
    ty = _require_desc(sem, desc, "store's descriptor")
    value = _value_for(sem, value, ty, "the stored value")
    sem.create("local_store", [desc.handle, value], [])


# -------------------------------------------------------------------------- views
def memdesc_index(sem, desc, index) -> shared_memory_descriptor:
    ty = _require_desc(sem, desc, "index's descriptor")
    if ty.num_stage_dims < 1:
        sem.error(f"index() selects a tile along a leading stage dimension, but the layout {ty.layout!r} covers "
                  f"every dimension of {list(ty.shape)}; allocate [stages, ...] to get one, or use slice()",
                  ShapeMismatchError)
    if not isinstance(index, tensor):
        index = sem.require_int(index, "the index")
        if not 0 <= index < ty.shape[0]:
            sem.error(f"index {index} is out of range for {ty.shape[0]} stages", ArgumentError)
    index = sem.to_tensor(index, int32)
    if index.is_block() or not index.dtype.is_int() or index.dtype.is_bool():
        sem.error(f"the index must be an integer scalar, got {index.type}", TypeMismatchError)
    index = sem.cast(index, int32)
    result = SharedMemoryDescType(ty.element, ty.shape[1:], ty.layout, ty.alloc_shape[1:])
    return _view(sem, "memdesc_index", desc, result, [index])


def memdesc_slice(sem, desc, start, length, dim) -> shared_memory_descriptor:
    ty = _require_desc(sem, desc, "slice's descriptor")
    start, length, dim = (sem.require_int(v, f"slice {n}") for v, n in ((start, "start"), (length, "length"), (dim, "dim")))
    dim = dim % ty.rank if -ty.rank <= dim < ty.rank else dim
    if not ty.num_stage_dims <= dim < ty.rank:
        sem.error(f"slice dim {dim} is not a tile dimension of {list(ty.shape)} (tile dimensions are "
                  f"{ty.num_stage_dims} … {ty.rank - 1}); use index() on stage dimensions", ArgumentError)
    if length <= 0 or length & (length - 1) or start < 0 or start % length or start + length > ty.shape[dim]:
        sem.error(f"slice(start={start}, length={length}, dim={dim}) of shape {list(ty.shape)}: length must be a "
                  "power of two, start a multiple of it, and start + length at most the dimension's size",
                  ArgumentError)
    shape = ty.shape[:dim] + (length,) + ty.shape[dim + 1:]
    result = SharedMemoryDescType(ty.element, shape, ty.layout, ty.alloc_shape)
    return _view(sem, "memdesc_slice", desc, result, attrs={"start": start, "length": length, "dim": dim})


def memdesc_permute(sem, desc, order) -> shared_memory_descriptor:
    ty = _require_desc(sem, desc, "permute's descriptor")
    order = tuple(sem.require_int(o, "permute order") for o in shape_args((order,)))
    if sorted(order) != list(range(ty.rank)):
        sem.error(f"permute order must be a permutation of {list(range(ty.rank))}, got {list(order)}", ArgumentError)
    if ty.num_stage_dims:
        sem.error(f"cannot permute {list(ty.shape)}: its leading dimension(s) are stages; index() them first",
                  ShapeMismatchError)
    layout = permuted_layout(ty, order)
    if cta_shares(ty) > 1 and isinstance(layout, SharedLinearLayout):
        _split_view_error(sem, ty, "permute")
    result = SharedMemoryDescType(ty.element, tuple(ty.shape[o] for o in order), layout,
                                  tuple(ty.alloc_shape[o] for o in order))
    return _view(sem, "memdesc_permute", desc, result, attrs={"order": order})


def memdesc_reshape(sem, desc, shape) -> shared_memory_descriptor:
    ty = _require_desc(sem, desc, "reshape's descriptor")
    shape = sem.check_shape(shape_args((shape,)), "reshape shape")
    n = 1
    for s in shape:
        n *= s
    if ty.shape != ty.alloc_shape or any(s & (s - 1) for s in ty.shape):
        sem.error(f"reshape needs a whole buffer with power-of-two dimensions, got the view {list(ty.shape)} of "
                  f"{list(ty.alloc_shape)}", ShapeMismatchError)
    if n != ty.numel:
        sem.error(f"cannot reshape {list(ty.shape)} ({ty.numel} elements) to {list(shape)} ({n} elements)",
                  ShapeMismatchError)
    if cta_shares(ty) > 1:
        _split_view_error(sem, ty, "reshape")
    result = SharedMemoryDescType(ty.element, shape, reshaped_layout(ty, shape), shape)
    return _view(sem, "memdesc_reshape", desc, result)


def _split_view_error(sem, ty, what: str) -> None:
    sem.error(f"{what} of {list(ty.shape)} in {ty.layout!r}: the buffer is split between the CTAs of a cluster "
              "(cga_layout), and views of split buffers other than an NVMMA transpose are not supported yet; "
              f"{what} each CTA's share of an unsplit buffer instead", LayoutMismatchError)


def memdesc_reinterpret(sem, desc, dtype, shape, layout) -> shared_memory_descriptor:
    ty = _require_desc(sem, desc, "_reinterpret's descriptor")
    dtype = sem.require_dtype(dtype)
    shape = tuple(sem.require_int(s, "each _reinterpret shape entry") for s in shape_args((shape,)))
    sem.require_constexpr(layout, "_reinterpret's layout")
    if ty.shape != ty.alloc_shape:
        sem.error(f"_reinterpret needs a whole buffer, got the sliced view {list(ty.shape)} of {list(ty.alloc_shape)}",
                  ShapeMismatchError)
    problem = layout_problem(layout, shape)
    if problem:
        sem.error(f"_reinterpret({dtype}, {list(shape)}, {layout!r}): {problem}", LayoutMismatchError)
    result = SharedMemoryDescType(dtype, shape, layout, shape)
    have, need = alloc_elements(ty) * ty.element.itemsize, alloc_elements(result) * dtype.itemsize
    if need > have:
        sem.error(f"_reinterpret as {list(shape)} {dtype} needs {need} bytes but the buffer has {have}",
                  ShapeMismatchError)
    return _view(sem, "memdesc_reinterpret", desc, result)
