"""gluonkit IR: types, ops, blocks and functions, the builder, printer and verifier.

May import :mod:`gluonkit.layouts` only (see docs/design.rst).
"""

from .builder import Builder
from .core import Block, Function, Operation, Value
from .diagnostics import CompilationError, Location, UNKNOWN_LOCATION
from .ops import OPS, OpDef, op_def
from .printer import print_function
from .types import (
    ALL_DTYPES, BlockType, DType, PointerType, SharedMemoryDescType, TensorMemoryDescType, TensorDescIm2ColType, TensorDescType, TensorType, bfloat16, dtype_from_name,
    element_type,
    float8e4nv, float8e5, float16, float32, float64, int1, int8, int16, int32, int64,
    is_tensor, layout_of, shape_of, uint8, uint16, uint32, uint64,
)
from .verifier import verify
from .verify_checks import layouts_match
from . import verify_shared  # noqa: F401,E402  (registers the shared-memory and mbarrier rules)
from . import verify_wgmma  # noqa: F401,E402  (registers the warpgroup MMA rules)
from . import verify_tmem  # noqa: F401,E402  (registers the tensor-memory rules)
from . import verify_tcgen05  # noqa: F401,E402  (registers the tcgen05 MMA rules)
from . import verify_tcgen05_scaled  # noqa: F401,E402  (registers tcgen05_copy and the block-scaled MMA)
from . import verify_packed_arith  # noqa: F401,E402  (registers Blackwell's packed arithmetic)
from . import verify_tma  # noqa: F401,E402  (registers the TMA copy rules)
from . import verify_tma_gather  # noqa: F401,E402  (registers the TMA gather/scatter rules)
from . import verify_atomics  # noqa: F401,E402  (registers the atomic rules)
from . import verify_inline_asm  # noqa: F401,E402  (registers the inline_asm_elementwise rule)
from . import verify_async_copy  # noqa: F401,E402  (registers the cp.async rules)
from . import warp_specialize  # noqa: F401,E402  (registers the warp_specialize rule)
from . import verify_cluster  # noqa: F401,E402  (registers the cluster rules)
from . import verify_clc  # noqa: F401,E402  (registers the cluster-launch-control rules)
from . import verify_collective  # noqa: F401,E402  (registers scan, histogram, gather, map_elementwise)
