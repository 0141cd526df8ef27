"""Lowering of ``tcgen05_mma`` and ``tcgen05_commit`` to Blackwell ``tcgen05.mma`` / ``tcgen05.commit`` (sm_100a).

One ``tcgen05_mma`` of ``[M, K] x [K, N]`` is one ``tcgen05.mma.cta_group::1.kind::K`` per
K step (32 bytes of inputs), all issued by thread 0 of the program (the hardware runs an
MMA for the whole CTA; Triton 3.9 elects one thread of warp 0 too):

* the accumulator is the TMEM address of ``acc`` (an i32 ``lane << 16 | column``, :mod:`gluonkit.lower.nvidia.tmem`);
* ``a`` and ``b`` are read through 64-bit shared-memory matrix descriptors, or ``a`` (any input
  kind, packed, 128 rows per CTA; in a pair each CTA's rows from its own tensor memory) straight
  from tensor memory: ``[a]`` is its TMEM address, 8 columns (32 bytes) further per K step, and
  the instruction descriptor calls it K-major, as Triton 3.9 emits it.  Their strides
  and swizzle come from the layout algebra exactly as for wgmma
  (:func:`.wgmma_descriptor.describe_operand`: leading/stride byte offsets read off the
  view's linear layout and checked against the canonical layout); sm_100's descriptor
  differs only in its fixed fields: version 1 at bits 46–47 and a 3-bit layout type at
  61–63 (:data:`LAYOUT_TYPES`).  The leading offset of a swizzled K-major operand is not
  used by the hardware and is left 0, as Triton 3.9 leaves it;
* the 32-bit *instruction descriptor* (:func:`instruction_descriptor`) holds the input and
  accumulator types, whether A and B are MN-major (transposed), N >> 3 and M >> 4;
* ``use_acc`` is the enable-input-d predicate of the first K step; later steps accumulate.

Before the MMAs a ``tcgen05.fence::before_thread_sync`` / ``bar.sync`` /
``tcgen05.fence::after_thread_sync`` orders the other threads' earlier TMEM stores (and
shared-memory writes) before the issuing thread's MMA.  ``mbarriers=`` adds one
``tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64`` per barrier,
from the issuing thread.  A synchronous MMA (``mbarriers=None``) commits to a kernel-private
mbarrier and every thread waits for it.
"""

from __future__ import annotations

import llvmlite.ir as lir

from ...ir import CompilationError, Operation
from ...ir.types import TensorMemoryDescType
from ...ir.memdesc import cta_share_type
from ...ir.tmem import cta_group
from ...ir.verify_tcgen05 import pair_mma_shape, tcgen05_k_step, tcgen05_kind
from ...layouts.distributed import cta_class
from ...ir.verify_wgmma import is_k_major
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I1, I16, I32, I64
from ..ops.shared_memory import SharedPointer, order_access
from ..registry import lowering
from .mbarrier import elected_thread, even_cta
from .tmem import synchronize
from .wgmma_descriptor import OperandDescriptor, describe_operand

__all__ = ["LAYOUT_TYPES", "instruction_descriptor", "shared_descriptor_base"]

#: sm_100 matrix descriptor layout type (bits 61-63) per swizzle width in bytes.
LAYOUT_TYPES = {0: 0, 128: 2, 64: 4, 32: 6}
_VERSION = 1 << 46
#: Input type codes of the instruction descriptor, per kind.
_INPUT_CODES = {"float16": 0, "bfloat16": 1, "float32": 2, "float8e4nv": 0, "float8e5": 1}
_ACC_CODES = {"float16": 0, "float32": 1}
_SHARED = 3
#: TMEM columns one K step of an A operand in tensor memory advances (32 bytes of packed inputs).
_TMEM_A_COLUMNS_PER_STEP = 8


def shared_descriptor_base(plan: OperandDescriptor) -> int:
    """The sm_100 descriptor's fields other than the start address."""
    lbo = 0 if plan.k_major and plan.swizzle else plan.lbo
    return ((lbo >> 4) << 16) | ((plan.sbo >> 4) << 32) | _VERSION | (LAYOUT_TYPES[plan.swizzle] << 61)


def instruction_descriptor(a_type, b_type, acc_type, a_k_major: bool, b_k_major: bool) -> int:
    """The 32-bit instruction descriptor of ``kind::f16|tf32|f8f6f4`` (PTX ISA, "Instruction descriptor")
    of one MMA instruction on ``acc_type`` (a pair's part of a cluster's accumulator: :func:`pair_mma_shape`)."""
    m, n = pair_mma_shape(acc_type)
    return (_ACC_CODES[acc_type.element.name] << 4 | _INPUT_CODES[a_type.element.name] << 7
            | _INPUT_CODES[b_type.element.name] << 10 | (0 if a_k_major else 1) << 15
            | (0 if b_k_major else 1) << 16 | (n >> 3) << 17 | (m >> 4) << 24)


