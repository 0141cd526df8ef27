"""TMA in kernels: the descriptor argument and Gluon's ``tma`` module.

``from gluonkit.lang.nvidia.hopper import tma`` gives what
``triton.experimental.gluon.language.nvidia.hopper.tma`` gives a Gluon kernel:

* :class:`tensor_descriptor`, the kernel-side view of a host
  :class:`gluonkit.nvidia.hopper.TensorDescriptor` argument: ``block_type`` (``shape``,
  ``nbytes``, ``numel``, ``element_ty``), ``block_shape``, ``dtype``, ``layout``,
  ``nbytes_per_cta`` and ``type`` (with the same ``block_type`` and ``layout``) are
  compile-time (the launch specializes on them), ``shape`` and ``strides`` are runtime
  int32 / int64 scalars (extra kernel parameters after the 128-byte tensor map, as in
  Triton);
* ``async_load(desc, coord, barrier, result, pred=True, multicast=False, cache_policy=None)``:
  start copying the block at element coordinates ``coord`` into ``result``; its bytes
  complete transactions on ``barrier`` (so ``mbarrier.expect(barrier, desc.block_type.nbytes)``
  then ``mbarrier.wait`` make it safe to read); out-of-bounds elements read as zero;
* ``async_store(desc, coord, src, cache_policy=None)``: start copying ``src`` to the block
  at ``coord`` (elements outside the tensor are dropped); generic writes to ``src`` need
  ``fence_async_shared()`` first;
* ``store_wait(pendings, read_only=True)``: wait until at most ``pendings`` of those copies
  are still reading shared memory, after which their buffers may be written again
  (``cp.async.bulk.wait_group.read``); with ``read_only=False`` until at most ``pendings``
  are incomplete, their writes included (``cp.async.bulk.wait_group``), which a kernel
  needs before it tells another CTA or device that the data is in global memory.

* :class:`tensor_descriptor_im2col`, the kernel-side view of a host
  :class:`gluonkit.nvidia.hopper.TensorDescriptorIm2Col` (the same attributes; ``shape``
  and ``strides`` have one entry per dimension of the N(D)HWC tensor, the block is
  ``[pixels, channels]``);
* ``async_load_im2col(desc, coord, offsets, barrier, result, pred=True, multicast=False,
  cache_policy=None)``: gather ``block_shape[0]`` pixels starting at filter position
  ``coord`` (``[n, (d,) h, w, c]``) shifted by the filter tap ``offsets`` (``[(d,) h, w]``,
  unsigned 16-bit: compile-time ints or integer scalars) into ``result``, completing on
  ``barrier`` like ``async_load`` (see :mod:`gluonkit.nvidia.im2col` for which pixels).

The Triton 3.6 names ``async_copy_global_to_shared`` / ``async_copy_shared_to_global`` /
``async_copy_global_to_shared_im2col`` are errors that name their replacements, as in
Gluon 3.9.  ``multicast=True`` on a tiled ``async_load`` in a cluster kernel copies the
block into the buffer (and completes the bytes on the barrier) of every CTA that holds the
same share: all of them for a block every CTA holds whole (CTA rank 0 issues it with
``.multicast::cluster``, ``docs/clusters.rst``), the CTAs whose ranks differ only in the bits
the descriptor's ``cga_layout`` replicates for a split block (clusters of CTA pairs,
``docs/blackwell_2cta.rst``); ``multicast`` on im2col loads and a ``cache_policy`` are not
supported yet;
the reduction copies are stubs (:mod:`gluonkit.lang.unsupported`); Blackwell's gather and scatter are
:mod:`.tma_gather`'s (in ``blackwell.tma`` only, as in Gluon).
"""

from __future__ import annotations

from typing import Sequence, Tuple

from ...ir.types import BlockType, DType, SharedMemoryDescType, TensorDescIm2ColType, TensorDescType, int16, int32
from ...sync.builtin import barrier_type, predicate
from ..errors import ArgumentError, LayoutMismatchError, ShapeMismatchError, TypeMismatchError
from ..tensor import builtin, shape_args, tensor
from ..unsupported import TMA, UnsupportedFeatureError, install, refuse_parameter, removed

__all__ = ["tensor_descriptor", "tensor_descriptor_type", "tensor_descriptor_im2col", "tensor_descriptor_im2col_type",
           "block_type", "async_load", "async_load_im2col", "async_store", "store_wait",
           "async_copy_global_to_shared", "async_copy_shared_to_global", "async_copy_global_to_shared_im2col"]


