"""How many bytes of scratch shared memory each op needs, known before lowering.

The shared-memory planner (:mod:`.smem`) gives every op that goes through scratch memory a
region of its own, live at that op only, so it needs the size before anything is lowered;
the lowering rules lay their arrays out with the same functions (:func:`packed_arrays`,
:func:`conversion_plan`, :func:`captured_values`), so the planned size and the bytes the
code touches cannot disagree.

The ops and their scratch:

* ``convert_layout`` that moves data between warps: the conversion plan's scratch layout
  (``i1`` stored as bytes);
* ``reduce`` whose axis crosses warps: one slot per warp along the axis, per kept element and
  per result; whose axis crosses the CTAs of a cluster: after those, one slot per thread for
  each result register (:func:`cta_exchange_slots`);
* ``convert_layout`` between layouts with different ``cga_layout``: the CTA's share of the
  source, indexed by its local coordinates (:func:`cluster_exchange_extents`);
* ``scan`` whose axis crosses warps: the whole tensor once per result;
* ``histogram``: one ``int32`` counter per bin; ``gather``: the source tensor;
* ``atomic_rmw``/``atomic_cas`` whose old values go to other threads: the result tensor;
* ``warp_specialize`` with captured values: one :data:`CAPTURE_SLOT` each, which the kernel's
  warps write before the fork and the workers read after it.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import List, Sequence, Tuple

from ...ir import Function, Operation, TensorType, Value
from ...ir.types import element_type
from ...layouts.conversion import plan_conversion
from ..llvm_types import byte_size, llvm_type
from .scratch_use import atomic_broadcasts_through_scratch, converts_through_scratch, cta_axis_bits, warp_axis_bits

__all__ = ["CAPTURE_SLOT", "scratch_bytes", "packed_arrays", "conversion_plan", "captured_values",
           "cta_exchange_slots", "local_coordinate_masks", "cluster_exchange_extents"]

CAPTURE_SLOT = 8  # bytes per value captured by warp_specialize's workers


def packed_arrays(element_sizes: Sequence[int], count: int) -> Tuple[List[int], int]:
    """Arrays of ``count`` elements each, one per element size, one after the other, each
    aligned to its element size: the element index where each starts, and the total bytes."""
    starts, offset = [], 0
    for size in element_sizes:
        offset = -(-offset // size) * size
        starts.append(offset // size)
        offset += count * size
    return starts, offset


@lru_cache(maxsize=4096)
def _cached_conversion(src, dst, bitwidth: int):
    return plan_conversion(src, dst, element_bitwidth=bitwidth)


def conversion_plan(op: Operation):
    """The :func:`~gluonkit.layouts.conversion.plan_conversion` plan of a ``convert_layout``."""
    src, dst = op.operands[0].type, op.results[0].type
    return _cached_conversion(src.layout.to_linear_layout(list(src.shape)), dst.layout.to_linear_layout(list(dst.shape)),
                              8 * byte_size(llvm_type(dst)))


def captured_values(op: Operation) -> List[Value]:
    """The values a ``warp_specialize``'s workers use from the code around it, in first-use order:
    everything defined outside the worker partitions except the kernel's arguments and constants
    (``hint`` ops on them included: they lower to their operand), which the workers' code can
    use directly."""
    seen = {}
    for region in op.regions[1:]:
        defined = set()
        for inner in region.walk():
            defined.update(r.uid for r in inner.results)
            defined.update(a.uid for reg in inner.regions for a in reg.args)
        for inner in region.walk():
            for value in inner.operands:
                if value.uid in defined or value.uid in seen:
                    continue
                if _needs_capture(value):
                    seen[value.uid] = value
    return list(seen.values())


def _needs_capture(value: Value) -> bool:
    """Whether ``value`` is computed by the kernel, not a kernel argument or constant seen through hints."""
    producer = value.defining_op
    while producer is not None and producer.name == "hint":
        producer = producer.operands[0].defining_op
    return producer is not None and producer.name != "constant"


def scratch_bytes(func: Function, op: Operation) -> int:
    """The bytes of scratch shared memory ``op`` needs (0 for an op that needs none)."""
    name = op.name
    if name == "convert_layout":
        plan = conversion_plan(op)
        element = byte_size(llvm_type(op.results[0].type))
        if plan.kind == "cluster_exchange":
            return math.prod(cluster_exchange_extents(plan.src)) * element
        return plan.scratch_elements * element if converts_through_scratch(plan) else 0
    if name == "reduce":
        src = op.operands[0].type
        if cta_axis_bits(op, src.layout.to_linear_layout(list(src.shape))):
            return cta_exchange_slots(func, op)[1]
        return _warp_exchange_bytes(op)
    if name == "scan":
        ty = op.operands[0].type
        bases = ty.layout.to_linear_layout(list(ty.shape)).bases.get("warp", [])
        crosses = any(basis[op.attrs["axis"]] for basis in bases)
        return packed_arrays(_element_sizes(op), ty.numel)[1] if crosses else 0
    if name == "histogram":
        return 4 * op.attrs["num_bins"]
    if name == "gather":
        ty = op.operands[0].type
        return ty.numel * byte_size(llvm_type(ty))
    if name in ("atomic_rmw", "atomic_cas") and atomic_broadcasts_through_scratch(func, op):
        ty = op.results[0].type
        numel = ty.numel if isinstance(ty, TensorType) else 1
        return numel * max(1, element_type(ty).primitive_bitwidth // 8)
    if name == "warp_specialize":
        return CAPTURE_SLOT * len(captured_values(op))
    return 0


def _warp_exchange_bytes(op: Operation) -> int:
    """The bytes of a ``reduce``'s exchange across warps (0 when no warp bit moves along its axis)."""
    src = op.operands[0].type
    warp_bits = warp_axis_bits(op, src.layout.to_linear_layout(list(src.shape)))
    if not warp_bits:
        return 0
    kept = math.prod(s for d, s in enumerate(src.shape) if d != op.attrs["axis"])
    return packed_arrays(_element_sizes(op), kept << len(warp_bits))[1]


