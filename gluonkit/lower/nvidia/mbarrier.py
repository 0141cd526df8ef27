"""Lowering of mbarrier ops, ``fence_async_shared`` and ``thread_barrier`` to inline PTX.

An mbarrier's address is its 32-bit shared-window address (``r`` operand).  ``init``,
``expect``, ``arrive`` and ``invalidate`` are performed by one thread of the program
(thread 0), as in Gluon, so ``init(bar, count=1)`` plus one ``arrive`` completes a phase
whatever ``num_warps`` is; ``wait`` runs in every thread as a loop around
``mbarrier.try_wait.parity`` (which itself suspends for a while before returning false).
The user's ``pred`` predicates each instruction.  Barrier words are shared memory, so
these ops take part in :func:`~.shared_memory.order_access` (init/invalidate write,
the others read): waiting on a barrier another thread just initialized is ordered by a
``bar.sync``.
"""

from __future__ import annotations

import llvmlite.ir as lir

from ...ir import Operation
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I32
from ..registry import lowering
from ..ops.shared_memory import SharedPointer, order_access
from ..memplan.scratch import barrier

__all__ = ["elected_thread", "even_cta", "is_pair_barrier", "pair_address"]


def _address(ctx: KernelLowering, op: Operation) -> lir.Value:
    desc: SharedPointer = ctx.get(op.operands[0])  # a [1] view: its one element is at the pointer
    return ctx.builder.ptrtoint(desc.pointer, I32)


def is_pair_barrier(ty) -> bool:
    """A ``two_ctas`` barrier (``allocate_mbarrier(two_ctas=True)``): one per CTA pair, in the even CTA."""
    return bool(getattr(ty.layout, "two_ctas", False))


def even_cta(ctx: KernelLowering) -> lir.Value:
    """i1: this CTA is the even one of its pair (the pair barrier's and the MMA's owner)."""
    b = ctx.builder
    return b.icmp_unsigned("==", b.and_(ctx.cta_rank(), I32(1)), I32(0))


def pair_address(ctx: KernelLowering, address: lir.Value) -> lir.Value:
    """The ``shared::cluster`` address of a pair barrier: the one in the even CTA (``mapa``)."""
    even = ctx.builder.and_(ctx.cta_rank(), I32(~1 & 0xFFFFFFFF))
    return ctx.builder.asm(lir.FunctionType(I32, [I32, I32]), "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r",
                           [address, even], side_effect=False)


def elected_thread(ctx: KernelLowering, pred: lir.Value | None) -> lir.Value:
    """True in thread 0 of the program (and where ``pred`` holds)."""
    b = ctx.builder
    first = b.icmp_unsigned("==", b.or_(ctx.lane, ctx.warp), I32(0))
    return b.and_(first, pred) if pred is not None else first


