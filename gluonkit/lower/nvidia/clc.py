"""Lowering of cluster launch control (sm_100a): ``clc_try_cancel`` and ``clc_load_result``.

``try_cancel`` is ``clusterlaunchcontrol.try_cancel.async…mbarrier::complete_tx::bytes.b128``
issued by thread 0 (of CTA 0 with ``.multicast::cluster::all`` in a cluster, so every CTA
gets the response and its 16 transaction bytes).  ``load_result`` reads the 16 bytes
(``ld.shared.v2.b64``) and decodes them with ``clusterlaunchcontrol.query_cancel``
(``is_canceled`` and ``get_first_ctaid``); the CTA id's x is turned into the program id
as ``program_id`` does (divided by ``num_ctas``).  Other targets: a compile error at the
user's line.
"""

from __future__ import annotations

import llvmlite.ir as lir

from ...ir import CompilationError, Operation
from ..context import KernelLowering
from ..inline_ptx import emit_ptx
from ..llvm_types import I32
from ..ops.shared_memory import order_access
from ..registry import lowering
from .mbarrier import elected_thread

__all__ = []


def _require_blackwell(ctx: KernelLowering, op: Operation, what: str) -> None:
    if ctx.target.arch != "sm_100a":
        raise CompilationError(f"{what}: cluster launch control is a Blackwell (sm_100a) feature; "
                               f"{ctx.target.arch} has none; compile for target='sm_100a'", op.loc)


def _address(ctx: KernelLowering, value) -> lir.Value:
    return ctx.builder.ptrtoint(ctx.get(value).pointer, I32)


@lowering("clc_try_cancel")
def _try_cancel(ctx: KernelLowering, op: Operation) -> None:
    _require_blackwell(ctx, op, "clc.try_cancel")
    order_access(ctx, op)
    b = ctx.builder
    result, bar = (_address(ctx, v) for v in op.operands)
    pred = elected_thread(ctx, None)
    if ctx.func.num_ctas > 1:
        rank = b.call(ctx.intrinsic("llvm.nvvm.read.ptx.sreg.cluster.ctarank", I32, []), [])
        pred = b.and_(pred, b.icmp_unsigned("==", rank, I32(0)))
        text = ("@$2 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
                ".multicast::cluster::all.b128 [$0], [$1];")
    else:
        text = "@$2 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [$0], [$1];"
    emit_ptx(b, text, "r,r,b", [result, bar, pred])


@lowering("clc_load_result")
def _load_result(ctx: KernelLowering, op: Operation) -> None:
    _require_blackwell(ctx, op, "clc.load_result")
    order_access(ctx, op)
    b = ctx.builder
    text = ("{ .reg .b64 lo, hi; .reg .b128 r; .reg .pred p;\n"
            "ld.shared.v2.b64 {lo, hi}, [$4];\n"
            "mov.b128 r, {lo, hi};\n"
            "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r;\n"
            "selp.u32 $0, 1, 0, p;\n"
            "clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {$1, $2, $3, _}, r; }")
    ty = lir.LiteralStructType([I32] * 4)
    out = b.asm(lir.FunctionType(ty, [I32]), text, "=r,=r,=r,=r,r,~{memory}", [_address(ctx, op.operands[0])],
                side_effect=True)
    x = b.extract_value(out, 1)
    if ctx.func.num_ctas > 1:  # a program is a cluster: the CTA grid's x is num_ctas times larger
        x = b.lshr(x, I32(ctx.func.num_ctas.bit_length() - 1))
    ctx.set(op.results[0], b.icmp_unsigned("!=", b.extract_value(out, 0), I32(0)))
    ctx.set(op.results[1], x)
    ctx.set(op.results[2], b.extract_value(out, 2))
    ctx.set(op.results[3], b.extract_value(out, 3))
