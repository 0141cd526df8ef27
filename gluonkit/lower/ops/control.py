"""Lowering of structured control flow to LLVM basic blocks and phi nodes.

A loop-carried or yielded tensor is a list of registers, so it gets one phi per register —
except 16-bit floats, which go two to a ``<2 x half/bfloat>`` phi (registers ``2i``, ``2i+1``):
ptxas gives a phi of two 16-bit scalars a 32-bit register whose halves it often has to swap
back (one ``PRMT`` per pair: 32 a key block in attention, whose P is carried from one block's
softmax to the next block's ``P V``), while a packed pair is what ``cvt.rn.bf16x2`` writes and
what wgmma reads.
``for`` loops run ``iv = lower; iv < upper; iv += step`` with a signed comparison (a
constant negative step compares with ``>``), as Triton's ``scf.for`` does.  Regions end in
``yield``/``condition``, which :func:`~gluonkit.lower.walk.lower_block` hands back to the
rule that owns the region.
"""

from __future__ import annotations

from typing import List, Tuple

import llvmlite.ir as lir

from ...ir import Operation, TensorType, Value
from ..context import KernelLowering
from ..llvm_types import llvm_type
from ..registry import lowering
from .warp_specialize import cluster_barrier
from ..walk import lower_block

__all__: List[str] = []


def _flatten(ctx: KernelLowering, values: List[Value]) -> List[lir.Value]:
    """All registers of ``values``, in order (a scalar is one register)."""
    out: List[lir.Value] = []
    for v in values:
        lowered = ctx.get(v)
        out.extend(lowered if isinstance(v.type, TensorType) else [lowered])
    return out