@lowering("mbarrier_init")
def _init(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    pair = is_pair_barrier(op.operands[0].type)  # in the even CTA, with both CTAs' arrivals
    pred = ctx.builder.and_(elected_thread(ctx, None), even_cta(ctx)) if pair else elected_thread(ctx, None)
    emit_ptx(ctx.builder, "@$2 mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,b",
             [_address(ctx, op), I32(op.attrs["count"] * (2 if pair else 1)), pred])
    if ctx.func.num_ctas > 1:  # other CTAs may arrive on it (after a cluster barrier): publish the init
        emit_ptx(ctx.builder, "@$0 fence.mbarrier_init.release.cluster;", "b", [elected_thread(ctx, None)])


@lowering("mbarrier_expect")
def _expect(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    if "from_cta" in op.attrs:
        _routed(ctx, op, "mbarrier.arrive.expect_tx", op.attrs["bytes"])
        return
    if is_pair_barrier(op.operands[0].type):
        _to_pair(ctx, op, "mbarrier.arrive.expect_tx", op.attrs["bytes"])
        return
    emit_ptx(ctx.builder, "@$2 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,b",
             [_address(ctx, op), I32(op.attrs["bytes"]), elected_thread(ctx, ctx.get(op.operands[1]))])


@lowering("mbarrier_arrive")
def _arrive(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    if "from_cta" in op.attrs:
        _routed(ctx, op, "mbarrier.arrive", op.attrs["count"])
        return
    if is_pair_barrier(op.operands[0].type):
        _to_pair(ctx, op, "mbarrier.arrive", op.attrs["count"])
        return
    emit_ptx(ctx.builder, "@$2 mbarrier.arrive.shared::cta.b64 _, [$0], $1;", "r,r,b",
             [_address(ctx, op), I32(op.attrs["count"]), elected_thread(ctx, ctx.get(op.operands[1]))])


def _routed(ctx: KernelLowering, op: Operation, instruction: str, amount: int) -> None:
    """``instruction`` (with ``amount``) routed by the ``from_cta`` mask between the CTAs of the cluster.

    A CTA whose rank has a bit outside the mask does nothing; the others arrive, from
    thread 0, on the barrier at the same address in every CTA whose rank differs from
    theirs only outside the mask: ``mapa`` turns the address into that CTA's
    ``shared::cluster`` address.  The arrival has the default semantics (release at CTA
    scope), exactly as Triton 3.9 emits: ``.release.cluster`` made the odd CTA's consumers
    of the ``CLUSTER_M=2`` WS GEMM stall at every stage they handed back (H100, measured)."""
    b = ctx.builder
    free = (ctx.func.num_ctas - 1) & ~op.attrs["from_cta"]  # rank bits the routing fans out over
    rank = b.call(ctx.intrinsic("llvm.nvvm.read.ptx.sreg.cluster.ctarank", I32, []), [])
    sender = b.icmp_unsigned("==", b.and_(rank, I32(free)), I32(0))
    pred = b.and_(sender, elected_thread(ctx, ctx.get(op.operands[1])))
    text = ("{ .reg .b32 remote;\n"
            "mapa.shared::cluster.u32 remote, $0, $1;\n"
            f"@$3 {instruction}.shared::cluster.b64 _, [remote], $2; }}")
    offset = 0
    while True:  # every subset of the free bits, 0 (the sender itself) first
        emit_ptx(b, text, "r,r,r,b", [_address(ctx, op), b.or_(rank, I32(offset)), I32(amount), pred])
        offset = (offset - free) & free
        if offset == 0:
            break


def _to_pair(ctx: KernelLowering, op: Operation, instruction: str, amount: int) -> None:
    """``instruction`` from thread 0 of each CTA onto its pair's barrier (in the even CTA), with the
    default semantics, as Triton 3.9 (see :func:`_routed`)."""
    emit_ptx(ctx.builder, f"@$2 {instruction}.shared::cluster.b64 _, [$0], $1;", "r,r,b",
             [pair_address(ctx, _address(ctx, op)), I32(amount), elected_thread(ctx, ctx.get(op.operands[1]))])


@lowering("mbarrier_wait")
def _wait(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    b = ctx.builder
    address = _address(ctx, op)
    parity = b.and_(ctx.get(op.operands[1]), I32(1))
    loop = ctx.fn.append_basic_block("mbarrier.wait")
    done = ctx.fn.append_basic_block("mbarrier.done")
    pred = ctx.get(op.operands[2])
    if is_pair_barrier(op.operands[0].type):  # the odd CTA of a pair does not wait (as Triton 3.9)
        pred = b.and_(pred, even_cta(ctx))
    b.cbranch(pred, loop, done)
    b.position_at_end(loop)
    text = ("{ .reg .pred complete; mbarrier.try_wait.parity.shared::cta.b64 complete, [$1], $2; "
            "selp.u32 $0, 1, 0, complete; }")
    flag = b.asm(lir.FunctionType(I32, [I32, I32]), text, "=r,r,r,~{memory}", [address, parity], side_effect=True)
    b.cbranch(b.icmp_unsigned("!=", flag, I32(0)), done, loop)
    b.position_at_end(done)


@lowering("mbarrier_invalidate")
def _invalidate(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    pred = elected_thread(ctx, None)
    if is_pair_barrier(op.operands[0].type):
        pred = ctx.builder.and_(pred, even_cta(ctx))
    emit_ptx(ctx.builder, "@$1 mbarrier.inval.shared::cta.b64 [$0];", "r,b", [_address(ctx, op), pred])


@lowering("fence_async_shared")
def _fence_async_shared(ctx: KernelLowering, op: Operation) -> None:
    space = "cluster" if op.attrs.get("cluster") else "cta"
    emit_ptx(ctx.builder, f"fence.proxy.async.shared::{space};", "", [])


@lowering("thread_barrier")
def _thread_barrier(ctx: KernelLowering, op: Operation) -> None:
    barrier(ctx)
