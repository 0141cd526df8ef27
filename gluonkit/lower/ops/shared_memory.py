"""Lowering of shared-memory buffers: allocations, views, ``local_load`` and ``local_store``.

A descriptor lowers to a :class:`SharedPointer`: the LLVM shared-memory address its
``index`` ops reached, the offset constant its ``slice`` ops XOR in, and the byte alignment
known for the address (see :mod:`gluonkit.ir.memdesc`).  A load or store composes the
tensor's distributed layout with the view's ``coordinates → offset`` map, giving each
register's offset as this thread's part XOR a per-register constant; registers that
:func:`~gluonkit.layouts.vectorize.vector_of_offsets` finds consecutive and aligned move as
one vector ``ld.shared``/``st.shared`` of up to 16 bytes.

Shared memory is written by some threads and read by others, so an access that could race
with an earlier one by another thread waits at a ``bar.sync 0``.  Where those barriers go
is decided once per kernel, before lowering, by :mod:`.barrier_plan`: per byte range of
``global_smem``, the reads and writes pending since the last barrier, followed through
branches and loops; a read after an overlapping write, a write after an overlapping read or
write, or a TMA load into bytes still read or written, gets one.  Every rule that accesses a
buffer (here, and in :mod:`.mbarrier`, :mod:`.tma`, :mod:`.wgmma`) calls
:func:`order_access` first, which emits the barrier where the plan has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import llvmlite.ir as lir

from ...ir import Operation, SharedMemoryDescType
from ...ir.memdesc import slice_xor, stage_strides, view_to_offset
from ...layouts.vectorize import MAX_VECTOR_BYTES, vector_of_offsets
from ..context import KernelLowering
from ..llvm_types import I8, I32, byte_size, llvm_type
from ..registry import lowering
from ..memplan.scratch import barrier, shared_base

__all__ = ["SharedPointer", "order_access"]

@dataclass(frozen=True)
class SharedPointer:
    """A lowered descriptor: ``pointer`` (shared address space), ``xor`` (elements), ``align`` (bytes)."""

    pointer: lir.Value
    xor: int
    align: int


def _lowbit(n: int) -> int:
    return n & -n


# ------------------------------------------------------------------ access ordering
def order_access(ctx: KernelLowering, op: Operation) -> None:
    """Emit ``bar.sync 0`` before ``op`` where the kernel's barrier plan (:mod:`.barrier_plan`) puts one."""
    if ctx.barrier_plan.needs_barrier(op):
        barrier(ctx)


# ---------------------------------------------------------------------- allocation
@lowering("local_alloc")
def _local_alloc(ctx: KernelLowering, op: Operation) -> None:
    region = ctx.shared_plan.regions[op.results[0].uid]
    pointer = ctx.builder.gep(shared_base(ctx), [I32(region.offset)], source_etype=I8)
    align = _lowbit(region.offset) if region.offset else 1 << 20
    value = SharedPointer(pointer, 0, align)
    ctx.set(op.results[0], value)
    if op.operands:
        order_access(ctx, op)
        _store(ctx, value, op.results[0].type, op.operands[0])


# ------------------------------------------------------------------- loads, stores
class _Access:
    """Per-register offsets and vectors of one tensor's access to one view."""

    def __init__(self, ctx: KernelLowering, desc: SharedPointer, view: SharedMemoryDescType, tensor_type):
        composed = ctx.linear_layout(tensor_type).compose(view_to_offset(view))
        item = view.element.itemsize
        max_bytes = min(MAX_VECTOR_BYTES, desc.align)
        if desc.xor:
            max_bytes = min(max_bytes, _lowbit(desc.xor * item))
        self.vector = vector_of_offsets(composed, view.element.primitive_bitwidth, max(item, max_bytes))
        self.constants = [composed.apply({"register": r})["offset"]
                          for r in range(composed.in_dim_size("register"))]
        images = ctx.register_images(composed)
        b = ctx.builder
        self.offsets = [b.xor(image[0], I32(desc.xor)) if desc.xor else image[0] for image in images]
        self.element = llvm_type(view.element)
        self.desc = desc

    def address(self, ctx: KernelLowering, register: int) -> lir.Value:
        return ctx.builder.gep(self.desc.pointer, [self.offsets[register]], source_etype=self.element)


def _vector_type(element: lir.Type, count: int) -> lir.Type:
    return element if count == 1 else lir.VectorType(element, count)


def _load_group(ctx: KernelLowering, access: _Access, group: List[int]) -> List[lir.Value]:
    """One (vector) load of the registers ``group``, in group order."""
    b = ctx.builder
    count = len(group)
    loaded = b.load(access.address(ctx, group[0]), typ=_vector_type(access.element, count),
                    align=count * byte_size(access.element))
    return [loaded] if count == 1 else [b.extract_element(loaded, I32(i)) for i in range(count)]


@lowering("local_load")
def _local_load(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    view, result = op.operands[0].type, op.results[0].type
    access = _Access(ctx, ctx.get(op.operands[0]), view, result)
    values: Dict[int, lir.Value] = {}
    by_constant: Dict[int, lir.Value] = {}
    for group in access.vector.register_groups().tolist():
        for r, v in zip(group, _load_group(ctx, access, group)):
            values[r] = v
            by_constant.setdefault(access.constants[r], v)
    registers = []
    for r, constant in enumerate(access.constants):
        if r not in values:  # a register repeating an element the thread already loaded
            values[r] = by_constant.get(constant) or _load_group(ctx, access, [r])[0]
        registers.append(values[r])
    ctx.set(op.results[0], registers)


def _store(ctx: KernelLowering, desc: SharedPointer, view: SharedMemoryDescType, value) -> None:
    access = _Access(ctx, desc, view, value.type)
    registers = ctx.get(value)
    b = ctx.builder
    for group in access.vector.register_groups().tolist():
        if len(group) == 1:
            data = registers[group[0]]
        else:
            data = lir.Constant(lir.VectorType(access.element, len(group)), None)
            for i, r in enumerate(group):
                data = b.insert_element(data, registers[r], I32(i))
        b.store(data, access.address(ctx, group[0]), align=len(group) * byte_size(access.element))


@lowering("local_store")
def _local_store(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    _store(ctx, ctx.get(op.operands[0]), op.operands[0].type, op.operands[1])


# -------------------------------------------------------------------------- views
@lowering("memdesc_index")
def _memdesc_index(ctx: KernelLowering, op: Operation) -> None:
    desc: SharedPointer = ctx.get(op.operands[0])
    view = op.operands[0].type
    step = stage_strides(view)[0] * view.element.itemsize
    b = ctx.builder
    offset = b.mul(ctx.get(op.operands[1]), I32(step))
    pointer = b.gep(desc.pointer, [offset], source_etype=I8)
    ctx.set(op.results[0], SharedPointer(pointer, desc.xor, min(desc.align, _lowbit(step))))


@lowering("memdesc_slice")
def _memdesc_slice(ctx: KernelLowering, op: Operation) -> None:
    desc: SharedPointer = ctx.get(op.operands[0])
    xor = slice_xor(op.operands[0].type, op.attrs["dim"], op.attrs["start"])
    ctx.set(op.results[0], SharedPointer(desc.pointer, desc.xor ^ xor, desc.align))


@lowering("memdesc_permute", "memdesc_reshape", "memdesc_reinterpret")
def _same_bytes(ctx: KernelLowering, op: Operation) -> None:
    """Offsets do not change; only how coordinates name them (the result type) does."""
    ctx.set(op.results[0], ctx.get(op.operands[0]))