def _start(ctx: KernelLowering, pointer: SharedPointer, plan: OperandDescriptor) -> lir.Value:
    b = ctx.builder
    address = b.ptrtoint(pointer.pointer, I32)
    field = b.zext(b.and_(b.lshr(address, I32(4)), I32(0x3FFF)), I64)
    return b.or_(field, I64(shared_descriptor_base(plan)))


def _step(ctx: KernelLowering, start: lir.Value, plan: OperandDescriptor, k: int) -> lir.Value:
    """The descriptor of the K step at ``k``: a whole number of 16-byte units past the start (see wgmma)."""
    offset = plan.offset_of(0, k)
    return ctx.builder.add(start, I64(offset >> 4)) if offset else start


def _commit(ctx: KernelLowering, bar: lir.Value, issuer: lir.Value, group: int = 1, multicast=()) -> None:
    """One arrival on ``bar`` when the issuer's MMAs complete.

    It lands on the barrier at that address in each CTA of the ``ctaMask``: a pair's (``group`` 2)
    commit reaches both CTAs of the pair; with ``multicast`` (per multicast operand, the CTA-rank
    bits its layout replicates) also every CTA that differs from the issuer only in one operand's
    bits (and the pair bit): the union of the classes, ``base << (rank & ~bits)`` each, as Triton
    3.9 computes it.  One CTA, no multicast: the plain form."""
    pair_bit = 1 if group == 2 else 0
    classes = sorted({bits | pair_bit for bits in multicast} or {pair_bit})
    if classes == [0]:
        emit_ptx(ctx.builder, f"@$1 tcgen05.commit.cta_group::{group}.mbarrier::arrive::one.shared::cluster.b64 "
                              "[$0];", "r,b", [bar, issuer])
        return
    b = ctx.builder
    mask = None
    for bits in classes:
        base = sum(1 << r for r in cta_class(bits, 0, ctx.func.num_ctas))
        term = b.shl(I32(base), b.and_(ctx.cta_rank(), I32(~bits & 0xFFFFFFFF)))
        mask = term if mask is None else b.or_(mask, term)
    emit_ptx(b, f"@$2 tcgen05.commit.cta_group::{group}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 "
                "[$0], $1;", "r,h,b", [bar, b.trunc(mask, I16), issuer])


def _barrier_address(ctx: KernelLowering, value) -> lir.Value:
    return ctx.builder.ptrtoint(ctx.get(value).pointer, I32)


