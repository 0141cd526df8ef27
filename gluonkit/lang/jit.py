"""``@gluonkit.jit``: kernels and device functions, their IR builds and their launch.

A :class:`JITFunction` keeps the Python function, its source and where it sits in its file.
:meth:`JITFunction.build_ir` turns it into an :class:`~gluonkit.ir.Function` for one
specialization (runtime argument types, constexpr values, launch options, divisibility facts)
and caches the result by that specialization.  ``kernel[grid](*args, **kw)`` forwards to the
launcher the runtime registers with :func:`set_launcher` (``lang/`` may not import
``runtime/``), called as ``launcher(kernel, grid, args, kwargs)`` — or, where the runtime gave the kernel a generated
launch (``kernel._fast_launch``), is that function with the grid bound; ``kernel.warmup(*args, grid=...)`` forwards
to the function registered with :func:`set_warmer` the same way.  A ``@jit`` function
called from another one is inlined by the frontend; called from plain Python it raises.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import textwrap
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..ir import Builder, Function, verify
from ..ir.diagnostics import Location
from .codegen import CodeGenerator
from .constexpr import is_constexpr_annotation, unwrap
from .errors import ArgumentError, CompilationError, ConstexprRequiredError
from .kernel_params import flatten_params, param_values
from .launch_options import check_launch_options, split_launch_options
from .semantic import Semantic

__all__ = ["JITFunction", "jit", "set_launcher", "set_warmer", "set_compiler"]

_launcher: Optional[Callable] = None
_partial = functools.partial  # kernel[grid]'s binding, read as a global (no attribute lookup per launch)
_warmer: Optional[Callable] = None
_compiler: Optional[Callable] = None


def set_launcher(fn: Callable) -> None:
    """Register ``fn(kernel, grid, args, kwargs)``, which ``kernel[grid](*args, **kwargs)`` calls."""
    global _launcher
    _launcher = fn


def set_warmer(fn: Callable) -> None:
    """Register ``fn(kernel, grid, args, kwargs)``, which ``kernel.warmup(*args, grid=grid, **kwargs)`` calls."""
    global _warmer
    _warmer = fn


def set_compiler(fn: Callable) -> None:
    """Register ``fn(kernel, args, target, options, constexprs)``, which ``kernel.compile`` calls
    (``options``: every launch option, see :mod:`.launch_options`)."""
    global _compiler
    _compiler = fn


class JITFunction:
    """A ``@gluonkit.jit`` function (see the module docstring)."""

    __gluonkit_jit__ = True

    def __init__(self, fn: Callable, **options):
        if not inspect.isfunction(fn):
            raise TypeError(f"@gluonkit.jit decorates a function, got {fn!r}")
        self.fn = fn
        self.signature = inspect.signature(fn)
        self.arg_names: List[str] = list(self.signature.parameters)
        self.constexpr_names: List[str] = [
            n for n, p in self.signature.parameters.items() if is_constexpr_annotation(p.annotation)]
        self.file = inspect.getsourcefile(fn) or fn.__code__.co_filename
        try:
            lines, self.first_line = inspect.getsourcelines(fn)
        except OSError as e:
            raise TypeError(f"@gluonkit.jit needs the source code of {fn.__qualname__} (define it in a file): {e}") \
                from None
        self.first_line = max(self.first_line, 1)
        self.source_lines = lines
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        self.src = textwrap.dedent("".join(lines))
        self.globals = fn.__globals__
        self._tree: Optional[ast.FunctionDef] = None
        self.cache: Dict[Any, Function] = {}
        self.options = dict(options)
        # A function (grid, *args, **kwargs) that launches the kernel's latest call pattern with
        # the least work and hands any other call to the launcher itself; set and cleared by the
        # runtime's launcher (gluonkit.runtime.launch).  kernel[grid] is it with the grid bound.
        self._fast_launch: Optional[Callable] = None
        # (grid, fast launch, the fast launch with that grid bound) of the last kernel[grid]: a loop
        # launching with the same grid object gets the same partial back instead of a new one.
        self._bound: Tuple[Any, Optional[Callable], Optional[Callable]] = (None, None, None)
        functools.update_wrapper(self, fn)

    # ---------------------------------------------------------------- source
    def parse(self) -> ast.FunctionDef:
        """The function's AST (parsed once)."""
        if self._tree is None:
            module = ast.parse(self.src)
            defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if len(defs) != 1 or isinstance(defs[0], ast.AsyncFunctionDef):
                raise CompilationError(f"@jit needs a plain function definition, got:\n{self.src}", self.def_location())
            self._tree = defs[0]
        return self._tree

    def location(self, lineno: int, col: int, inlined_at: Optional[Location] = None) -> Location:
        """The file location of AST position (``lineno``, ``col``) of the dedented source."""
        text = self.source_lines[lineno - 1] if 0 < lineno <= len(self.source_lines) else ""
        return Location(self.file, self.first_line + lineno - 1, col + self.indent, self.fn.__name__,
                        text.rstrip("\n"), inlined_at)

    def def_location(self) -> Location:
        for i, line in enumerate(self.source_lines):
            if line.lstrip().startswith("def "):
                return self.location(i + 1, len(line) - len(line.lstrip()) - self.indent)
        return self.location(1, 0)

    def closure_vars(self) -> Dict[str, Any]:
        """The function's closure variables by name (read at build time)."""
        cells = self.fn.__closure__ or ()
        out = {}
        for name, cell in zip(self.fn.__code__.co_freevars, cells):
            try:
                out[name] = cell.cell_contents
            except ValueError:  # an unfilled cell: not defined yet
                pass
        return out

    # ----------------------------------------------------------------- build
    def build_ir(self, arg_types: Sequence, constexprs: Optional[Dict[str, Any]] = None, num_warps: int = 4,
                 specialization: Optional[Dict[str, Dict[str, int]]] = None, num_ctas: int = 1,
                 maxnreg: Optional[int] = None) -> Function:
        """The IR of this kernel for one specialization (cached; see the module docstring).

        ``arg_types`` gives one type (DType, PointerType or TensorDescType, or a tuple of them
        for a tuple argument) per runtime parameter, in signature order (see
        :mod:`.kernel_params`); runtime parameters are those not in ``constexprs``.  Parameters annotated ``gl.constexpr`` must be in ``constexprs`` or have a default.
        ``specialization[name] == {"divisibility": 16}`` marks a runtime argument divisible by 16.
        ``num_warps``, ``num_ctas`` and ``maxnreg`` are the launch options (:mod:`.launch_options`).
        """
        constexprs = {k: unwrap(v) for k, v in (constexprs or {}).items()}
        specialization = dict(specialization or {})
        debug = self.debug_enabled()
        key = (tuple(arg_types), _freeze(constexprs), num_warps, _freeze(specialization), num_ctas, maxnreg, debug)
        cached = self.cache.get(key)
        if cached is None:
            cached = self.cache[key] = self._build(list(arg_types), constexprs, num_warps, specialization, num_ctas,
                                                   maxnreg, debug)
        return cached

    def debug_enabled(self) -> bool:
        """Whether ``gl.device_assert`` (and runtime ``assert``) are compiled in: with
        ``@jit(debug=True)`` or ``GLUONKIT_DEBUG=1`` in the environment (Gluon's ``debug``
        option and ``TRITON_DEBUG``)."""
        if self.options.get("debug") is not None:
            return bool(self.options["debug"])
        return os.environ.get("GLUONKIT_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")

    def _build(self, arg_types, constexprs, num_warps, specialization, num_ctas=1, maxnreg=None,
               debug=False) -> Function:
        loc = self.def_location()
        check_launch_options({"num_warps": num_warps, "num_ctas": num_ctas, "maxnreg": maxnreg}, loc)
        unknown = sorted(set(constexprs) - set(self.arg_names))
        if unknown:
            raise ArgumentError(f"{self.__name__} has no parameter(s) {unknown}; its parameters are "
                                f"{self.arg_names}", loc)
        runtime = [n for n in self.arg_names if n not in constexprs]
        values: Dict[str, Any] = {}
        for name in list(runtime):
            if name in self.constexpr_names:
                default = self.signature.parameters[name].default
                if default is inspect.Parameter.empty:
                    raise ConstexprRequiredError(f"the gl.constexpr parameter '{name}' of {self.__name__} was given "
                                                 "no compile-time value", loc)
                values[name] = unwrap(default)
                runtime.remove(name)
        if len(arg_types) != len(runtime):
            raise ArgumentError(f"{self.__name__} takes {len(runtime)} runtime argument(s) {runtime}, got "
                                f"{len(arg_types)} type(s)", loc)
        flat_types, flat_names = flatten_params(runtime, arg_types, loc)
        func = Function(self.__name__, flat_types, flat_names, loc=loc, constexprs=constexprs,
                        specialization=specialization, num_warps=num_warps, maxnreg=maxnreg,
                        num_ctas=num_ctas)
        sem = Semantic(Builder(func.body), num_warps, num_ctas)
        sem.debug = debug
        sem.maxnreg = maxnreg  # warp_specialize's register plan starts from it
        sem.builder.loc = loc
        values.update(param_values(runtime, arg_types, iter(func.args), sem, specialization))
        values.update(constexprs)
        scope = {n: values[n] for n in self.arg_names}
        CodeGenerator(sem, self, scope, is_kernel=True).run()
        sem.builder.loc = loc
        sem.create("return", [], [])
        verify(func)
        return func

    # ---------------------------------------------------------------- launch
    def __getitem__(self, grid):
        fast = self._fast_launch
        bound = self._bound
        if bound[0] is grid and bound[1] is fast and fast is not None:  # the same grid object: no new partial
            return bound[2]
        if fast is not None:  # it takes the call's arguments directly, and the general path where it must
            launcher = _partial(fast, grid)
            self._bound = (grid, fast, launcher)
            return launcher

        def launch(*args, **kwargs):
            if _launcher is None:
                raise RuntimeError("no kernel launcher is registered; import gluonkit (which registers "
                                   "gluonkit.runtime.launch) before launching kernels")
            return _launcher(self, grid, args, kwargs)

        return launch

    def run(self, *args, grid, warmup=False, num_stages=None, maxnreg=None, **kwargs):
        """Launch as Triton's ``KernelInterface.run`` does, so that ``@triton.autotune`` and
        ``@triton.heuristics`` (which call ``fn.run(*args, grid=..., warmup=..., **config)``)
        drive a gluonkit kernel, as Gluon's own tutorials do with ``@gluon.jit``.

        ``num_stages`` is ignored, as in Gluon (pipelines are written by hand); ``maxnreg``
        goes to the launch when set; ``warmup=True`` compiles without launching (:meth:`warmup`).
        """
        if maxnreg is not None:
            kwargs["maxnreg"] = maxnreg
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        return self[grid](*args, **kwargs)

    def warmup(self, *args, grid, **kwargs):
        """Compile and load the kernel for these arguments without launching it, as Triton's
        ``warmup``; returns a :class:`gluonkit.runtime.precompiled.PrecompiledKernel` whose
        ``handle[grid](*args)`` is the fastest launch.  Later ``kernel[grid](...)`` calls with
        such arguments find the kernel loaded too (so warming up before a CUDA graph capture
        makes the captured launches possible)."""
        if _warmer is None:
            raise RuntimeError("no kernel launcher is registered; import gluonkit before warming up kernels")
        return _warmer(self, grid, args, kwargs)

    def compile(self, *args, target: str = "sm_90a", instrument=False, **kwargs):
        """Compile without launching (no GPU needed) and return the compiled kernel.

        ``args`` are the runtime arguments as examples (arrays, tensors, numbers) or as type
        strings (``"*fp32"``, ``"i32"``, ``"*bf16:16"`` with ``:16`` for divisible by 16);
        ``kwargs`` the launch options (``num_warps=4``, ``num_ctas=1``, ``maxnreg=None``) and the compile-time
        arguments by name, bound as a launch binds them.  The result's ``asm`` has ``ir``,
        ``llir``, ``ptx`` (and ``cubin``, ``sass`` when the CUDA tools are found) and its
        ``metadata`` registers, shared memory and spills.  ``instrument=True`` (or a number
        of events per warp, a level ``"waits"``/``"all"``, or both as a tuple) builds the measured-timeline variant
        (:mod:`gluonkit.lower.instrument`; launched through
        :func:`gluonkit.runtime.timeline.measure`).
        """
        if _compiler is None:
            raise RuntimeError("no compiler is registered; import gluonkit first")
        options, constexprs = split_launch_options(self.arg_names, kwargs)
        return _compiler(self, args, target, options, constexprs, instrument)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"{self.__name__} is a @gluonkit.jit function: launch it as {self.__name__}[grid](*args) or call it "
            "from another @gluonkit.jit function; it cannot run as plain Python")

    def __repr__(self) -> str:
        return f"JITFunction({self.__module__}:{self.__qualname__})"


