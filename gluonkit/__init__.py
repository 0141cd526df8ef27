"""gluonkit: a Python kernel language for NVIDIA GPUs with explicit layouts.

The programmer decides where every element lives (distributed, shared and tensor-memory
layouts), when asynchronous work completes (mbarriers) and which warps do what; a thin
compiler maps these decisions to LLVM IR and PTX, and a CPU interpreter runs the same IR.
See ``docs/`` and the design notes in ``docs/design.rst``.
"""

from ._version import __version__

from .ir.diagnostics import CompilationError
from .lang.aggregate import aggregate
from .lang.callables import constexpr_function, must_use_result
from .lang.constexpr import constexpr
from .lang.jit import JITFunction, jit


from .runtime import inspect_compile as _inspect_compile  # noqa: E402,F401  (registers kernel.compile)
from .runtime import launch as _launch  # noqa: E402,F401  (registers the launcher with lang.jit)


def cdiv(x: int, y: int) -> int:
    """``ceil(x / y)`` for positive ints: the number of programs covering ``x`` items by ``y``."""
    return (x + y - 1) // y


__all__ = ["jit", "JITFunction", "constexpr", "aggregate", "constexpr_function", "must_use_result",
           "CompilationError", "cdiv", "__version__"]