def cta_exchange_slots(func: Function, op: Operation) -> Tuple[List[int], int]:
    """Where a ``reduce`` across the CTAs of a cluster puts its partials in its scratch region:
    the byte offset of the per-thread slot array of each (result, result register), result
    by result, after the bytes of its exchange across warps; and the region's total bytes.
    Every thread of the kernel (a reduction across CTAs never runs in a partition) has a slot."""
    result = op.results[0].type
    registers = result.layout.to_linear_layout(list(result.shape)).in_dim_size("register") \
        if isinstance(result, TensorType) else 1
    threads = func.num_warps * 32
    offset, slots = _warp_exchange_bytes(op), []
    for size in _element_sizes(op):
        for _ in range(registers):
            offset = -(-offset // size) * size
            slots.append(offset)
            offset += threads * size
    return slots, offset


def local_coordinate_masks(src) -> List[int]:
    """Per output dimension of the linear layout ``src``, the coordinate bits its register, lane
    and warp bases take: a CTA's local share of a ``cluster_exchange`` conversion's source."""
    masks = [0] * len(src.out_dims)
    for dim in ("register", "lane", "warp"):
        for basis in src.bases.get(dim, []):
            for d, c in enumerate(basis):
                masks[d] |= c
    return masks


def cluster_exchange_extents(src) -> List[int]:
    """Per dimension, the power-of-two extent covering :func:`local_coordinate_masks`: the CTA's
    share of a ``cluster_exchange`` conversion's source is stored row-major over these extents."""
    return [1 << m.bit_length() for m in local_coordinate_masks(src)]


def _element_sizes(op: Operation) -> List[int]:
    """Bytes of one element of each of ``op``'s results (a reduction's or scan's operands)."""
    return [byte_size(llvm_type(r.type)) for r in op.results]
