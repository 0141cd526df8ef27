"""TMA in kernels: the descriptor argument and Gluon's ``tma`` module.

``from gluonkit.lang.nvidia.hopper import tma`` gives what
``triton.experimental.gluon.language.nvidia.hopper.tma`` gives a Gluon kernel:

* :class:`tensor_descriptor`, the kernel-side view of a host
  :class:`gluonkit.nvidia.hopper.TensorDescriptor` argument: ``block_type`` (``shape``,
  ``nbytes``, ``numel``, ``element_ty``), ``block_shape``, ``dtype`` and ``layout`` are
  compile-time (the launch specializes on them), ``shape`` and ``strides`` are runtime
  int32 / int64 scalars (extra kernel parameters after the 128-byte tensor map, as in
  Triton);
* ``async_copy_global_to_shared(desc, coord, barrier, result, pred=True)``: start copying
  the block at element coordinates ``coord`` into ``result``; its bytes complete
  transactions on ``barrier`` (so ``mbarrier.expect(barrier, desc.block_type.nbytes)``
  then ``mbarrier.wait`` make it safe to read); out-of-bounds elements read as zero;
* ``async_copy_shared_to_global(desc, coord, src)``: start copying ``src`` to the block at
  ``coord`` (elements outside the tensor are dropped); generic writes to ``src`` need
  ``fence_async_shared()`` first;
* ``store_wait(pendings)``: wait until at most ``pendings`` of those copies still read
  shared memory, after which their buffers may be written again.
"""

from __future__ import annotations

from typing import Sequence, Tuple

from ...ir.types import BlockType, DType, SharedMemoryDescType, TensorDescType, int32
from ...sync.builtin import barrier_type, predicate
from ..errors import ArgumentError, LayoutMismatchError, ShapeMismatchError, TypeMismatchError
from ..tensor import builtin, shape_args, tensor

__all__ = ["tensor_descriptor", "block_type", "async_copy_global_to_shared", "async_copy_shared_to_global",
           "store_wait"]


block_type = BlockType  # Gluon's spelling of the descriptor's block type


class tensor_descriptor:  # noqa: N801 - Gluon's spelling
    """A TMA descriptor argument in a kernel: its IR value and its runtime shape and strides."""

    __slots__ = ("handle", "shape", "strides")

    def __init__(self, handle, shape: Sequence[tensor], strides: Sequence[tensor]):
        self.handle = handle
        self.shape = tuple(shape)
        self.strides = tuple(strides)

    @property
    def type(self) -> TensorDescType:
        return self.handle.type

    @property
    def block_type(self) -> block_type:
        return block_type(self.type.block_shape, self.type.element)

    @property
    def block_shape(self) -> Tuple[int, ...]:
        return self.type.block_shape

    @property
    def dtype(self) -> DType:
        return self.type.element

    @property
    def layout(self):
        return self.type.layout

    def __repr__(self) -> str:
        return f"tensor_descriptor({self.type})"


def _descriptor(sem, desc, what: str) -> TensorDescType:
    if not isinstance(desc, tensor_descriptor):
        sem.error(f"{what} must be a tensor descriptor (a TensorDescriptor kernel argument), got {desc!r}",
                  TypeMismatchError)
    return desc.type


def _shared(sem, desc: TensorDescType, smem, what: str):
    handle = getattr(smem, "handle", None)
    ty = getattr(handle, "type", None)
    if not isinstance(ty, SharedMemoryDescType):
        sem.error(f"{what} must be a shared memory descriptor, got {smem!r}", TypeMismatchError)
    if ty.element != desc.element or ty.shape != desc.block_shape:
        sem.error(f"{what} is {list(ty.shape)} x {ty.element} but the descriptor's block is "
                  f"{list(desc.block_shape)} x {desc.element}", ShapeMismatchError)
    if ty.shape != ty.alloc_shape:
        sem.error(f"{what} is a slice of a {list(ty.alloc_shape)} buffer; TMA copies whole tiles: index() the "
                  "stage instead of slicing", ShapeMismatchError)
    if ty.layout != desc.layout:
        sem.error(f"{what} has layout {ty.layout!r} but the descriptor's layout is {desc.layout!r}; allocate "
                  "the buffer with desc.layout", LayoutMismatchError)
    return handle


def _coordinates(sem, desc: TensorDescType, coord) -> list:
    coord = list(shape_args((coord,)))
    if len(coord) != desc.rank:
        sem.error(f"the coordinates {coord!r} must have one entry per dimension of the block "
                  f"{list(desc.block_shape)}", ArgumentError)
    out = []
    for c in coord:
        c = sem.to_tensor(c, int32) if not isinstance(c, tensor) else c
        if c.is_block() or not c.dtype.is_int() or c.dtype.is_bool():
            sem.error(f"each coordinate must be an integer scalar, got {c.type}", TypeMismatchError)
        out.append(sem.cast(c, int32))
    return out


@builtin
def async_copy_global_to_shared(tensor_desc, coord, barrier, result, pred=True, _semantic=None) -> None:
    """Start copying the block at ``coord`` into ``result``; it completes on ``barrier``."""
    sem = _semantic
    desc = _descriptor(sem, tensor_desc, "async_copy_global_to_shared's tensor_desc")
    smem = _shared(sem, desc, result, "async_copy_global_to_shared's result")
    bar = barrier_type(sem, barrier, "async_copy_global_to_shared's barrier")
    coords = _coordinates(sem, desc, coord)
    p = predicate(sem, pred)
    if p is not None:
        sem.create("async_tma_copy_global_to_shared", [tensor_desc.handle, smem, bar, p] + coords, [])


@builtin
def async_copy_shared_to_global(tensor_desc, coord, src, _semantic=None) -> None:
    """Start copying ``src`` to the block at ``coord``; ``store_wait`` retires it."""
    sem = _semantic
    desc = _descriptor(sem, tensor_desc, "async_copy_shared_to_global's tensor_desc")
    smem = _shared(sem, desc, src, "async_copy_shared_to_global's src")
    sem.create("async_tma_copy_shared_to_global", [tensor_desc.handle, smem] + _coordinates(sem, desc, coord), [])


@builtin
def store_wait(pendings, _semantic=None) -> None:
    """Wait until at most ``pendings`` (a compile-time int) shared-to-global copies are still reading."""
    n = _semantic.require_int(pendings, "store_wait's pendings")
    if n < 0:
        _semantic.error(f"store_wait's pendings must be non-negative, got {n}", ArgumentError)
    _semantic.create("async_tma_store_wait", [], [], {"pendings": n})
