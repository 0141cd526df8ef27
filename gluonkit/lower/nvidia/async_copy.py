"""Lowering of cp.async (Ampere's ``async_copy``) to inline PTX.

``async_copy_global_to_shared``: each thread copies its registers' elements with
``cp.async.{ca,cg}.shared.global [dst], [src], bytes, src_bytes``.  Consecutive registers
move together when both sides allow it: the shared side from the view's offsets (the
register bits whose offsets are 1, 2, 4 … elements, :class:`~..ops.shared_memory._Access`)
and the global side from the pointers' contiguity, alignment and the mask's constancy
(:func:`~..ops.memory.vector_width`).  cp.async moves 4, 8 or 16 bytes, so a run shorter
than 4 bytes is an error naming the fix.  A masked-off run has ``src_bytes = 0``: the
hardware writes zeros.  ``.cg`` (L2 only) exists for 16-byte copies only; other widths use
``.ca``, as Triton does.  cp.async has no eviction or volatile qualifiers; those arguments
are accepted for Gluon compatibility and change nothing.

``async_commit_group`` and ``async_wait_group`` are ``cp.async.commit_group`` and
``cp.async.wait_group N``; the ``bar.sync`` that makes other threads' copies visible after a
wait is placed by the barrier planner (:mod:`..memplan.barriers`).
``async_copy_mbarrier_arrive`` is ``cp.async.mbarrier.arrive[.noinc]`` in every thread.
"""

from __future__ import annotations


from ...ir import CompilationError, Operation
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I32
from ..ops.memory import vector_width
from ..ops.shared_memory import SharedPointer, _Access, order_access
from ..registry import lowering

__all__ = []


def _width(ctx: KernelLowering, op: Operation, access: _Access, ptr, mask) -> int:
    """Elements per cp.async: the common run of consecutive registers on both sides."""
    leading = 0
    for bit in access.vector.register_bits:
        if bit != leading:
            break
        leading += 1
    item = op.operands[0].type.element.itemsize
    vec = min(1 << leading, vector_width(ctx, ptr, mask)[0], 16 // item)
    if vec * item < 4:
        raise CompilationError(
            f"async_load: cp.async copies 4, 8 or 16 bytes, but each thread's contiguous run here is {vec * item} "
            f"byte(s) ({vec} x {op.operands[0].type.element}); give the layout more consecutive elements per thread "
            "along the contiguous dimension, make the pointers provably contiguous and aligned (16-divisible "
            "arguments, gl.multiple_of / gl.max_contiguous), and use a shared layout that keeps them adjacent", op.loc)
    return vec


@lowering("async_copy_global_to_shared")
def _copy(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    b = ctx.builder
    smem, ptr = op.operands[0], op.operands[1]
    mask = op.operands[2] if op.attrs.get("has_mask") else None
    desc: SharedPointer = ctx.get(smem)
    access = _Access(ctx, desc, smem.type, ptr.type)
    vec = _width(ctx, op, access, ptr, mask)
    nbytes = vec * smem.type.element.itemsize
    cache = "cg" if op.attrs.get("cache_modifier") == ".cg" and nbytes == 16 else "ca"
    pointers = ctx.get(ptr)
    masks = ctx.get(mask) if mask is not None else None
    text = f"cp.async.{cache}.shared.global [ $0 + 0 ], [ $1 + 0 ], {nbytes}, $2;"
    for first in range(0, len(pointers), vec):
        dst = b.ptrtoint(access.address(ctx, first), I32)
        src_bytes = I32(nbytes) if masks is None else b.select(masks[first], I32(nbytes), I32(0))
        emit_ptx(ctx.builder, text, "r,l,r", [dst, pointers[first], src_bytes])


@lowering("async_commit_group")
def _commit(ctx: KernelLowering, op: Operation) -> None:
    emit_ptx(ctx.builder, "cp.async.commit_group;", "", [])


@lowering("async_wait_group")
def _wait(ctx: KernelLowering, op: Operation) -> None:
    emit_ptx(ctx.builder, f"cp.async.wait_group {op.attrs['num_outstanding']};", "", [])


@lowering("async_copy_mbarrier_arrive")
def _mbarrier_arrive(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    desc: SharedPointer = ctx.get(op.operands[0])
    noinc = "" if op.attrs["increment_count"] else ".noinc"
    emit_ptx(ctx.builder, f"cp.async.mbarrier.arrive{noinc}.shared::cta.b64 [$0];", "r",
             [ctx.builder.ptrtoint(desc.pointer, I32)])