block_type = BlockType  # Gluon's spelling of the descriptor's block type
tensor_descriptor_type = TensorDescType  # the type of a tensor_descriptor (its IR type)
tensor_descriptor_im2col_type = TensorDescIm2ColType  # the type of a tensor_descriptor_im2col


class _descriptor_value:  # noqa: N801
    """What both descriptor arguments are in a kernel: an IR value plus runtime shape and strides."""

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
        return self.type.block_type

    @property
    def nbytes_per_cta(self) -> int:
        return self.type.nbytes_per_cta

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
        return f"{type(self).__name__}({self.type})"


class tensor_descriptor(_descriptor_value):  # noqa: N801 - Gluon's spelling
    """A tiled TMA descriptor argument (a host ``TensorDescriptor``) in a kernel."""

    __slots__ = ()


class tensor_descriptor_im2col(_descriptor_value):  # noqa: N801 - Gluon's spelling
    """An im2col TMA descriptor argument (a host ``TensorDescriptorIm2Col``) in a kernel."""

    __slots__ = ()


def descriptor_value(handle, shape: Sequence[tensor], strides: Sequence[tensor]) -> _descriptor_value:
    """The kernel value of a descriptor parameter, by the class of its IR type."""
    cls = tensor_descriptor_im2col if isinstance(handle.type, TensorDescIm2ColType) else tensor_descriptor
    return cls(handle, shape, strides)


def _descriptor(sem, desc, what: str) -> TensorDescType:
    if isinstance(desc, tensor_descriptor_im2col):
        sem.error(f"{what} is an im2col descriptor (TensorDescriptorIm2Col); copy through it with "
                  "tma.async_load_im2col, or pass a TensorDescriptor", TypeMismatchError)
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
        what = f"the rank-{desc.rank} tensor" if isinstance(desc, TensorDescIm2ColType) else \
            f"the block {list(desc.block_shape)}"
        sem.error(f"the coordinates {coord!r} must have one entry per dimension of {what}", ArgumentError)
    out = []
    for c in coord:
        c = sem.to_tensor(c, int32) if not isinstance(c, tensor) else c
        if c.is_block() or not c.dtype.is_int() or c.dtype.is_bool():
            sem.error(f"each coordinate must be an integer scalar, got {c.type}", TypeMismatchError)
        out.append(sem.cast(c, int32))
    return out


def _no_multicast_or_policy(sem, what: str, multicast=False, cache_policy=None) -> None:
    if multicast:
        sem.error(f"{what}(multicast=True) copies into the shared memory of several CTAs of a cluster, which "
                  f"gluonkit supports for tiled async_load only, not for {what}", UnsupportedFeatureError)
    if cache_policy is not None:
        refuse_parameter(sem, what, "cache_policy", "cache_policy", "leave it None")


@builtin
def async_load(tensor_desc, coord, barrier, result, pred=True, multicast=False, cache_policy=None, _semantic=None):
    """Start copying the block at ``coord`` into ``result``; it completes on ``barrier``."""
    sem = _semantic
    desc = _descriptor(sem, tensor_desc, "async_load's tensor_desc")
    smem = _shared(sem, desc, result, "async_load's result")
    bar = barrier_type(sem, barrier, "async_load's barrier")
    coords = _coordinates(sem, desc, coord)
    multicast = sem.require_constexpr(multicast, "async_load's multicast")
    if not isinstance(multicast, bool):
        sem.error(f"async_load's multicast must be True or False, got {multicast!r}", ArgumentError)
    _no_multicast_or_policy(sem, "async_load", cache_policy=cache_policy)
    # One CTA has nothing to multicast to: the plain copy.  In a cluster, the copy lands in every CTA.
    attrs = {"multicast": True} if multicast and sem.num_ctas > 1 else None
    p = predicate(sem, pred)
    if p is not None:
        sem.create("async_tma_copy_global_to_shared", [tensor_desc.handle, smem, bar, p] + coords, [], attrs)


