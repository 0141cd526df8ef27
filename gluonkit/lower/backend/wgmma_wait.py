"""Keep a ``wgmma.wait_group`` that opens a block ahead of the pure code LLVM put before it.

The lowering computes thread coordinates once, in the kernel's prologue
(:meth:`~gluonkit.lower.context.KernelLowering.thread_part`), and LLVM's O3 pipeline sinks
them to the block that uses them, at its top.  When that block is a wgmma loop's exit, whose
first op is ``wgmma.wait_group 0`` (the wait for the last MMA), the epilogue's index math
lands between the loop's exit and that wait.  ptxas then counts it inside the last wgmma
pipeline stage and, depending on the rest of the kernel (a GEMM whose row strides are not
specialized on 16, for one), serializes every ``wgmma`` of the kernel: its note C7514
"wgmma.mma_async instructions are serialized ...", each MMA waiting for the previous one,
1.8x the time of the pipelined kernel.

:func:`wait_first` undoes that on LLVM's optimized IR: in a block whose first instructions
after its phis are pure (arithmetic, comparisons, casts, address math) and then a
``wgmma.wait_group``, the pure instructions that the wait does not use move after it.
Moving pure instructions later in their block changes no value, and the wait then comes first,
as in Triton's output.  Waits behind other instructions (a loop body's ``wait_group 1``
after its ``commit_group``) are left where they are.
"""

from __future__ import annotations

import re
from typing import List

__all__ = ["WAIT", "wait_first"]

#: What the wait's call looks like in LLVM IR text.
WAIT = 'asm sideeffect "wgmma.wait_group.sync.aligned'
#: LLVM instructions without side effects or memory access: moving one later in its block changes nothing.
_PURE_OPCODES = frozenset(
    "add sub mul udiv sdiv urem srem shl lshr ashr and or xor fadd fsub fmul fdiv frem fneg icmp fcmp select "
    "zext sext trunc fptrunc fpext fptoui fptosi uitofp sitofp ptrtoint inttoptr bitcast addrspacecast "
    "getelementptr extractvalue insertvalue extractelement insertelement shufflevector freeze".split())
_DEFINITION = re.compile(r'^\s+(%(?:"[^"]*"|[-\w$.]+)) = (\w+) ')
_NAME = re.compile(r'%(?:"[^"]*"|[-\w$.]+)')


def wait_first(llir: str) -> str:
    """``llir`` (LLVM IR text, every instruction named) with each block-opening ``wgmma.wait_group``
    moved ahead of the pure instructions before it that it does not use."""
    lines = llir.split("\n")
    for at in [i for i, line in enumerate(lines) if WAIT in line]:
        _hoist(lines, at)
    return "\n".join(lines)


def _hoist(lines: List[str], wait: int) -> None:
    """Move the wait at ``lines[wait]`` up past the pure run before it, if that run starts its block."""
    start = wait
    while start > 0:
        match = _DEFINITION.match(lines[start - 1])
        if not match or match.group(2) not in _PURE_OPCODES:
            break
        start -= 1
    previous = lines[start - 1] if start else ""
    opens_block = previous.split(";")[0].rstrip().endswith(":") or " = phi " in previous
    if start == wait or not opens_block:
        return
    run = lines[start:wait]
    needed = set(_NAME.findall(lines[wait].split(" = ", 1)[-1]))
    keep = []
    for line in reversed(run):  # a run instruction stays before the wait if the wait (or one that stays) uses it
        name = _DEFINITION.match(line).group(1)
        if name in needed:
            keep.append(line)
            needed.update(_NAME.findall(line.split(" = ", 1)[1]))
    keep.reverse()
    moved = [line for line in run if line not in keep]
    lines[start:wait + 1] = keep + [lines[wait]] + moved
