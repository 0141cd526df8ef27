"""The compilation pipeline after the frontend: inference, verification, LLVM, PTX, cubin.

:func:`compile_function` takes an IR function (possibly with ``AutoLayout`` values) and
returns a :class:`CompiledKernel` whose ``asm`` holds every stage (``ir``, ``llir``,
``ptx`` and, when ptxas is found, ``cubin``) and whose ``metadata`` says what a launch
needs (threads, dynamic shared memory), what ptxas reported (registers, spills) and, for
warp-specialized kernels, each partition's warps and register budget (``partitions``).
``GLUONKIT_DUMP_DIR`` writes every stage to files named after the kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Optional

from ..ir import Function, print_function, verify
from .codegen import lower_to_llvm
from .ops.warp_specialize import partition_report
from .infer.solve import infer_layouts
from .backend.nvptx import emit_ptx
from .backend.ptxas import ResourceUsage, assemble, find_ptxas
from .backend.targets import get_target

__all__ = ["CompiledKernel", "compile_function", "dump_stages"]


@dataclass
class CompiledKernel:
    """Every stage of one compiled kernel, and what launching it needs."""

    name: str
    target: str
    asm: Dict[str, object] = field(default_factory=dict)
    metadata: Dict[str, object] = field(default_factory=dict)


def compile_function(func: Function, target: str = "sm_90a", assemble_cubin: Optional[bool] = None,
                     instrument=False) -> CompiledKernel:
    """Compile ``func`` for ``target``; the cubin is made when ptxas is available.

    ``instrument`` (``True``, a number of events per warp, a level or both:
    :func:`.instrument.timeline_options`) builds the measured-timeline variant (:mod:`.instrument`):
    its metadata's ``timeline`` holds the event table, the per-warp capacity of the event buffer
    and the level.
    """
    tgt = get_target(target)
    infer_layouts(func)
    verify(func, concrete=True)
    ir_text = print_function(func)
    ctx_module = lower_to_llvm(func, tgt, instrument)
    llir, ptx = emit_ptx(ctx_module.module, tgt)
    kernel = CompiledKernel(func.name, target)
    kernel.asm.update(ir=ir_text, llir=llir, ptx=ptx)
    kernel.metadata.update(
        num_warps=func.num_warps,
        num_ctas=func.num_ctas,
        num_threads=ctx_module.num_threads,
        shared=ctx_module.shared_bytes,
        arg_types=[a.type for a in func.args],
        partitions=partition_report(ctx_module),
    )
    if ctx_module.instrumentation is not None:
        kernel.metadata["timeline"] = {"events": ctx_module.instrumentation.table,
                                       "capacity": ctx_module.instrumentation.capacity,
                                       "level": ctx_module.instrumentation.events}
    if assemble_cubin is None:
        assemble_cubin = find_ptxas() is not None
    usage = ResourceUsage()
    if assemble_cubin:
        cubin, usage = assemble(ptx, tgt.arch)
        kernel.asm["cubin"] = cubin
    kernel.metadata.update(
        registers=usage.registers, spill_stores=usage.spill_stores, spill_loads=usage.spill_loads,
        stack_frame=usage.stack_frame, ptxas_notes=list(usage.notes),
    )
    dump_stages(kernel)
    return kernel


def dump_stages(kernel: CompiledKernel) -> None:
    """Write every stage of ``kernel`` to ``GLUONKIT_DUMP_DIR`` (nothing when it is unset)."""
    directory = os.environ.get("GLUONKIT_DUMP_DIR")
    if not directory:
        return
    os.makedirs(directory, exist_ok=True)
    for stage, text in kernel.asm.items():
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(os.path.join(directory, f"{kernel.name}.{stage}"), mode) as f:
            f.write(text)
