"""LLVM IR → PTX with llvmlite's NVPTX back end.

The lowering builds an ``llvmlite.ir.Module``; this module verifies it, runs a few IR passes
and NVPTX code generation (at O3) and prints PTX.  The PTX's ``.version`` follows the target
(see :mod:`gluonkit.lower.backend.targets`).

Why only instcombine and simplifycfg rather than LLVM's O3 pipeline: the IR the lowering
builds is already explicit (no allocas, calls or generic loops to analyse), and ptxas
optimizes again (CSE, loop-invariant motion, unrolling, scheduling).  O3 cost 70 ms of the
WS GEMM's cold compile and gave ptxas more to do: it unrolled the TMA producer's loop three
times and hoisted 32 epilogue addresses out of the persistent loop, so ptxas took 7% longer
and made 1223 SASS instructions instead of 921 (same registers, same main loop).  Over 99
kernels of the test suite the light pipeline's SASS was the same or smaller for most; see
docs/compiler.rst ("Compile time").
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm
import llvmlite.ir as lir

from .targets import Target

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


def emit_ptx(module: lir.Module | str, target: Target, pipeline: str = "light") -> tuple[str, str]:
    """Verify, optimize and compile ``module``; returns ``(optimized LLVM IR, PTX)``.

    ``pipeline`` names the IR passes (:func:`_run_passes`); code generation always runs at O3."""
    tm = _target_machine(target.arch, target.llvm_features, 3)
    # A context per module: named struct types (llvm_types.struct_type) keep their names
    # rather than piling up as floatx128.1, .2, ... in LLVM's global context.
    parsed = llvm.parse_assembly(str(module), context=llvm.create_context())
    parsed.verify()
    _run_passes(parsed, tm, pipeline)
    return str(parsed), tm.emit_assembly(parsed)