def _plan(ctx: KernelLowering, values: List[Value]) -> List[Tuple[lir.Type, int]]:
    """``(register type, registers per phi)`` for each phi that carries ``values``: 16-bit float
    tensors with an even register count two registers a phi, everything else one."""
    plan: List[Tuple[lir.Type, int]] = []
    for v in values:
        ty = llvm_type(v.type)
        count = ctx.num_registers(v.type) if isinstance(v.type, TensorType) else 1
        if isinstance(v.type, TensorType) and count % 2 == 0 and str(ty) in ("half", "bfloat"):
            plan.extend([(ty, 2)] * (count // 2))
        else:
            plan.extend([(ty, 1)] * count)
    return plan


def _phis(ctx: KernelLowering, plan: List[Tuple[lir.Type, int]], name: str) -> List[lir.PhiInstr]:
    """Phi nodes at the builder's position, one per entry of ``plan``."""
    return [ctx.builder.phi(ty if n == 1 else lir.VectorType(ty, n), name=name) for ty, n in plan]


def _pack(ctx: KernelLowering, registers: List[lir.Value], plan: List[Tuple[lir.Type, int]]) -> List[lir.Value]:
    """The flat ``registers`` as incoming values of the phis of ``plan`` (pairs into vectors)."""
    b, out, i = ctx.builder, [], 0
    for ty, n in plan:
        if n == 1:
            out.append(registers[i])
        else:
            vector = lir.Constant(lir.VectorType(ty, n), None)
            for k in range(n):
                vector = b.insert_element(vector, registers[i + k], lir.Constant(lir.IntType(32), k))
            out.append(vector)
        i += n
    return out


def _unpack(ctx: KernelLowering, phis: List[lir.Value], plan: List[Tuple[lir.Type, int]]) -> List[lir.Value]:
    """The flat registers that the phis of ``plan`` carry (after the block's last phi)."""
    out: List[lir.Value] = []
    for phi, (_, n) in zip(phis, plan):
        out.extend([phi] if n == 1 else
                   [ctx.builder.extract_element(phi, lir.Constant(lir.IntType(32), k)) for k in range(n)])
    return out


def _assign(ctx: KernelLowering, values: List[Value], registers: List[lir.Value]) -> None:
    """Give ``values`` the flat list ``registers`` (split by each value's register count)."""
    i = 0
    for v in values:
        if isinstance(v.type, TensorType):
            n = ctx.num_registers(v.type)
            ctx.set(v, list(registers[i:i + n]))
            i += n
        else:
            ctx.set(v, registers[i])
            i += 1


def _lower_region(ctx: KernelLowering, block) -> Operation:

    terminator = lower_block(ctx, block)
    assert terminator is not None, "verified regions end in yield/condition"
    return terminator


@lowering("for")
def _for(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    lower, upper, step = (ctx.get(v) for v in op.operands[:3])
    body = op.regions[0]
    plan = _plan(ctx, body.args[1:])
    init = _pack(ctx, _flatten(ctx, op.operands[3:]), plan)
    entry = b.block
    header = ctx.fn.append_basic_block("for.header")
    loop = ctx.fn.append_basic_block("for.body")
    exit_ = ctx.fn.append_basic_block("for.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lower.type, name="iv")
    phis = _phis(ctx, plan, "carried")
    iv.add_incoming(lower, entry)
    for phi, value in zip(phis, init):
        phi.add_incoming(value, entry)
    carried = _unpack(ctx, phis, plan)
    negative_step = isinstance(step, lir.Constant) and step.constant < 0
    keep_going = b.icmp_signed(">" if negative_step else "<", iv, upper)
    b.cbranch(keep_going, loop, exit_)
    b.position_at_end(loop)
    ctx.set(body.args[0], iv)
    _assign(ctx, body.args[1:], carried)
    terminator = _lower_region(ctx, body)
    next_values = _pack(ctx, _flatten(ctx, terminator.operands), plan)
    latch = b.block
    iv.add_incoming(b.add(iv, step), latch)
    for phi, value in zip(phis, next_values):
        phi.add_incoming(value, latch)
    b.branch(header)
    b.position_at_end(exit_)
    _assign(ctx, op.results, carried)


@lowering("if")
def _if(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    then_block = ctx.fn.append_basic_block("if.then")
    else_block = ctx.fn.append_basic_block("if.else")
    merge = ctx.fn.append_basic_block("if.end")
    b.cbranch(ctx.get(op.operands[0]), then_block, else_block)
    plan = _plan(ctx, op.results)
    incoming = []
    for region, block in zip(op.regions, (then_block, else_block)):
        b.position_at_end(block)
        terminator = _lower_region(ctx, region)
        incoming.append((_pack(ctx, _flatten(ctx, terminator.operands), plan), b.block))
        b.branch(merge)
    b.position_at_end(merge)
    phis = _phis(ctx, plan, "if")
    for values, block in incoming:
        for phi, value in zip(phis, values):
            phi.add_incoming(value, block)
    _assign(ctx, op.results, _unpack(ctx, phis, plan))


@lowering("while")
def _while(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    before, after = op.regions
    entry = b.block
    header = ctx.fn.append_basic_block("while.cond")
    loop = ctx.fn.append_basic_block("while.body")
    exit_ = ctx.fn.append_basic_block("while.exit")
    plan = _plan(ctx, before.args)
    init = _pack(ctx, _flatten(ctx, op.operands), plan)
    b.branch(header)
    b.position_at_end(header)
    state = _phis(ctx, plan, "state")
    for phi, value in zip(state, init):
        phi.add_incoming(value, entry)
    _assign(ctx, before.args, _unpack(ctx, state, plan))
    condition = _lower_region(ctx, before)
    forwarded = _flatten(ctx, condition.operands[1:])
    b.cbranch(ctx.get(condition.operands[0]), loop, exit_)
    b.position_at_end(loop)
    _assign(ctx, after.args, forwarded)
    terminator = _lower_region(ctx, after)
    next_values = _pack(ctx, _flatten(ctx, terminator.operands), plan)
    for phi, value in zip(state, next_values):
        phi.add_incoming(value, b.block)
    b.branch(header)
    b.position_at_end(exit_)
    _assign(ctx, op.results, forwarded)


@lowering("yield", "condition")
def _region_terminator(ctx: KernelLowering, op: Operation) -> None:
    """Never called: the walker hands region terminators to the op that owns the region."""
    raise AssertionError(f"{op.name} outside a region")


@lowering("return")
def _return(ctx: KernelLowering, op: Operation) -> None:
    for emit in ctx.before_return:
        emit(ctx)
    if ctx.func.num_ctas > 1:  # no CTA may exit while another of its cluster can still reach its shared memory
        cluster_barrier(ctx)
    ctx.builder.ret_void()