def _freeze(value):
    """A hashable stand-in for a constexpr/specialization value (lists -> tuples, dicts sorted)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze(v) for v in value)
    try:
        hash(value)
        return (type(value).__name__, value)
    except TypeError:
        return (type(value).__name__, repr(value))


def jit(fn: Optional[Callable] = None, *, version=None, repr=None, launch_metadata=None,  # noqa: A002 - Gluon's names
        do_not_specialize=None, do_not_specialize_on_alignment=None, debug=None, noinline=None):
    """Decorator making a ``@gluonkit.jit`` function; ``@jit`` and ``@jit(...)`` both work.

    Gluon 3.9's parameters.  ``do_not_specialize`` (names or indices of arguments whose
    divisibility by 16 is not specialized on) and ``debug`` (compile ``device_assert`` in) are
    honoured; ``do_not_specialize_on_alignment`` is accepted as ``do_not_specialize`` (gluonkit
    specializes integers only on divisibility, not pointers on alignment); ``noinline`` is kept
    but every call is inlined; ``version``, ``repr`` and ``launch_metadata`` only name kernels
    and annotate launches for Triton's profilers and are accepted and ignored
    (docs/porting.rst lists these differences).
    """
    options = {"do_not_specialize": list(do_not_specialize or ()) + list(do_not_specialize_on_alignment or ()),
               "debug": debug, "noinline": noinline, "version": version, "repr": repr,
               "launch_metadata": launch_metadata}  # the last three kept for introspection only
    if fn is None:
        return functools.partial(JITFunction, **options)
    return JITFunction(fn, **options)