def _im2col_offsets(sem, desc: TensorDescIm2ColType, offsets) -> list:
    """The filter-tap offsets as int16 scalars (unsigned 16-bit patterns), one per spatial dimension."""
    offsets = list(shape_args((offsets,)))
    rank, limit = desc.rank, desc.max_offset
    if len(offsets) != rank - 2:
        sem.error(f"async_load_im2col's offsets {offsets!r} must have {rank - 2} entries (one per spatial dimension "
                  f"of the rank-{rank} tensor)", ArgumentError)
    out = []
    for o in offsets:
        if isinstance(o, tensor):
            if o.is_block() or not o.dtype.is_int() or o.dtype.is_bool():
                sem.error(f"each im2col offset must be an integer scalar, got {o.type}", TypeMismatchError)
            out.append(sem.cast(o, int16))
            continue
        if not isinstance(o, int) or isinstance(o, bool):
            sem.error(f"each im2col offset must be an int or an integer scalar, got {o!r}", TypeMismatchError)
        if not 0 <= o <= limit:
            sem.error(f"im2col offset {o} is out of range: for a rank-{rank} tensor the offsets are unsigned and at "
                      f"most {limit}", ArgumentError)
        out.append(sem.constant(o - 2**16 if o >= 2**15 else o, int16))  # the same 16 bits
    return out


@builtin
def async_load_im2col(tensor_desc, coord, offsets, barrier, result, pred=True, multicast=False, cache_policy=None,
                      _semantic=None):
    """Start gathering ``block_shape[0]`` pixels from filter position ``coord`` shifted by the filter tap
    ``offsets`` into ``result`` (im2col mode); it completes on ``barrier``."""
    sem = _semantic
    if isinstance(tensor_desc, tensor_descriptor):
        sem.error("async_load_im2col's tensor_desc is a tiled descriptor (TensorDescriptor); build a "
                  "TensorDescriptorIm2Col for im2col copies, or use tma.async_load", TypeMismatchError)
    if not isinstance(tensor_desc, tensor_descriptor_im2col):
        sem.error(f"async_load_im2col's tensor_desc must be an im2col descriptor (a TensorDescriptorIm2Col kernel "
                  f"argument), got {tensor_desc!r}", TypeMismatchError)
    desc = tensor_desc.type
    smem = _shared(sem, desc, result, "async_load_im2col's result")
    bar = barrier_type(sem, barrier, "async_load_im2col's barrier")
    coords = _coordinates(sem, desc, coord)
    taps = _im2col_offsets(sem, desc, offsets)
    _no_multicast_or_policy(sem, "async_load_im2col",
                            sem.require_constexpr(multicast, "async_load_im2col's multicast"), cache_policy)
    p = predicate(sem, pred)
    if p is not None:
        sem.create("async_tma_copy_global_to_shared", [tensor_desc.handle, smem, bar, p] + coords + taps, [])


@builtin
def async_store(tensor_desc, coord, src, cache_policy=None, _semantic=None):
    """Start copying ``src`` to the block at ``coord``; ``store_wait`` retires it."""
    sem = _semantic
    desc = _descriptor(sem, tensor_desc, "async_store's tensor_desc")  # TMA stores have no im2col mode
    smem = _shared(sem, desc, src, "async_store's src")
    _no_multicast_or_policy(sem, "async_store", cache_policy=cache_policy)
    sem.create("async_tma_copy_shared_to_global", [tensor_desc.handle, smem] + _coordinates(sem, desc, coord), [])


@builtin
def store_wait(pendings, read_only=True, _semantic=None) -> None:
    """Wait until at most ``pendings`` (a compile-time int) async_store copies are still reading
    shared memory (``read_only=True``) or still incomplete (``read_only=False``)."""
    n = _semantic.require_int(pendings, "store_wait's pendings")
    if n < 0:
        _semantic.error(f"store_wait's pendings must be non-negative, got {n}", ArgumentError)
    read_only = _semantic.require_constexpr(read_only, "store_wait's read_only")
    if not isinstance(read_only, bool):
        _semantic.error(f"store_wait's read_only must be True or False, got {read_only!r}", ArgumentError)
    _semantic.create("async_tma_store_wait", [], [], {"pendings": n, "read_only": read_only})


async_copy_global_to_shared = removed("async_copy_global_to_shared", "async_load")
async_copy_shared_to_global = removed("async_copy_shared_to_global", "async_store")
async_copy_global_to_shared_im2col = removed("async_copy_global_to_shared_im2col", "async_load_im2col")

__all__ += install(globals(), TMA)
