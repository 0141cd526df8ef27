"""What users write: ``@jit``, ``constexpr``, dtypes, layouts and the tensor builtins.

``import gluonkit.lang as gl`` gives the Gluon-style namespace: ``gl.arange``, ``gl.load``,
``gl.float16``, ``gl.BlockedLayout`` …  Every name of Gluon 3.9's
``triton.experimental.gluon.language`` is here; those whose feature is not built yet are
stubs from :mod:`.unsupported`.  ``gl.dtype``, ``gl.block_type``, ``gl.distributed_type``
and ``gl.shared_memory_descriptor_type`` are gluonkit's IR types under Gluon's names.
(May import :mod:`gluonkit.ir`, :mod:`gluonkit.layouts` and :mod:`gluonkit.sync` only.)
"""

from ..layouts import (
    AutoLayout, BlockedLayout, CoalescedLayout, DistributedLayout, DistributedLinearLayout, DotOperandLayout,
    NVMMADistributedLayout, NVMMASharedLayout, PaddedSharedLayout, SharedLayout, SharedLinearLayout, SliceLayout,
    SwizzledSharedLayout, TensorMemoryLayout,
)
from ..ir.types import (
    BlockType as block_type, DType as dtype, PointerType as pointer_type, SharedMemoryDescType as
    shared_memory_descriptor_type, TensorType as distributed_type, bfloat16, float8e4nv, float8e5, float16, float32,
    float64, int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
)
from .builtins import *  # noqa: F401,F403 - the gl.* functions
from .builtins import __all__ as _builtin_names
from .atomics import *  # noqa: F401,F403 - gl.atomic_*
from .atomics import __all__ as _atomic_names
from .asm_elementwise import inline_asm_elementwise
from .collective import *  # noqa: F401,F403 - scans, histogram, gather, map_elementwise
from .collective import __all__ as _collective_names
from .layout_queries import bank_conflicts, to_linear_layout
from .math_extra import *  # noqa: F401,F403 - clamp, umulhi, fdiv, xor_sum, ravel …
from .math_extra import __all__ as _math_extra_names
from .fp4 import fp4_to_fp
from .dot_fma import dot_fma
from .aggregate import aggregate_replace
from .constexpr import constexpr
from .errors import (
    ArgumentError, CompilationError, ConstexprRequiredError, LayoutMismatchError, ShapeMismatchError,
    TypeMismatchError, UndefinedNameError, UnsupportedSyntaxError,
)
from .jit import JITFunction, jit, set_launcher
from .tensor import tensor
from .shared_memory import allocate_shared_memory, shared_memory_descriptor
from ..sync import barrier, thread_barrier
from . import extra, fpsan
from .unsupported import GL, UnsupportedFeatureError, install
from .warp_specialize import warp_specialize

# Layout classes, re-exported under Gluon's names.
_LAYOUT_NAMES = [
    "AutoLayout", "CoalescedLayout", "BlockedLayout", "SliceLayout", "DistributedLayout", "DistributedLinearLayout",
    "NVMMADistributedLayout", "DotOperandLayout", "NVMMASharedLayout", "SwizzledSharedLayout",
    "SharedLinearLayout", "PaddedSharedLayout", "SharedLayout", "TensorMemoryLayout",
]

__all__ = [
    "jit", "JITFunction", "set_launcher", "constexpr", "aggregate_replace", "tensor", "dtype", "pointer_type",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5",
    "CompilationError", "UnsupportedSyntaxError", "TypeMismatchError", "ShapeMismatchError",
    "LayoutMismatchError", "ConstexprRequiredError", "UndefinedNameError", "ArgumentError",
    "allocate_shared_memory", "shared_memory_descriptor", "thread_barrier", "barrier", "warp_specialize", "block_type",
    "distributed_type", "shared_memory_descriptor_type", "UnsupportedFeatureError", "extra", "fpsan",
] + list(_builtin_names) + list(_atomic_names) + ["inline_asm_elementwise"] + list(_collective_names) + [
    "to_linear_layout", "bank_conflicts", "fp4_to_fp", "dot_fma"] + list(_math_extra_names) + _LAYOUT_NAMES

# Gluon 3.9 names whose feature is not built yet: stubs that say so when used.  Defining a
# name above (a helper implementing it) replaces its stub.
__all__ += install(globals(), GL)
