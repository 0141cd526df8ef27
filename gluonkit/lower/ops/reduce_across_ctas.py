"""Step 4 of a reduction whose ``cga_layout`` splits the axis: combining the CTAs' partials.

After steps 1-3 (:mod:`.reduce`) each CTA of the cluster holds, in every result register,
its partial of that element.  The CTAs that share a result element differ only in the
rank bits whose ``block`` bases move along the axis (``bits``); they exchange their partials
through distributed shared memory:

1. every thread stores its result registers in its CTA's scratch memory, value ``j`` at
   slot ``thread`` of region ``j``.  A thread holds the same result elements in the same
   registers in every CTA of the group: the result's layout, the slice of the operand's,
   has no ``block`` basis along the axis;
2. a cluster barrier (``barrier.cluster.arrive.aligned`` releases, ``barrier.cluster.wait.aligned``
   acquires, at cluster scope): every CTA's partials are written and visible;
3. each thread reads its slots in each of the ``2**len(bits)`` CTAs of its group, its own
   included (``mapa.shared::cluster.u32`` + ``ld.shared::cluster``), and combines them in
   CTA order — :func:`~gluonkit.ir.reduce_order.combine_butterfly` over the group index
   (the rank's ``bits`` packed, lowest first), as the interpreter does
   (:mod:`gluonkit.interpret.reduce`) — so every CTA gets the same bits;
4. a second cluster barrier, so that no CTA overwrites its scratch (a later op) or exits
   while another may still read it: its arrival right after the reads, its wait deferred to
   where it is needed (:func:`~..memplan.scratch.release_scratch_to_peers`), as Triton 3.9
   does.

Triton 3.9 folds the CTAs into its cross-warp step instead (one tree over warps and CTAs);
the instructions are the same.
A cluster barrier needs every thread of every CTA, so this cannot run inside a
``warp_specialize`` partition (an error, as in Gluon).
"""

from __future__ import annotations

from typing import Callable, List

import llvmlite.ir as lir

from ...ir import Operation
from ...ir.reduce_order import combine_butterfly
from ..context import KernelLowering
from ..inline_ptx import CLUSTER_BARRIER, emit_ptx
from ..llvm_types import I32, bit_width, byte_size
from ..memplan import scratch
from ..memplan.scratch_size import cta_exchange_slots
from .dsmem import from_bits, load_remote, require_every_thread, to_bits

__all__ = ["combine_across_ctas"]


def combine_across_ctas(ctx: KernelLowering, op: Operation, outputs: List[List[lir.Value]], bits: List[int],
                        combine: Callable, exchanged_across_warps: bool) -> List[List[lir.Value]]:
    """``outputs`` (per result, this CTA's partial in each register) combined over the CTAs
    whose rank differs from this one's in ``bits`` only; the same layout of values back.

    ``exchanged_across_warps``: this op's exchange across warps already used its scratch
    region.  The slots (:func:`~..memplan.scratch_size.cta_exchange_slots`) go after that
    exchange's bytes, and its barrier already separates them from earlier readers of scratch
    (its start waited for the other CTAs, its ``bar.sync`` for this CTA's threads), so the
    slots are written without another barrier."""
    require_every_thread(ctx, op, f"reduce along axis {op.attrs['axis']} (the operand's cga_layout splits the axis)")
    b = ctx.builder
    registers = len(outputs[0])
    thread = b.add(b.mul(ctx.warp, I32(32)), ctx.lane)
    slots, _ = cta_exchange_slots(ctx.func, op)  # (result, register) -> byte offset of its slot array
    if not exchanged_across_warps:
        scratch.begin_use(ctx, op)
    flat = [v for values in outputs for v in values]
    addresses = []
    for value, start in zip(flat, slots):
        bits_value = to_bits(b, value)
        pointer = scratch.scratch_pointer(ctx, bits_value.type, b.add(I32(start // byte_size(value.type)), thread))
        b.store(bits_value, pointer)
        addresses.append(b.ptrtoint(pointer, I32))
    emit_ptx(b, CLUSTER_BARRIER)
    group = [_group_rank(ctx, bits, w) for w in range(1 << len(bits))]
    partials = []  # per CTA of the group: per result, its registers
    for rank in group:
        loaded = [from_bits(b, load_remote(b, address, rank, bit_width(v.type)), v.type)
                  for address, v in zip(addresses, flat)]
        partials.append([loaded[i * registers:(i + 1) * registers] for i in range(len(outputs))])
    combined = [combine_butterfly([[p[i][r] for i in range(len(outputs))] for p in partials], combine)
                for r in range(registers)]
    scratch.release_scratch_to_peers(ctx)
    return [[combined[r][i] for r in range(registers)] for i in range(len(outputs))]


def _group_rank(ctx: KernelLowering, bits: List[int], w: int) -> lir.Value:
    """The rank of the ``w``-th CTA of this CTA's group: this rank with ``bits`` set to ``w``'s."""
    b = ctx.builder
    mask = sum(1 << bit for bit in bits)
    place = sum(1 << bit for i, bit in enumerate(bits) if w >> i & 1)
    return b.or_(b.and_(ctx.cta_rank(), I32(~mask & 0xFFFFFFFF)), I32(place))
