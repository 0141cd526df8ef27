"""Ahead-of-time compilation from the command line, without a GPU:

``python -m gluonkit compile FILE.py:KERNEL --target sm_90a --signature "*fp16:16, *fp16:16, i32, 128"
--emit ptx -o kernel.ptx``

The signature has one entry per kernel parameter, in order, separated by commas (as Triton's
AOT compiler takes them): a type string (``*fp16``, ``*fp32:16``, ``i32``, ``i32:16``, ``fp32``;
``:16`` declares divisibility by 16) for a runtime argument, or a Python expression for a
compile-time one (``128``, ``True``, ``(64, 64)``, ``gl.BlockedLayout([4], [32], [4], [0])``),
evaluated in the kernel's module, so its imports and helper functions can be used.  A value
given to a parameter that is not ``gl.constexpr`` specializes it to that constant, as in Triton.  Trailing
``gl.constexpr`` parameters with defaults may be left out, and ``NAME=VALUE`` entries give any
parameter by name.  ``--num-warps``, ``--num-ctas`` and ``--maxnreg`` are the launch options.
See docs/compiler.rst ("Ahead-of-time compilation").
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..lang.errors import CompilationError
from ..lang.jit import JITFunction
from ..lower.backend.cuda_tools import disassemble
from ..lower.backend.ptxas import PtxasError
from ..lower.backend.targets import TARGETS
from .inspect_compile import parse_type_string

__all__ = ["main", "parse_signature", "load_kernel", "AotError"]

EMIT_KINDS = ("ptx", "cubin", "sass", "ir", "llir")
_TYPE_STRING = re.compile(r"\*?[a-z][a-z0-9]*(:\d+)?")  # what parse_type_string is asked to read


class AotError(Exception):
    """A mistake in the command line (path, kernel name, signature); printed without a traceback."""


def load_kernel(spec: str) -> JITFunction:
    """The ``@gluonkit.jit`` function named by ``FILE.py:KERNEL``."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise AotError(f"{spec!r}: expected FILE.py:KERNEL, e.g. examples/vector_add.py:add_kernel")
    if not os.path.isfile(path):
        raise AotError(f"{path!r}: no such file")
    module_name = f"_gluonkit_aot_{os.path.splitext(os.path.basename(path))[0]}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise AotError(f"{path!r}: not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))  # its sibling imports, as `python FILE` has
    try:
        module_spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    kernel = getattr(module, name, None)
    if not isinstance(kernel, JITFunction):
        kernels = sorted(n for n, v in vars(module).items() if isinstance(v, JITFunction))
        what = "has no" if kernel is None else f"has {type(kernel).__name__} {name!r}, not a @gluonkit.jit"
        raise AotError(f"{path} {what} kernel {name!r}; its @gluonkit.jit functions: {', '.join(kernels) or 'none'}")
    return kernel


def _split_entries(text: str) -> List[str]:
    """The comma-separated entries of ``text``; commas inside brackets or quotes do not split."""
    entries, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            entries.append(text[start:i].strip())
            start = i + 1
    entries.append(text[start:].strip())
    return [] if entries == [""] else entries


def _entry_value(kernel: JITFunction, name: str, text: str) -> Tuple[str, Any]:
    """``("type", type string)`` or ``("const", value)`` for one signature entry."""
    if not text:
        raise AotError(f"signature entry for {name!r} is empty")
    if _TYPE_STRING.fullmatch(text):
        if name in kernel.constexpr_names:
            raise AotError(f"parameter {name!r} is gl.constexpr: give it a value (e.g. 128), not the type {text!r}")
        try:
            parse_type_string(text)
        except ValueError as e:
            raise AotError(f"parameter {name!r}: {e}") from None
        return "type", text
    try:
        return "const", eval(text, dict(kernel.fn.__globals__))  # the user's own expression, in their module
    except Exception as e:  # noqa: BLE001  (any mistake in the expression is the user's to fix)
        raise AotError(f"parameter {name!r}: {text!r} is neither a type string (*fp16:16, i32, fp32) nor a "
                       f"Python expression for a compile-time value ({type(e).__name__}: {e})") from None


