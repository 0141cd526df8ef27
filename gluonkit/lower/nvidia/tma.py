"""Lowering of TMA copies to ``cp.async.bulk.tensor`` (inline PTX).

The descriptor parameter is the 128-byte tensor map itself, kept in the parameter space
(:class:`~.llvm_types.TensorMapParamAttributes`); its generic address (``cvta.param``)
is the instructions' ``[tmap, {coords}]`` operand.  Coordinates go innermost first, the
reverse of Python order.  A block larger than the hardware box (the layout's
``tma_block_shape``, the same box the host encodes) is several instructions, one per box;
each box's shared address is the view's offset of the box's first element, and the check
below guarantees that the layout keeps every box contiguous, which is how TMA writes it.

* ``async_tma_copy_global_to_shared``: thread 0 (where ``pred`` holds) issues
  ``cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx::bytes`` per box;
  the mbarrier receives the bytes.  It takes part in :func:`~.shared_memory.order_access`
  as an asynchronous write (:mod:`.barrier_plan`), so earlier reads and writes of those
  bytes by other threads finish (``bar.sync``) before it is issued; its completion is
  ordered by the mbarrier wait, not by a later barrier.  A ``multicast`` copy (cluster
  kernels) is issued, with ``.multicast::cluster``, by the CTAs whose rank has none of the
  bits the descriptor's ``cga_layout`` replicates (rank 0 alone for a block every CTA holds
  whole), each copying its share into every CTA that differs from it only in those bits
  (``ctaMask = base << (rank & ~bits)``): the box lands at the same offset in each and
  completes the bytes on each one's barrier at the same offset — with a pair barrier
  (``.cta_group::2``, the even CTA's address) on the barrier of each destination's pair —
  as Triton 3.9 emits it.  A split block that no CTA bit replicates has nobody to multicast to:
  each CTA copies its share (the plain form), as in Triton.
  With an im2col descriptor the instruction is
  ``cp.async.bulk.tensor.Nd.shared::cluster.global.im2col.mbarrier::complete_tx::bytes`` with
  the im2col offsets (``.b16`` registers, innermost first) after the mbarrier; its box is
  ``[pixels, channels per swizzle width]`` (the host's ``box_shape``), so a block wider
  than the swizzle is one instruction per slice of channels, each starting that many
  channels further.
* ``async_tma_copy_shared_to_global``: thread 0 issues
  ``cp.async.bulk.tensor.Nd.global.shared::cta.bulk_group`` per box (in a cluster, CTA rank 0
  only), then every thread runs ``cp.async.bulk.commit_group`` (one group per copy; empty in
  threads that issued nothing, so the counts agree with Blackwell scatters, which several
  warps issue, as Triton 3.9 emits it).  As a read it follows a
  ``bar.sync`` after other threads' writes; the user's ``fence_async_shared()``
  (``fence.proxy.async.shared::cta``) makes those generic writes visible to the copy, and
  every thread also runs that fence just before the copy (before the ``bar.sync``), as Triton
  3.9 lowers the store, so kernels that leave the fence to Triton's compiler are correct too.
* ``async_tma_store_wait``: ``cp.async.bulk.wait_group.read N`` (threads without groups
  pass at once); with ``read_only=False`` ``cp.async.bulk.wait_group N``, which also waits
  for the copies' global writes to complete.  It accesses no shared memory itself, but the barrier plan counts the
  reads of the copies it retires as pending from here, so a later write to those bytes by
  any thread waits at a ``bar.sync`` until thread 0 has seen the copies finish reading.
"""

from __future__ import annotations

import itertools
from typing import List, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, SharedMemoryDescType, TensorDescIm2ColType, TensorDescType
from ...ir.memdesc import view_to_offset
from ...layouts.distributed import cta_class, replicated_cta_bits, shape_per_cta
from ...layouts.shared import TMA_MAX_BOX_DIM
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I8, I16, I32
from .mbarrier import elected_thread, is_pair_barrier, pair_address
from ..registry import lowering
from ..ops.shared_memory import SharedPointer, order_access

__all__: List[str] = []


def _asm(ctx: KernelLowering, text: str, constraints: List[str], operands: List[lir.Value]) -> None:
    emit_ptx(ctx.builder, text, ",".join(constraints), operands)


