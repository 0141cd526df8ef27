"""``kernel.compile(...)``: compile a kernel for inspection, without a GPU.

Runtime arguments are given as examples (numpy arrays, torch/CuPy tensors, numbers,
``TensorDescriptor`` objects, IR types such as ``ir.TensorDescType(...)``) or as
Triton-style type strings: ``"*fp32"`` (pointer), ``"i32"``, ``"fp16"``; a ``:16`` suffix
(``"*fp32:16"``, ``"i32:16"``) declares divisibility by 16.  A tuple argument is a tuple
of these (``gl.constexpr`` values for its compile-time elements).  Example integers and array
addresses divisible by 16 are specialized as a launch would.  ``asm["sass"]`` is added when
``cuobjdump`` or ``nvdisasm`` is found (``gluonkit.lower.backend.cuda_tools``).
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

from .. import ir
from ..lang.constexpr import constexpr, unwrap
from ..lang.errors import ArgumentError
from ..lang.jit import JITFunction, set_compiler
from ..lang.launch_options import check_launch_options
from ..lower.backend.cuda_tools import disassemble, find_disassembler
from ..lower.compiler import CompiledKernel, compile_function
from .args import ir_type_of

__all__ = ["compile_kernel", "parse_type_string"]

_SCALARS = {
    "i1": ir.int1, "i8": ir.int8, "i16": ir.int16, "i32": ir.int32, "i64": ir.int64,
    "u8": ir.uint8, "u16": ir.uint16, "u32": ir.uint32, "u64": ir.uint64,
    "fp16": ir.float16, "bf16": ir.bfloat16, "fp32": ir.float32, "fp64": ir.float64,
    "fp8e4nv": ir.float8e4nv, "fp8e5": ir.float8e5,
}


def parse_type_string(text: str):
    """``(ir type, divisible by 16)`` of a type string such as ``"*bf16:16"``."""
    body, _, hint = text.partition(":")
    if hint not in ("", "16"):
        raise ValueError(f"type string {text!r}: the only divisibility hint is ':16'")
    pointer = body.startswith("*")
    name = body[1:] if pointer else body
    if name not in _SCALARS:
        raise ValueError(f"type string {text!r}: unknown type {name!r}; known: {', '.join(_SCALARS)}")
    ty = ir.PointerType(_SCALARS[name]) if pointer else _SCALARS[name]
    return ty, hint == "16"


def _example_type(name: str, value):
    if isinstance(value, str):
        return parse_type_string(value)
    if isinstance(value, (ir.DType, ir.PointerType, ir.TensorDescType)):
        return value, False
    ty = ir_type_of(value, name)
    if isinstance(ty, ir.TensorDescType):
        return ty, False
    if isinstance(ty, ir.PointerType):
        address = value.data_ptr() if hasattr(value, "data_ptr") else value.__array_interface__["data"][0]
        return ty, address % 16 == 0
    if ty.is_int() and not ty.is_bool():
        return ty, int(value) % 16 == 0
    return ty, False


def _argument_type(kernel: JITFunction, name: str, value, specialization: dict):
    """The IR type of one example argument (a tuple of types for a tuple, with ``gl.constexpr``
    for its compile-time elements); divisibility facts go to ``specialization`` by flat name."""
    if type(value) is tuple:
        return tuple(_argument_type(kernel, f"{name}_{i}", v, specialization) for i, v in enumerate(value))
    if value is None or isinstance(value, constexpr):
        return constexpr(value)
    try:
        ty, divisible = _example_type(name, value)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"compiling {kernel.__name__}: parameter {name!r}: {e}", kernel.def_location()) from None
    if divisible:
        specialization[name] = {"divisibility": 16}
    return ty


def compile_kernel(kernel: JITFunction, args: Sequence[Any], target: str, options: Dict[str, Any],
                   constexprs: Dict[str, Any], instrument=False) -> CompiledKernel:
    """Build, infer, lower and assemble ``kernel`` for ``target`` with the launch ``options``
    (``num_warps``, ``num_ctas``, ``maxnreg``); see the module docstring.  ``instrument``: the
    measured-timeline variant (:mod:`gluonkit.lower.instrument`)."""
    check_launch_options(options, kernel.def_location())
    constexprs = {k: unwrap(v) for k, v in constexprs.items()}
    runtime = [n for n in kernel.arg_names if n not in constexprs and n not in kernel.constexpr_names]
    if len(args) != len(runtime):
        raise ArgumentError(f"compiling {kernel.__name__}: expected {len(runtime)} runtime arguments "
                            f"({', '.join(runtime)}), got {len(args)}", kernel.def_location())
    specialization: Dict[str, Dict[str, int]] = {}
    arg_types = [_argument_type(kernel, name, value, specialization) for name, value in zip(runtime, args)]
    func = kernel.build_ir(arg_types, constexprs, options["num_warps"], specialization, options["num_ctas"],
                           options["maxnreg"])
    compiled = compile_function(func, target, instrument=instrument)
    if "cubin" in compiled.asm and find_disassembler() is not None:
        compiled.asm["sass"] = disassemble(compiled.asm["cubin"])
    return compiled


set_compiler(compile_kernel)
