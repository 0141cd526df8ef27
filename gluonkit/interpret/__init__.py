"""CPU interpreter of the IR on numpy (may import ir, layouts).

``run_grid(func, grid, args, memory)`` runs a fully inferred kernel once per program id.
Distributed tensors are held as per-thread register files in their layouts
(:mod:`.values`), memory is a flat simulated address space of registered numpy arrays
(:mod:`.memory`), and every IR op has one rule (:data:`RULES`), grouped by op family:
:mod:`.creation`, :mod:`.elementwise`, :mod:`.memory_ops`, :mod:`.shapes`,
:mod:`.reduce`, :mod:`.control`, :mod:`.debug`, :mod:`.shared_memory` (per-program
shared buffers and views), :mod:`.nvidia.mbarrier` (barrier phases; deadlocks), :mod:`.partitions` (warp-specialize
partitions as cooperating tasks, under the schedules of :mod:`.schedules`), :mod:`.nvidia.tma`, :mod:`.nvidia.wgmma`,
:mod:`.nvidia.async_copy` (cp.async), :mod:`.atomics`, :mod:`.inline_asm`.  Faults the hardware would not catch
raise :class:`InterpreterError` at the user's source line.  :mod:`.trace` records the
programs' barrier waits, arrivals and copies as a Chrome/Perfetto timeline
(``GLUONKIT_INTERPRET_TRACE``), which :mod:`.timeline` draws as SVG.
"""

from . import control, creation, debug, elementwise, memory_ops, partitions, reduce, shapes, shared_memory  # noqa: F401  (register rules)
from .nvidia import async_copy, clc, cluster, mbarrier, packed_arith, tcgen05, tcgen05_scaled, tma, tma_gather, tmem, wgmma  # noqa: F401  (register the hardware units' rules)
from . import atomics, inline_asm  # noqa: F401  (register the atomics' and inline assembly's rules)
from . import collective, dot_fma  # noqa: F401  (scan, histogram, gather, map_elementwise, dot_fma)
from .dtypes import numpy_dtype
from .engine import RULES, run_grid, run_program
from .errors import InterpreterError
from .memory import Memory
from .values import Tensor

__all__ = ["run_grid", "run_program", "Memory", "InterpreterError", "numpy_dtype", "RULES", "Tensor"]