@lowering("tcgen05_mma")
def _tcgen05_mma(ctx: KernelLowering, op: Operation) -> None:
    if ctx.target.arch != "sm_100a":
        raise CompilationError(f"tcgen05_mma: tcgen05 is a Blackwell (sm_100a) instruction; {ctx.target.arch} has "
                               "none (Hopper uses warpgroup_mma); compile for target='sm_100a'", op.loc)
    a, b_value, acc = op.operands[:3]
    n_bars = op.attrs["num_barriers"]
    element = a.type.element
    group = 2 if acc.type.layout.two_ctas else 1
    if group != cta_group(ctx.func):
        raise CompilationError("tcgen05_mma: this kernel also has two_ctas tensor memory, so its tcgen05 "
                               "instructions use cta_group::2, but this MMA's accumulator layout is not two_ctas; "
                               "every tcgen05 instruction of a kernel must use the same cta_group (PTX ISA)", op.loc)
    # cta_group::2: each CTA of the pair holds its share of A (rows) and B (columns); the
    # descriptors describe the share, the instruction descriptor the whole [M, N] product.
    a_in_tmem = isinstance(a.type, TensorMemoryDescType)
    a_type = a.type if a_in_tmem else cta_share_type(a.type)
    b_type = cta_share_type(b_value.type)
    k_step = tcgen05_k_step(element)
    order_access(ctx, op)
    a_plan = None if a_in_tmem else describe_operand(a_type, 0, ctx.get(a).xor, ctx.get(a).align, a_type.shape[0],
                                                     k_step, op.loc, "tcgen05_mma")
    b_plan = describe_operand(b_type, 1, ctx.get(b_value).xor, ctx.get(b_value).align, b_type.shape[1], k_step,
                              op.loc, "tcgen05_mma")
    a_k_major = a_in_tmem or is_k_major(a_type, 0)  # A in tensor memory: rows on lanes, K along the columns
    idesc = instruction_descriptor(a.type, b_value.type, acc.type, a_k_major, is_k_major(b_type, 1))
    b = ctx.builder
    synchronize(ctx)
    issuer = elected_thread(ctx, ctx.get(op.operands[4]))
    if group == 2:  # the even CTA of the pair issues the pair's MMA
        issuer = b.and_(issuer, even_cta(ctx))
    a_start = ctx.get(a) if a_in_tmem else _start(ctx, ctx.get(a), a_plan)
    b_start = _start(ctx, ctx.get(b_value), b_plan)
    kind = f"tcgen05.mma.cta_group::{group}.kind::{tcgen05_kind(element)}"
    if a_in_tmem:  # [a]: a TMEM address; one K step is 32 bytes, 8 packed columns
        text, constraints = f"@$5 {kind} [$0], [$1], $2, $3, $4;", "r,r,l,r,b,b"
    else:
        text, constraints = f"@$5 {kind} [$0], $1, $2, $3, $4;", "r,l,l,r,b,b"
    for step in range(a.type.shape[1] // k_step):
        k = step * k_step
        enable_d = ctx.get(op.operands[3]) if step == 0 else I1(1)
        a_step = b.add(a_start, I32(step * _TMEM_A_COLUMNS_PER_STEP)) if a_in_tmem else _step(ctx, a_start, a_plan, k)
        emit_ptx(b, text, constraints, [ctx.get(acc), a_step, _step(ctx, b_start, b_plan, k), I32(idesc), enable_d,
                                        issuer])
    for i in range(n_bars):
        bar_issuer = b.and_(issuer, ctx.get(op.operands[5 + n_bars + i]))
        _commit(ctx, _barrier_address(ctx, op.operands[5 + i]), bar_issuer, group, op.attrs.get("multicast_bits", ()))
    if not op.attrs["is_async"]:
        _wait_synchronously(ctx, issuer)


def _wait_synchronously(ctx: KernelLowering, issuer: lir.Value) -> None:
    """Commit to the kernel's private mbarrier (initialized here for one phase) and wait for it in every thread."""
    name = "tcgen05_mma_barrier"
    slot = ctx.module.globals.get(name)
    if slot is None:
        slot = lir.GlobalVariable(ctx.module, I64, name, addrspace=_SHARED)
        slot.linkage = "internal"
        slot.initializer = lir.Constant(I64, None)
        slot.align = 8
    b = ctx.builder
    bar = b.ptrtoint(slot, I32)
    # Initialized by the issuing thread before its commit (program order makes it visible to that commit).
    emit_ptx(b, "@$1 mbarrier.init.shared::cta.b64 [$0], 1;", "r,b", [bar, issuer])
    _commit(ctx, bar, issuer)
    synchronize(ctx)  # every thread sees the initialized barrier before waiting on it
    loop = ctx.fn.append_basic_block("tcgen05.wait")
    done = ctx.fn.append_basic_block("tcgen05.done")
    b.branch(loop)
    b.position_at_end(loop)
    text = ("{ .reg .pred complete; mbarrier.try_wait.parity.shared::cta.b64 complete, [$1], 0; "
            "selp.u32 $0, 1, 0, complete; }")
    flag = b.asm(lir.FunctionType(I32, [I32]), text, "=r,r,~{memory}", [bar], side_effect=True)
    b.cbranch(b.icmp_unsigned("!=", flag, I32(0)), done, loop)
    b.position_at_end(done)
    synchronize(ctx)  # nobody re-initializes the barrier while another thread still waits on it
    emit_ptx(b, "tcgen05.fence::after_thread_sync;")
    emit_ptx(b, "@$1 mbarrier.inval.shared::cta.b64 [$0];", "r,b", [bar, issuer])


@lowering("tcgen05_commit")
def _tcgen05_commit(ctx: KernelLowering, op: Operation) -> None:
    if ctx.target.arch != "sm_100a":
        raise CompilationError(f"tcgen05_commit: tcgen05 is a Blackwell (sm_100a) instruction; {ctx.target.arch} "
                               "has none; compile for target='sm_100a'", op.loc)
    order_access(ctx, op)
    issuer = elected_thread(ctx, ctx.get(op.operands[1]))
    group = cta_group(ctx.func)  # every tcgen05 op of a kernel uses one cta_group (PTX ISA)
    if group == 2:  # commits the pair's MMAs, issued by the even CTA
        issuer = ctx.builder.and_(issuer, even_cta(ctx))
    _commit(ctx, _barrier_address(ctx, op.operands[0]), issuer, group, op.attrs.get("multicast_bits", ()))
