"""LLVM IR → PTX with llvmlite's NVPTX back end.

The lowering builds an ``llvmlite.ir.Module``; this module verifies it, runs an IR pass
pipeline (LLVM's O3 by default), puts block-opening ``wgmma.wait_group`` back ahead of the pure
code O3 sank in front of them (:mod:`.wgmma_wait`), runs NVPTX code generation (always at O3)
and prints PTX.  The PTX's ``.version`` follows the target (see
:mod:`gluonkit.lower.backend.targets`).

The ``"light"`` pipeline (instcombine + simplifycfg) is kept for measurements: the lowering's IR
is already explicit and ptxas optimizes again, and on the WS GEMM it cut the IR passes from
70 to 8 ms, ptxas's work by 11% and the SASS from 1223 to 921 instructions (same registers,
same main loop), but the ping-pong WS GEMM ran 5% slower with it at 8192³ on the H100
(``benchmarks/llvm_opt_levels.py``, 2026-11-25), so O3 stays the default; see docs/compiler.rst
("Compile time").
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm
import llvmlite.ir as lir

from .targets import Target
from .wgmma_wait import WAIT, wait_first

__all__ = ["NVPTX_TRIPLE", "NVPTX_DATA_LAYOUT", "emit_ptx", "new_module"]

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
NVPTX_DATA_LAYOUT = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"


@functools.lru_cache(maxsize=None)
def _initialized() -> bool:
    for init in ("initialize_all_targets", "initialize_all_asmprinters"):
        fn = getattr(llvm, init, None)
        if fn is not None:
            fn()
    return True


@functools.lru_cache(maxsize=None)
def _target_machine(arch: str, features: str, opt: int) -> "llvm.TargetMachine":
    _initialized()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    return target.create_target_machine(cpu=arch, features=features, opt=opt)


def new_module(name: str) -> lir.Module:
    """An empty LLVM module set up for the NVPTX target, with its own type context (named
    struct types, :func:`gluonkit.lower.llvm_types.struct_type`, are declared per module)."""
    module = lir.Module(name=name, context=lir.Context())
    module.triple = NVPTX_TRIPLE
    module.data_layout = NVPTX_DATA_LAYOUT
    return module


#: The IR passes of the ``"light"`` pipeline (see :func:`emit_ptx`).
LIGHT_PASSES = ("instruction_combine", "simplify_cfg")


def _run_passes(parsed: "llvm.ModuleRef", tm: "llvm.TargetMachine", pipeline: str) -> None:
    """Run ``pipeline``'s IR passes on ``parsed``: LLVM's ``"O1"``-``"O3"``, ``"light"`` or ``"none"``."""
    if pipeline == "none":
        return
    if pipeline == "light":
        pm = llvm.create_new_module_pass_manager()
        for name in LIGHT_PASSES:
            getattr(pm, f"add_{name}_pass")()
        pm.run(parsed, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1)))
        return
    if pipeline not in ("O1", "O2", "O3"):
        raise ValueError(f"unknown LLVM pipeline {pipeline!r}: use 'light', 'none', 'O1', 'O2' or 'O3'")
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=int(pipeline[1])))
    pb.getModulePassManager().run(parsed, pb)


def emit_ptx(module: lir.Module | str, target: Target, pipeline: str = "O3") -> tuple[str, str]:
    """Verify, optimize and compile ``module``; returns ``(optimized LLVM IR, PTX)``.

    ``pipeline`` names the IR passes (:func:`_run_passes`); code generation always runs at O3."""
    tm = _target_machine(target.arch, target.llvm_features, 3)
    # A context per module: named struct types (llvm_types.struct_type) keep their names
    # rather than piling up as floatx128.1, .2, ... in LLVM's global context.
    parsed = llvm.parse_assembly(str(module), context=llvm.create_context())
    parsed.verify()
    _run_passes(parsed, tm, pipeline)
    if WAIT in str(parsed):
        parsed = _with_waits_first(parsed, tm)
    return str(parsed), tm.emit_assembly(parsed)


def _with_waits_first(parsed: "llvm.ModuleRef", tm: "llvm.TargetMachine") -> "llvm.ModuleRef":
    """``parsed`` with every value named (so that instructions can move without renumbering)
    and :func:`.wgmma_wait.wait_first` applied."""
    namer = llvm.create_new_module_pass_manager()
    namer.add_instruction_namer_pass()
    namer.run(parsed, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options()))
    moved = llvm.parse_assembly(wait_first(str(parsed)), context=llvm.create_context())
    moved.verify()
    return moved
