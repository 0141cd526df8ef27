"""IR types: element dtypes, pointers, distributed tensors, shared memory descriptors.

Every IR value has one of these types.  Scalars are typed by a :class:`DType` or a
:class:`PointerType` directly; distributed tensors by a :class:`TensorType` that carries
shape, element type and layout (an ``AutoLayout`` until inference resolves it); views of
shared memory by a :class:`SharedMemoryDescType` (shape, element type, shared layout and
the shape of the buffer the layout describes); TMA tensor descriptors (kernel arguments)
by a :class:`TensorDescType` (the block one copy moves and its shared layout), or by its
subclass :class:`TensorDescIm2ColType` for descriptors in im2col mode (convolutions);
views of Blackwell tensor memory by a :class:`TensorMemoryDescType`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple, Union

__all__ = [
    "DType", "BlockType", "PointerType", "TensorType", "SharedMemoryDescType", "TensorMemoryDescType", "TensorDescType",
    "TensorDescIm2ColType", "Type", "ScalarType",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5",
    "ALL_DTYPES", "dtype_from_name", "element_type", "shape_of", "layout_of", "is_tensor",
]


@dataclass(frozen=True)
class DType:
    """A scalar element type.

    ``kind`` is ``"int"``, ``"uint"``, ``"float"`` or ``"bool"``; ``exponent_bits`` is set
    for floating-point types and orders them in type promotion (Triton's rules).
    """

    name: str
    kind: str
    primitive_bitwidth: int
    exponent_bits: int = 0

    @property
    def itemsize(self) -> int:
        return max(1, self.primitive_bitwidth // 8)

    def is_floating(self) -> bool:
        return self.kind == "float"

    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "bool")

    def is_int_signed(self) -> bool:
        return self.kind == "int"

    def is_int_unsigned(self) -> bool:
        return self.kind == "uint"

    def is_bool(self) -> bool:
        return self.kind == "bool"

    def is_fp8(self) -> bool:
        return self.kind == "float" and self.primitive_bitwidth == 8

    def is_ptr(self) -> bool:
        return False

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name


int1 = DType("int1", "bool", 1)
int8 = DType("int8", "int", 8)
int16 = DType("int16", "int", 16)
int32 = DType("int32", "int", 32)
int64 = DType("int64", "int", 64)
uint8 = DType("uint8", "uint", 8)
uint16 = DType("uint16", "uint", 16)
uint32 = DType("uint32", "uint", 32)
uint64 = DType("uint64", "uint", 64)
float8e5 = DType("float8e5", "float", 8, exponent_bits=5)
float8e4nv = DType("float8e4nv", "float", 8, exponent_bits=4)
float16 = DType("float16", "float", 16, exponent_bits=5)
bfloat16 = DType("bfloat16", "float", 16, exponent_bits=8)
float32 = DType("float32", "float", 32, exponent_bits=8)
float64 = DType("float64", "float", 64, exponent_bits=11)

ALL_DTYPES = (
    int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float8e4nv, float8e5, float16, bfloat16, float32, float64,
)
_BY_NAME = {d.name: d for d in ALL_DTYPES}


def dtype_from_name(name: str) -> DType:
    """The dtype called ``name`` (``"float16"``, ``"int32"``, …)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(_BY_NAME)}") from None


@dataclass(frozen=True)
class BlockType:
    """The block one TMA copy moves: ``shape`` elements of ``element_ty``.

    What ``desc.block_type`` answers on the host and in kernels: ``shape``, ``numel``,
    ``nbytes`` (what ``mbarrier.expect`` needs) and the element type as Triton's
    ``element_ty`` or ``dtype``.
    """

    shape: Tuple[int, ...]
    element_ty: DType

    @property
    def dtype(self) -> DType:
        return self.element_ty

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.element_ty.itemsize