def _box(desc: TensorDescType) -> List[int]:
    """The box one instruction moves: the layout's TMA box, or im2col's [all pixels, one swizzle of channels]."""
    block = list(desc.block_shape)
    if isinstance(desc, TensorDescIm2ColType):
        return [block[0], desc.layout.tma_block_shape([min(block[0], TMA_MAX_BOX_DIM), block[1]])[1]]
    return desc.layout.tma_block_shape(block)


def _boxes(op: Operation, desc: TensorDescType, view: SharedMemoryDescType, xor: int,
           share: List[int]) -> List[Tuple[tuple, int]]:
    """(first element, element offset in the view) of every box of the block (of this CTA's
    ``share`` of it), in row-major order."""
    box = _box(desc)
    box_numel = 1
    for b in box:
        box_numel *= b
    placement = view_to_offset(view)
    for d, (size, extent) in enumerate(zip(desc.block_shape, box)):
        for bit in range(size.bit_length() - 1):
            offset = placement.basis(f"dim{d}", bit)[0]
            inside = (1 << bit) < extent
            if (offset >= box_numel) if inside else (offset % box_numel):
                raise CompilationError(f"{op.name}: the layout {desc.layout!r} does not keep each {box} TMA box of "
                                       f"the {list(desc.block_shape)} block contiguous", op.loc)
    if xor % box_numel:
        raise CompilationError(f"{op.name}: the shared view does not start at a TMA box boundary", op.loc)
    starts = itertools.product(*[range(0, size, extent) for size, extent in zip(share, box)])
    return [(start, placement.apply({f"dim{d}": s for d, s in enumerate(start)})["offset"] ^ xor)
            for start in starts]


def _cta_share(ctx: KernelLowering, desc: TensorDescType, coords: List[lir.Value]):
    """A block split between the CTAs of a cluster (``cga_layout``): this CTA's share as
    (its block shape, its first coordinates): each CTA copies its own share."""
    bases = getattr(desc.layout, "cga_layout", None) or ()
    if not any(any(v) for v in bases):
        return list(desc.block_shape), coords
    share = shape_per_cta("tma", list(desc.block_shape), bases)
    b = ctx.builder
    out = list(coords)
    for bit, basis in enumerate(bases):
        on = b.and_(b.lshr(ctx.cta_rank(), I32(bit)), I32(1))
        for d, step in enumerate(basis):
            if step:
                out[d] = b.add(out[d], b.mul(on, I32(step * share[d])))
    return share, out


def _copies(ctx: KernelLowering, op: Operation, smem_index: int, coord_start: int):
    """Per box: (shared address as i32, coordinates innermost first)."""
    desc: TensorDescType = op.operands[0].type
    view: SharedMemoryDescType = op.operands[smem_index].type
    smem: SharedPointer = ctx.get(op.operands[smem_index])
    share, coords = _cta_share(ctx, desc, [ctx.get(c) for c in op.operands[coord_start:coord_start + desc.rank]])
    b = ctx.builder
    out = []
    for start, offset in _boxes(op, desc, view, smem.xor, share):
        pointer = b.gep(smem.pointer, [I32(offset * view.element.itemsize)], source_etype=I8)
        if isinstance(desc, TensorDescIm2ColType):  # a box holds every pixel: only the channel moves
            start = (0,) * (desc.rank - 1) + start[1:]
        at = [b.add(c, I32(s)) if s else c for c, s in zip(coords, start)]
        out.append((b.ptrtoint(pointer, I32), at[::-1]))
    return out


def _braces(first: int, count: int) -> str:
    return "{" + ", ".join(f"${first + i}" for i in range(count)) + "}"


