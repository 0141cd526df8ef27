"""Scratch shared memory: a round trip of a distributed tensor through shared memory.

Layout conversions that move data between warps, and reductions across warps, store each
thread's registers at an offset computed from the element's coordinates, synchronize the
block, and load the elements each thread needs.  Each such op has its own region of the
kernel's dynamic shared memory (``global_smem``), planned before lowering with the buffers
(:mod:`.smem`, sized by :mod:`.scratch_size`); :func:`begin_use` selects it.
"""

from __future__ import annotations

from typing import List, Sequence

import llvmlite.ir as lir

from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I8, I32, byte_size

__all__ = ["barrier", "begin_use", "release_scratch_to_peers", "wait_for_peers", "row_major_offset", "scratch_pointer",
           "shared_base", "store_scratch", "load_scratch",
           "store_vector", "load_vector"]

SHARED = 3


def barrier(ctx: KernelLowering) -> None:
    """``bar.sync 0``: every thread of the block reaches it before any continues.

    Inside warp-specialized code it is the named barrier of the threads running that code
    (``ctx.sync_group``: ``bar.sync id, threads``).
    """
    barrier_id, threads = ctx.sync_group
    text = f"bar.sync {barrier_id};" if threads is None else f"bar.sync {barrier_id}, {threads};"
    emit_ptx(ctx.builder, text)


def begin_use(ctx: KernelLowering, op) -> None:
    """Start a round trip of ``op`` through its planned scratch region.

    The first round trip waits at a barrier where the barrier plan (:mod:`.barriers`) says
    earlier accesses of those bytes may be pending (a previous iteration's reads, a dead
    buffer's last reads); a later round trip of the same op always waits for the earlier one's reads.
    When other CTAs of the cluster may still read this CTA's scratch (:func:`release_scratch_to_peers`),
    the pending cluster wait is that barrier: it waits for every thread of the cluster, this CTA's included.
    """
    if ctx.scratch_op is not op:
        region = ctx.shared_plan.scratch_of(op)
        assert region is not None, f"{op.name} has no planned scratch region (memplan/scratch_size.py)"
        ctx.scratch_op, ctx.scratch_start = op, region.offset
        needed = ctx.barrier_plan.needs_barrier(op)
    else:
        needed = True
    if ctx.cluster_wait_pending:
        wait_for_peers(ctx)
    elif needed:
        barrier(ctx)


def release_scratch_to_peers(ctx: KernelLowering) -> None:
    """This CTA has read what it needed of the other CTAs' scratch (distributed shared memory):
    ``barrier.cluster.arrive.aligned`` (release) now, the matching ``wait`` only where it is needed
    (:func:`wait_for_peers`): before this CTA's next use of scratch, a cluster barrier, control
    flow, or the end of the block.  As Triton does, the CTAs overlap the wait with other work."""
    emit_ptx(ctx.builder, "barrier.cluster.arrive.aligned;")
    ctx.cluster_wait_pending = True


def wait_for_peers(ctx: KernelLowering) -> None:
    """The ``barrier.cluster.wait.aligned`` (acquire) that :func:`release_scratch_to_peers` left
    pending, if any: after it no CTA of the cluster still reads this CTA's scratch."""
    if ctx.cluster_wait_pending:
        emit_ptx(ctx.builder, "barrier.cluster.wait.aligned;")
        ctx.cluster_wait_pending = False


def _shared_base(ctx: KernelLowering) -> lir.GlobalVariable:
    existing = ctx.module.globals.get("global_smem")
    if existing is not None:
        return existing
    smem = lir.GlobalVariable(ctx.module, lir.ArrayType(I8, 0), "global_smem", addrspace=SHARED)
    smem.linkage = "external"
    smem.align = 16
    smem.type = lir.PointerType(addrspace=SHARED)  # llvmlite types globals with typed pointers
    return smem


def shared_base(ctx: KernelLowering) -> lir.GlobalVariable:
    """``global_smem``, the kernel's dynamic shared memory (declared on first use)."""
    return _shared_base(ctx)


def scratch_pointer(ctx: KernelLowering, element: lir.Type, offset: lir.Value) -> lir.Value:
    """Address of element ``offset`` of a scratch array of ``element``s (in the current op's region)."""
    base = _shared_base(ctx)
    if ctx.scratch_start:
        base = ctx.builder.gep(base, [I32(ctx.scratch_start)], source_etype=I8)
    return ctx.builder.gep(base, [offset], source_etype=element)


def row_major_offset(ctx: KernelLowering, coords: Sequence[lir.Value], shape: Sequence[int]) -> lir.Value:
    """``coords`` flattened row-major (last dimension fastest), as an i32."""
    b = ctx.builder
    offset = I32(0)
    stride = 1
    for c, size in zip(reversed(list(coords)), reversed(list(shape))):
        offset = b.add(offset, b.mul(c, I32(stride)) if stride != 1 else c)
        stride *= size
    return offset


def store_scratch(ctx: KernelLowering, values: List[lir.Value], offsets: List[lir.Value]) -> None:
    for value, offset in zip(values, offsets):
        ctx.builder.store(value, scratch_pointer(ctx, value.type, offset))


def load_scratch(ctx: KernelLowering, element: lir.Type, offsets: List[lir.Value]) -> List[lir.Value]:
    return [ctx.builder.load(scratch_pointer(ctx, element, offset), typ=element) for offset in offsets]


def store_vector(ctx: KernelLowering, values: List[lir.Value], offset: lir.Value) -> None:
    """Store ``values`` at consecutive elements from ``offset`` (one vector store)."""
    b = ctx.builder
    if len(values) == 1:
        b.store(values[0], scratch_pointer(ctx, values[0].type, offset))
        return
    vector_type = lir.VectorType(values[0].type, len(values))
    vector = lir.Constant(vector_type, None)
    for i, v in enumerate(values):
        vector = b.insert_element(vector, v, I32(i))
    b.store(vector, scratch_pointer(ctx, values[0].type, offset), align=len(values) * byte_size(values[0].type))


def load_vector(ctx: KernelLowering, element: lir.Type, count: int, offset: lir.Value) -> List[lir.Value]:
    """Load ``count`` consecutive elements from ``offset`` (one vector load)."""
    b = ctx.builder
    if count == 1:
        return [b.load(scratch_pointer(ctx, element, offset), typ=element)]
    vector_type = lir.VectorType(element, count)
    vector = b.load(scratch_pointer(ctx, element, offset), typ=vector_type, align=count * byte_size(element))
    return [b.extract_element(vector, I32(i)) for i in range(count)]
