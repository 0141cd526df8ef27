"""Blackwell's TMA gather and scatter: ``async_gather`` and ``async_scatter`` of Gluon's ``blackwell.tma``.

``from gluonkit.language.nvidia.blackwell import tma`` gives them with Gluon 3.9's signatures:

* ``async_gather(tensor_desc, x_offsets, y_offset, barrier, result, pred=True, multicast=False,
  cache_policy=None)``: start copying row ``x_offsets[i]`` of the descriptor's tensor, columns
  ``y_offset … y_offset + BLOCK_Y - 1``, into row ``i`` of ``result`` (``[len(x_offsets),
  BLOCK_Y]``); rows or columns outside the tensor, negative ones included, read as zero; the
  bytes (``len(x_offsets) * tensor_desc.block_type.nbytes``) complete on ``barrier``;
* ``async_scatter(tensor_desc, x_offsets, y_offset, src, cache_policy=None)``: start copying
  row ``i`` of ``src`` to row ``x_offsets[i]``; elements outside the tensor are dropped; it is
  one bulk group, retired by ``tma.store_wait`` like ``async_store``.

The descriptor's block is ``[1, BLOCK_Y]``; the offsets' layout must hold four consecutive
offsets per thread and be the same in every lane (:mod:`gluonkit.ir.verify_tma_gather` has
the rules; e.g. ``gl.SliceLayout(0, gl.BlockedLayout([1, 4], [32, 1], [1, num_warps], [1, 0]))``).
``y_offset`` must be a multiple of 16 bytes and scatter offsets non-negative: the hardware
raises an illegal-instruction error otherwise, the interpreter reports the line.
``multicast=True`` in a cluster kernel and ``cache_policy`` are not supported yet (errors);
with one CTA, multicast is the plain gather, as for ``async_load``.
"""

from __future__ import annotations

from ...ir.types import int32
from ...ir.verify_tma_gather import gather_problem, offsets_layout_problem
from ...sync.builtin import barrier_type, descriptor_handle, predicate
from ..errors import ArgumentError, TypeMismatchError
from ..tensor import builtin, tensor
from ..unsupported import UnsupportedFeatureError, refuse_parameter
from .tma import tensor_descriptor

__all__ = ["async_gather", "async_scatter"]


def _operands(sem, what: str, tensor_desc, x_offsets, y_offset, smem, smem_name: str) -> list:
    """[descriptor, shared view, offsets, column offset] after Gluon's checks, at the user's line."""
    if not isinstance(tensor_desc, tensor_descriptor):
        sem.error(f"{what}'s tensor_desc must be a tiled tensor descriptor (a TensorDescriptor kernel argument), "
                  f"got {tensor_desc!r}", TypeMismatchError)
    if not isinstance(x_offsets, tensor) or len(x_offsets.shape) != 1:
        sem.error(f"{what}'s x_offsets must be a 1-D tensor of row offsets, got {x_offsets!r}", TypeMismatchError)
    if not x_offsets.dtype.is_int() or x_offsets.dtype.is_bool():
        sem.error(f"{what}'s x_offsets must be integers, got {x_offsets.dtype}", TypeMismatchError)
    offsets = sem.cast(x_offsets, int32)
    handle = descriptor_handle(sem, smem, f"{what}'s {smem_name}")
    problem = (offsets_layout_problem(offsets.handle.type)
               or gather_problem(tensor_desc.type, handle.type, x_offsets.shape[0]))
    if problem:
        sem.error(f"{what}: {problem}", ArgumentError)
    column = sem.to_tensor(y_offset, int32) if not isinstance(y_offset, tensor) else y_offset
    if column.is_block() or not column.dtype.is_int() or column.dtype.is_bool():
        sem.error(f"{what}'s y_offset must be an integer scalar, got {column.type}", TypeMismatchError)
    return [tensor_desc.handle, handle, offsets.handle, sem.cast(column, int32).handle]


@builtin
def async_gather(tensor_desc, x_offsets, y_offset, barrier, result, pred=True, multicast=False, cache_policy=None,
                 _semantic=None):
    """Start gathering rows ``x_offsets`` (columns from ``y_offset``) into ``result``; completes on ``barrier``."""
    sem = _semantic
    desc, smem, offsets, column = _operands(sem, "async_gather", tensor_desc, x_offsets, y_offset, result, "result")
    bar = barrier_type(sem, barrier, "async_gather's barrier")
    multicast = sem.require_constexpr(multicast, "async_gather's multicast")
    if not isinstance(multicast, bool):
        sem.error(f"async_gather's multicast must be True or False, got {multicast!r}", ArgumentError)
    if multicast and sem.num_ctas > 1:
        sem.error("async_gather(multicast=True) in a cluster kernel is not supported by gluonkit yet; gather in "
                  "each CTA instead", UnsupportedFeatureError)
    if cache_policy is not None:
        refuse_parameter(sem, "async_gather", "cache_policy", "cache_policy", "leave it None")
    p = predicate(sem, pred)
    if p is not None:
        sem.create("async_tma_gather", [desc, smem, bar, p.handle, offsets, column], [])


@builtin
def async_scatter(tensor_desc, x_offsets, y_offset, src, cache_policy=None, _semantic=None):
    """Start scattering the rows of ``src`` to rows ``x_offsets`` (columns from ``y_offset``)."""
    sem = _semantic
    operands = _operands(sem, "async_scatter", tensor_desc, x_offsets, y_offset, src, "src")
    if cache_policy is not None:
        refuse_parameter(sem, "async_scatter", "cache_policy", "cache_policy", "leave it None")
    sem.create("async_tma_scatter", operands, [])