@lowering("async_tma_copy_global_to_shared")
def _global_to_shared(ctx: KernelLowering, op: Operation) -> None:
    order_access(ctx, op)
    rank = op.operands[0].type.rank
    tmap = ctx.get(op.operands[0])
    bar = ctx.builder.ptrtoint(ctx.get(op.operands[2]).pointer, I32)
    pred = elected_thread(ctx, ctx.get(op.operands[3]))
    if isinstance(op.operands[0].type, TensorDescIm2ColType):
        taps = [ctx.get(o) for o in op.operands[4 + rank:]][::-1]  # innermost first, like the coordinates
        text = (f"@$0 cp.async.bulk.tensor.{rank}d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
                f"[$1], [$2, {_braces(3, rank)}], [${3 + rank}], {_braces(4 + rank, len(taps))};")
        for dst, coords in _copies(ctx, op, 1, 4):
            _asm(ctx, text, ["b", "r", "l"] + ["r"] * rank + ["r"] + ["h"] * len(taps),
                 [pred, dst, tmap] + coords + [bar] + taps)
        return
    group = ""
    if is_pair_barrier(op.operands[2].type):  # both CTAs' shares complete on the even CTA's barrier
        bar, group = pair_address(ctx, bar), ".cta_group::2"
    layout = op.operands[0].type.layout
    bits = replicated_cta_bits(getattr(layout, "cga_layout", None), ctx.func.num_ctas)
    if op.attrs.get("multicast") and bits:  # one CTA per class of replicas copies its share into the whole class
        b = ctx.builder
        pred = b.and_(pred, b.icmp_unsigned("==", b.and_(ctx.cta_rank(), I32(bits)), I32(0)))
        base = sum(1 << r for r in cta_class(bits, 0, ctx.func.num_ctas))
        # The rank's bits below num_ctas that no replica shares (a rank is below num_ctas, a power
        # of 2): a constant mask when there are none, whatever the IR passes infer about the rank.
        split = ~bits & (ctx.func.num_ctas - 1)
        mask = b.trunc(b.shl(I32(base), b.and_(ctx.cta_rank(), I32(split))), I16)
        text = (f"@$0 cp.async.bulk.tensor.{rank}d{group}.shared::cluster.global.mbarrier::complete_tx::bytes"
                f".multicast::cluster [$1], [$2, {_braces(3, rank)}], [${3 + rank}], ${4 + rank};")
        for dst, coords in _copies(ctx, op, 1, 4):
            _asm(ctx, text, ["b", "r", "l"] + ["r"] * rank + ["r", "h"], [pred, dst, tmap] + coords + [bar, mask])
        return
    text = (f"@$0 cp.async.bulk.tensor.{rank}d{group}.shared::cluster.global.mbarrier::complete_tx::bytes "
            f"[$1], [$2, {_braces(3, rank)}], [${3 + rank}];")
    for dst, coords in _copies(ctx, op, 1, 4):
        _asm(ctx, text, ["b", "r", "l"] + ["r"] * rank + ["r"], [pred, dst, tmap] + coords + [bar])


@lowering("async_tma_copy_shared_to_global")
def _shared_to_global(ctx: KernelLowering, op: Operation) -> None:
    # Every thread fences its generic writes to the async proxy first, as Triton 3.9 emits the
    # store: a ported kernel that leaves the fence to Triton stays correct (the checker still
    # asks for the fence_async_shared() Gluon's documentation requires).
    _asm(ctx, "fence.proxy.async.shared::cta;", [], [])
    order_access(ctx, op)
    rank = op.operands[0].type.rank
    tmap = ctx.get(op.operands[0])
    pred = elected_thread(ctx, None)
    if ctx.func.num_ctas > 1:  # CTAs holding the same block: one writes it (context.cluster_leader)
        desc = op.operands[0].type
        pred = ctx.builder.and_(pred, ctx.cluster_leader(desc.layout.to_linear_layout(list(desc.block_shape))))
    text = f"@$0 cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [$1, {_braces(2, rank)}], [${2 + rank}];"
    for src, coords in _copies(ctx, op, 1, 2):
        _asm(ctx, text, ["b", "l"] + ["r"] * rank + ["r"], [pred, tmap] + coords + [src])
    _asm(ctx, "cp.async.bulk.commit_group;", [], [])  # every thread: group counts agree with scatters' (tma_gather)


@lowering("async_tma_store_wait")
def _store_wait(ctx: KernelLowering, op: Operation) -> None:
    suffix = ".read" if op.attrs["read_only"] else ""
    _asm(ctx, f"cp.async.bulk.wait_group{suffix} {op.attrs['pendings']};", [], [])
