"""What ``kernel.warmup(*args, grid=...)`` returns: a kernel compiled for one specialization.

``handle = kernel.warmup(x, y, out, n, BLOCK=1024, num_warps=4, grid=(1,))`` compiles and
loads the kernel for the types, divisibility and compile-time values of those arguments
without launching it (as Triton's ``warmup``); ``handle[grid](x, y, out, n)`` then launches
it with the least Python per call: no binding of keywords, no constexpr handling, no cache
lookup — only a check that each runtime argument still has the type and divisibility the
kernel was compiled for (a mismatch raises :class:`~gluonkit.lang.errors.ArgumentError`
rather than running a kernel specialized for other values), the argument block packed in
place and ``cuLaunchKernel``.

A launcher takes the kernel's parameters positionally, either all of them (compile-time
ones are ignored, as Triton's compiled kernels do) or only the runtime ones, and an
optional ``stream=`` (a raw ``CUstream`` handle, a ``torch.cuda.Stream``, a CuPy stream;
default: torch's current stream, see :func:`gluonkit.runtime.gpu.current_stream`).
``handle[grid]`` evaluates and checks the grid once, so keeping ``launcher = handle[grid]``
saves that per call.  Under ``GLUONKIT_INTERPRET`` the handle runs the kernel in the
interpreter with the compile-time values it was warmed up with.
"""

from __future__ import annotations

import operator
from functools import partial
from typing import Any, Callable, Optional, Sequence, Tuple

from ..lang.errors import ArgumentError
from . import fastlaunch
from .gpu import CompiledLaunch, signature_and_raw, stream_handle, stream_reader

__all__ = ["PrecompiledKernel"]

_MAX_LAUNCHERS = 64


class PrecompiledKernel:
    """A kernel compiled and loaded for one specialization (see the module docstring).

    ``asm`` and ``metadata`` are the compiled kernel's (``None`` in the interpreter).
    """

    def __init__(self, kernel, runtime_names: Sequence[str], signatures: Tuple[Any, ...],
                 entry: Optional[CompiledLaunch], interpret: Optional[Callable] = None):
        self.kernel = kernel
        self.runtime_names = list(runtime_names)
        self._slots = [kernel.arg_names.index(n) for n in runtime_names]
        self._signatures = signatures
        self._entry = entry
        self._interpret = interpret  # (grid, runtime values) -> None, under GLUONKIT_INTERPRET
        self._launchers: dict = {}  # grid -> its launch function
        self._fast = None if entry is None else fastlaunch.build(  # see _launcher
            entry, signatures, range(len(signatures)), self._launch_slowly, kind=fastlaunch.HANDLE,
            stream_of=stream_reader(), stream_handle=stream_handle)
        self.asm = entry.compiled.asm if entry is not None else None
        self.metadata = entry.compiled.metadata if entry is not None else None

    def __getitem__(self, grid) -> Callable:
        launcher = self._launchers.get(grid) if type(grid) is tuple else None
        if launcher is None:
            launcher = self._launcher(grid)
            if type(grid) is tuple:
                if len(self._launchers) >= _MAX_LAUNCHERS:  # grids that vary per call: keep the memory bounded
                    self._launchers.clear()
                self._launchers[grid] = launcher
        return launcher

    def _launcher(self, grid) -> Callable:
        """The launch function over ``grid`` (checked here, once)."""
        grid = self._grid(grid)
        entry, prepare = self._entry, self._prepare
        if entry is None:
            interpret = self._interpret
            return lambda *args, stream=None: interpret(grid, prepare(args)[0])
        if 0 in grid:  # nothing to run; the arguments are still checked
            return lambda *args, stream=None: prepare(args) and None
        if self._fast is not None:  # it launches, or hands the call to _launch_slowly
            return partial(self._fast, grid)
        launch_slowly = self._launch_slowly  # runtime arguments with no generated check (CuPy arrays, tuples)
        return lambda *args, stream=None: launch_slowly(grid, args, stream)

    def _launch_slowly(self, grid, args, stream) -> None:
        """Launch with every parameter given, or arguments the generated launch did not take
        (CuPy or DLPack arrays, tuples, an empty grid, a driver error), or a mismatch to report."""
        values, raw = self._prepare(args)
        self._entry.run(grid, values, raw, None if stream is None else stream_handle(stream))

    def _prepare(self, args) -> Tuple[Sequence[Any], Optional[list]]:
        """``(runtime arguments among args, their raw block values)``, checked against the
        compiled specialization; the raw list is None when some value needs converting."""
        if len(args) != len(self._slots):
            if len(args) != len(self.kernel.arg_names):
                raise ArgumentError(
                    f"{self.kernel.__name__}'s warmed-up kernel takes its {len(self.kernel.arg_names)} parameters "
                    f"{self.kernel.arg_names} or only its runtime ones {self.runtime_names}, positionally; got "
                    f"{len(args)} arguments", self.kernel.def_location())
            args = [args[i] for i in self._slots]
        raw = []
        for i, expected in enumerate(self._signatures):
            signature, part = signature_and_raw(args[i])
            if signature != expected:
                self._mismatch(i, args[i])
            raw.append(part)
        return args, None if None in raw else raw

    def _mismatch(self, i: int, value) -> None:
        expected, found = _describe(self._signatures[i]), _describe(signature_and_raw(value)[0])
        raise ArgumentError(
            f"{self.kernel.__name__}'s warmed-up kernel was compiled for parameter '{self.runtime_names[i]}' being "
            f"{expected}, got {found}; launch with {self.kernel.__name__}[grid](...) (which compiles what it "
            "needs) or warm up again with such arguments", self.kernel.def_location())

    def _grid(self, grid) -> Tuple[int, int, int]:
        """``grid`` as 3 ints; numpy integers count as ints, as in ``kernel[grid]``."""
        values = None
        if isinstance(grid, tuple) and 1 <= len(grid) <= 3:
            try:
                values = tuple(operator.index(g) for g in grid)
            except TypeError:
                pass
        if values is None or min(values) < 0:
            raise ArgumentError(f"{self.kernel.__name__}'s warmed-up kernel needs a grid of 1 to 3 non-negative "
                                f"ints, got {grid!r}", self.kernel.def_location())
        return values + (1,) * (3 - len(values))

    def __repr__(self) -> str:
        where = "interpreter" if self._entry is None else self._entry.compiled.target
        return f"PrecompiledKernel({self.kernel.__name__}, {where}, runtime parameters {self.runtime_names})"


def _describe(signature) -> str:
    """Words for a :func:`~gluonkit.runtime.gpu.signature_of` summary (errors only)."""
    if signature is None:
        return "a compile-time value (None or gl.constexpr)"
    kind = signature[0]
    if kind is int:
        return f"an int{signature[1]} {'' if signature[2] else 'not '}divisible by 16"
    if kind is float or kind is bool:
        return f"a {kind.__name__}"
    if len(signature) == 3 and not isinstance(kind, type):  # a torch CUDA tensor
        aligned = "" if signature[2] else "not "
        return f"a {signature[0]} tensor on cuda:{signature[1]}, {aligned}16-byte aligned"
    return repr(signature)
