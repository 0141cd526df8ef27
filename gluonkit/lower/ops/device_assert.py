"""Lowering of ``device_assert`` to CUDA's ``__assertfail``.

Each thread ANDs the condition's registers it holds; where one is false it calls
``__assertfail(message, file, line, function, 1)`` — the device-side assert of CUDA's
``assert()``, which ptxas resolves: it prints ``file:line: function: block: [..], thread:
[..] Assertion `message` failed.`` and traps, so the launch fails with
``cudaErrorAssert`` and the next synchronisation reports it.
"""

from __future__ import annotations

from typing import List

import llvmlite.ir as lir

from ...ir import Operation, TensorType
from ..context import KernelLowering
from ..llvm_types import I32, I64
from ..registry import lowering
from .debug_print import global_string

__all__: List[str] = []

_GENERIC_PTR = lir.PointerType()


@lowering("device_assert")
def _device_assert(ctx: KernelLowering, op: Operation) -> None:
    b = ctx.builder
    (cond,) = op.operands
    registers = ctx.get(cond) if isinstance(cond.type, TensorType) else [ctx.get(cond)]
    holds = registers[0]
    for r in registers[1:]:
        holds = b.and_(holds, r)
    assertfail = ctx.intrinsic("__assertfail", lir.VoidType(), [_GENERIC_PTR, _GENERIC_PTR, I32, _GENERIC_PTR, I64])
    with b.if_then(b.not_(holds), likely=False):
        b.call(assertfail, [global_string(ctx, op.attrs["message"], "assert_message_"),
                            global_string(ctx, op.attrs.get("file") or "<unknown>", "assert_file_"),
                            I32(op.attrs["line"]),
                            global_string(ctx, op.attrs.get("function") or "<unknown>", "assert_function_"),
                            I64(1)])
