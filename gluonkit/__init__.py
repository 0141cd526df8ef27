"""gluonkit: a Python kernel language for NVIDIA GPUs with explicit layouts.

The programmer decides where every element lives (distributed, shared and tensor-memory
layouts), when asynchronous work completes (mbarriers) and which warps do what; a thin
compiler maps these decisions to LLVM IR and PTX, and a CPU interpreter runs the same IR.
See ``docs/`` and the design notes in ``docs/design.rst``.

The import tree is Gluon 3.9's (``triton.experimental.gluon``): ``gluonkit`` (``jit`` …),
``gluonkit.language`` (``gl``) and ``gluonkit.nvidia`` (host ``TensorDescriptor``); see
``docs/porting.rst``.
"""

from ._version import __version__

from .ir.diagnostics import CompilationError
from .lang.aggregate import aggregate
from .lang.callables import constexpr_function, must_use_result
from .lang.constexpr import constexpr
from .lang.jit import JITFunction, jit
from .lang.unsupported import TOP as _TOP, install as _install
from . import language, nvidia  # noqa: E402  (Gluon's tree: gluonkit.language, gluonkit.nvidia)

GluonJITFunction = JITFunction  # Gluon's name for what @jit returns


from .runtime import inspect_compile as _inspect_compile  # noqa: E402,F401  (registers kernel.compile)
from .runtime import launch as _launch  # noqa: E402,F401  (registers the launcher with lang.jit)
from .runtime.autotune import Config, autotune, heuristics  # noqa: E402


def cdiv(x: int, y: int) -> int:
    """``ceil(x / y)`` for positive ints: the number of programs covering ``x`` items by ``y``."""
    return (x + y - 1) // y


__all__ = ["jit", "JITFunction", "GluonJITFunction", "constexpr", "aggregate", "constexpr_function",
           "must_use_result", "CompilationError", "cdiv", "language", "nvidia",
           "__version__", "autotune", "Config", "heuristics"]
# Gluon 3.9's top-level names whose feature is not built yet (defining one above replaces its stub).
__all__ += _install(globals(), _TOP)