def parse_signature(kernel: JITFunction, text: str) -> Tuple[List[str], Dict[str, Any]]:
    """``(runtime type strings in order, compile-time values by name)`` of a signature string."""
    params = kernel.signature.parameters
    given: Dict[str, Tuple[str, Any]] = {}
    positional = True
    for index, entry in enumerate(_split_entries(text)):
        head, eq, rest = entry.partition("=")
        if eq and head.strip().isidentifier():
            name, entry, positional = head.strip(), rest.strip(), False
            if name not in params:
                raise AotError(f"{kernel.__name__} has no parameter {name!r}; its parameters: {', '.join(params)}")
        elif not positional:
            raise AotError(f"signature entry {entry!r} comes after a NAME=VALUE entry: positional ones go first")
        elif index >= len(params):
            raise AotError(f"the signature has more entries than {kernel.__name__}'s {len(params)} parameters "
                           f"({', '.join(params)})")
        else:
            name = list(params)[index]
        if name in given:
            raise AotError(f"parameter {name!r} is given twice in the signature")
        given[name] = _entry_value(kernel, name, entry)
    missing = [n for n, p in params.items() if n not in given
               and not (n in kernel.constexpr_names and p.default is not inspect.Parameter.empty)]
    if missing:
        raise AotError(f"the signature gives no entry for {', '.join(map(repr, missing))} of {kernel.__name__}"
                       f"({', '.join(params)})")
    types = [v for n in params if n in given for kind, v in [given[n]] if kind == "type"]
    constexprs = {n: v for n, (kind, v) in given.items() if kind == "const"}
    return types, constexprs


def compile_aot(spec: str, signature: str, target: str, num_warps: int = 4, num_ctas: int = 1,
                maxnreg: Optional[int] = None):
    """Compile ``FILE.py:KERNEL`` for ``target``; returns the :class:`CompiledKernel`."""
    if target not in TARGETS:
        raise AotError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    kernel = load_kernel(spec)
    types, constexprs = parse_signature(kernel, signature)
    return kernel.compile(*types, target=target, num_warps=num_warps, num_ctas=num_ctas, maxnreg=maxnreg,
                          **constexprs)


def _emitted(compiled, emit: str):
    """The bytes or text of ``emit`` from ``compiled``; a clear error when the tool it needs is missing."""
    if emit in ("cubin", "sass") and "cubin" not in compiled.asm:
        raise AotError(f"--emit {emit} needs ptxas: pip install 'gluonkit[toolchain]', put ptxas on PATH, "
                       "or set GLUONKIT_PTXAS")
    if emit == "sass":
        try:
            return disassemble(compiled.asm["cubin"])
        except (FileNotFoundError, RuntimeError) as e:
            raise AotError(str(e)) from None
    return compiled.asm[emit]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gluonkit", description="gluonkit command-line tools")
    commands = parser.add_subparsers(dest="command", required=True)
    comp = commands.add_parser("compile", help="compile a kernel ahead of time (no GPU needed)",
                               description=__doc__.split("\n\n")[1] if __doc__ else None)
    comp.add_argument("kernel", help="FILE.py:KERNEL, a @gluonkit.jit function")
    comp.add_argument("--target", default="sm_90a", help=f"one of {', '.join(TARGETS)} (default sm_90a)")
    comp.add_argument("--signature", "-s", required=True,
                      help='one entry per parameter, e.g. "*fp16:16, *fp16:16, i32, 128"')
    comp.add_argument("--emit", choices=EMIT_KINDS, default="ptx", help="what to write (default ptx)")
    comp.add_argument("-o", "--output", help="output file (default: standard output; a cubin needs -o)")
    comp.add_argument("--num-warps", type=int, default=4)
    comp.add_argument("--num-ctas", type=int, default=1)
    comp.add_argument("--maxnreg", type=int, default=None)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status (0 done, 1 bad input or compile error)."""
    args = _parser().parse_args(argv)
    try:
        compiled = compile_aot(args.kernel, args.signature, args.target, args.num_warps, args.num_ctas,
                               args.maxnreg)
        result = _emitted(compiled, args.emit)
        if isinstance(result, bytes) and not args.output:
            raise AotError(f"--emit {args.emit} is binary: give an output file with -o")
    except (AotError, CompilationError, PtxasError) as e:
        print(f"gluonkit compile: error: {e}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "wb" if isinstance(result, bytes) else "w") as f:
            f.write(result)
        print(f"wrote {args.output} ({args.emit}, {compiled.name}, {args.target}, "
              f"{compiled.metadata.get('registers', 0)} registers, {compiled.metadata.get('shared', 0)} B shared)",
              file=sys.stderr)
    else:
        sys.stdout.write(result if result.endswith("\n") else result + "\n")
    return 0
