"""What users write: ``@jit``, ``constexpr``, dtypes, layouts and the tensor builtins.

``import gluonkit.lang as gl`` gives the Gluon-style namespace: ``gl.arange``, ``gl.load``,
``gl.float16``, ``gl.BlockedLayout`` …  (May import :mod:`gluonkit.ir` and
:mod:`gluonkit.layouts` only.)
"""

from .. import layouts as _layouts
from ..ir.types import (
    DType as dtype, PointerType as pointer_type, bfloat16, float8e4nv, float8e5, float16, float32,
    float64, int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
)
from .builtins import *  # noqa: F401,F403 - the gl.* functions
from .builtins import __all__ as _builtin_names
from .constexpr import constexpr
from .errors import (
    ArgumentError, CompilationError, ConstexprRequiredError, LayoutMismatchError, ShapeMismatchError,
    TypeMismatchError, UndefinedNameError, UnsupportedSyntaxError,
)
from .jit import JITFunction, jit, set_launcher
from .tensor import tensor
from .shared_memory import allocate_shared_memory, shared_memory_descriptor
from ..sync import thread_barrier

# Layout classes, re-exported under Gluon's names.  The layout modules are written
# alongside this package; names that do not exist yet are simply absent (a kernel using
# one gets a clear "not defined" error), never replaced by a stand-in.
_LAYOUT_NAMES = (
    "AutoLayout", "CoalescedLayout", "BlockedLayout", "SliceLayout", "DistributedLayout",
    "DistributedLinearLayout",
    "NVMMADistributedLayout", "DotOperandLayout", "NVMMASharedLayout", "SwizzledSharedLayout",
    "SharedLinearLayout", "PaddedSharedLayout", "SharedLayout", "TensorMemoryLayout",
)
_exported_layouts = []
for _name in _LAYOUT_NAMES:
    _cls = getattr(_layouts, _name, None) or getattr(_layouts.distributed, _name, None)
    if _cls is not None:
        globals()[_name] = _cls
        _exported_layouts.append(_name)

__all__ = [
    "jit", "JITFunction", "set_launcher", "constexpr", "tensor", "dtype", "pointer_type",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5",
    "CompilationError", "UnsupportedSyntaxError", "TypeMismatchError", "ShapeMismatchError",
    "LayoutMismatchError", "ConstexprRequiredError", "UndefinedNameError", "ArgumentError",
    "allocate_shared_memory", "shared_memory_descriptor", "thread_barrier",
] + list(_builtin_names) + _exported_layouts