@dataclass(frozen=True)
class PointerType:
    """A pointer to ``element`` in ``address_space`` (1 = global memory)."""

    element: DType
    address_space: int = 1

    name = "pointer"
    primitive_bitwidth = 64
    itemsize = 8

    def is_ptr(self) -> bool:
        return True

    @property
    def element_ty(self) -> DType:
        """Triton's name for :attr:`element` (``ptr.dtype.element_ty`` in kernels)."""
        return self.element

    def is_floating(self) -> bool:
        return False

    def is_int(self) -> bool:
        return False

    def is_bool(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"ptr<{self.element}>"

    __repr__ = __str__


ScalarType = Union[DType, PointerType]


@dataclass(frozen=True)
class TensorType:
    """A distributed tensor: ``shape`` elements of ``element`` spread by ``layout``."""

    element: ScalarType
    shape: Tuple[int, ...]
    layout: object  # a gluonkit.layouts distributed layout, or AutoLayout

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def with_layout(self, layout) -> "TensorType":
        return TensorType(self.element, self.shape, layout)

    def with_element(self, element: ScalarType) -> "TensorType":
        return TensorType(element, self.shape, self.layout)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        return f"tensor<{dims}x{self.element}, {self.layout!r}>"

    __repr__ = __str__


@dataclass(frozen=True)
class SharedMemoryDescType:
    """A view of a shared-memory buffer: ``shape`` elements of ``element``.

    ``layout`` is a shared layout (``NVMMASharedLayout``, ``SwizzledSharedLayout``,
    ``SharedLinearLayout``, ``MBarrierLayout`` …) of rank ``k``; it places the last ``k``
    dimensions of a buffer of ``alloc_shape`` (the *tile*).  Leading dimensions beyond the
    layout's rank are *stage* dimensions: whole tiles stacked row-major, as in a
    multi-buffered ``allocate_shared_memory(dtype, [STAGES, BM, BK], layout)``.
    ``alloc_shape`` has the rank of ``shape``; a sliced view is smaller than it along the
    sliced dimensions (where the slice starts is the op's attribute, not part of the type).
    """

    element: DType
    shape: Tuple[int, ...]
    layout: object
    alloc_shape: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "alloc_shape", tuple(int(s) for s in self.alloc_shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_stage_dims(self) -> int:
        """How many leading dimensions stack whole tiles (beyond the layout's rank)."""
        return len(self.shape) - self.layout.rank

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements this view shows."""
        return self.numel * self.element.itemsize

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        alloc = "x".join(str(s) for s in self.alloc_shape)
        return f"!smem<{dims}x{self.element}, {self.layout!r}, alloc {alloc}>"

    __repr__ = __str__

@dataclass(frozen=True)
class TensorMemoryDescType:
    """A view of a Blackwell tensor-memory (TMEM) buffer: ``shape`` elements of ``element``.

    ``layout`` is a ``TensorMemoryLayout`` or ``TensorMemoryScalesLayout`` (rank 2) placing
    the last two dimensions of ``alloc_shape`` (the *tile*) on TMEM lanes and columns;
    leading dimensions are stages (whole tiles side by side along the columns), as in a
    double-buffered accumulator ``allocate_tensor_memory(gl.float32, [2, 128, 128], layout)``.
    A sliced view is smaller than ``alloc_shape`` (where it starts is the op's attribute).
    Addressing lives in :mod:`gluonkit.ir.tmem`.
    """

    element: DType
    shape: Tuple[int, ...]
    layout: object
    alloc_shape: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "alloc_shape", tuple(int(s) for s in self.alloc_shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_stage_dims(self) -> int:
        """How many leading dimensions stack whole tiles (beyond the layout's rank 2)."""
        return len(self.shape) - 2

    @property
    def element_ty(self) -> DType:
        """Gluon's name for :attr:`element`."""
        return self.element

    def get_reg_layout(self, num_warps=None, instr_variant: str = "32x32b"):
        """The register layout of a tcgen05.ld/st of this (2-D) view with ``num_warps`` warps
        (Gluon's ``tensor_memory_descriptor_type.get_reg_layout``); ``ValueError`` when none exists."""
        from ..layouts.tmem import get_tmem_reg_layout

        if num_warps is None:
            raise ValueError("get_reg_layout: num_warps could not be inferred; pass a power of two >= 4")
        return get_tmem_reg_layout(self.element, list(self.shape), self.layout, num_warps, instr_variant)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.shape)
        alloc = "x".join(str(s) for s in self.alloc_shape)
        return f"!tmem<{dims}x{self.element}, {self.layout!r}, alloc {alloc}>"

    __repr__ = __str__


@dataclass(frozen=True)
class TensorDescType:
    """A TMA tensor descriptor: the compile-time part of a host ``TensorDescriptor``.

    ``block_shape`` elements of ``element`` are what one ``tma.async_copy_*`` moves, placed
    in shared memory by ``layout`` (an ``NVMMASharedLayout``).  The global tensor's extents
    and strides are runtime values: a kernel parameter of this type is followed by
    ``rank`` int32 shape and ``rank`` int64 stride parameters (:meth:`flat_arg_types`),
    as in Triton, so ``desc.shape`` is usable in the kernel.
    """

    block_shape: Tuple[int, ...]
    element: DType
    layout: object

    def __post_init__(self):
        object.__setattr__(self, "block_shape", tuple(int(s) for s in self.block_shape))

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    @property
    def block_type(self) -> BlockType:
        """Gluon's ``desc.type.block_type``: the block's shape and element type."""
        return BlockType(self.block_shape, self.element)

    @property
    def nbytes_per_cta(self) -> int:
        """Bytes of the block that land in each CTA: the block split over the CTAs that the
        layout's ``cga_layout`` bases spread it across (the whole block with one CTA)."""
        splits = sum(any(b) for b in getattr(self.layout, "cga_layout", None) or ())
        return self.block_type.nbytes >> splits

    def flat_arg_types(self) -> Tuple["Type", ...]:
        """The kernel parameters one descriptor argument becomes: itself, the shape, the strides."""
        return (self,) + (int32,) * self.rank + (int64,) * self.rank

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.block_shape)
        return f"!tma<{dims}x{self.element}, {self.layout!r}>"

    __repr__ = __str__


@dataclass(frozen=True)
class TensorDescIm2ColType(TensorDescType):
    """A TMA descriptor in im2col mode: the compile-time part of a host ``TensorDescriptorIm2Col``.

    The block is 2-D, ``[pixels, channels]``: one copy gathers ``pixels`` pixels of an
    N(D)HWC tensor of rank ``input_rank`` (3 to 5) and ``channels`` channels of each.  Its
    :attr:`rank` is the tensor's, so the kernel takes ``input_rank`` shape and stride
    parameters and a copy takes ``input_rank`` coordinates (plus ``input_rank - 2`` im2col
    offsets).  It is a :class:`TensorDescType`, so it travels wherever descriptors do
    (kernel parameters, warp-specialize captures); ops of one mode check the class.
    """

    input_rank: int = 4

    def __post_init__(self):
        super().__post_init__()
        if self.input_rank not in (3, 4, 5) or len(self.block_shape) != 2:
            raise ValueError(f"TensorDescIm2ColType: im2col copies a 2-D block [pixels, channels] from a tensor "
                             f"of rank 3, 4 or 5, got block {list(self.block_shape)} and rank {self.input_rank}")

    @property
    def rank(self) -> int:
        return self.input_rank

    @property
    def max_offset(self) -> int:
        """The largest im2col offset a copy may take: PTX's offsets are unsigned, 16, 8 or 5 bits
        wide for a tensor of rank 3, 4 or 5."""
        return {3: 2**16 - 1, 4: 2**8 - 1, 5: 2**5 - 1}[self.input_rank]

    def __str__(self) -> str:
        dims = "x".join(str(s) for s in self.block_shape)
        return f"!tma_im2col<{dims}x{self.element}, {self.layout!r}, rank {self.input_rank}>"

    __repr__ = __str__


Type = Union[DType, PointerType, TensorType, SharedMemoryDescType, TensorMemoryDescType, TensorDescType]


def is_tensor(ty: Type) -> bool:
    return isinstance(ty, TensorType)


def element_type(ty: Type) -> ScalarType:
    """The scalar type of a scalar or of a tensor's elements."""
    return ty.element if isinstance(ty, TensorType) else ty


def shape_of(ty: Type) -> Tuple[int, ...]:
    """A tensor's shape; ``()`` for scalars."""
    return ty.shape if isinstance(ty, TensorType) else ()


def layout_of(ty: Type):
    """A tensor's layout; ``None`` for scalars."""
    return ty.layout if isinstance(ty, TensorType) else None
