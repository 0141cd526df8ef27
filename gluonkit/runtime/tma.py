"""Host-side TMA (Tensor Memory Accelerator) tensor maps: checks, driver order, encoding.

A TMA copy (``cp.async.bulk.tensor``) does not take pointers: it takes a 128-byte
*tensor map* (``CUtensorMap``) that the host encodes with the driver's
``cuTensorMapEncodeTiled`` (or ``cuTensorMapEncodeIm2col``, :func:`encode_im2col`) and passes to the kernel by value, as a
``.param .align 64 .b8 desc[128]`` grid-constant parameter.  The map records the global
tensor (address, extents, byte strides, element type), the *box* one copy moves, the
shared-memory swizzle, the L2 promotion and how out-of-bounds elements are filled.

This module holds what is independent of the user-facing class
(:class:`gluonkit.nvidia.hopper.TensorDescriptor`): the hardware limits that the driver
would otherwise report as a bare ``CUDA_ERROR_INVALID_VALUE``, the mapping from gluonkit
dtypes and swizzle widths to the driver's enums, the reordering of dimensions into the
driver's order (innermost first) and the encoding itself.  Nothing here touches the
driver until :func:`encode_tiled` is called, so CPU-only machines can build and check
descriptors (the interpreter uses them unencoded).

Fixed choices, the same as Triton's host descriptors: interleave ``NONE``, element strides
all 1 (every element of the box is copied), L2 promotion ``128B`` (:data:`L2_PROMOTION`,
a module setting for experiments: it is not part of Gluon's descriptor), and the
out-of-bounds fill ``NONE`` (zeros; the hardware also clips out-of-bounds stores) unless
the descriptor asks for ``padding="nan"``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

from gluonkit import ir

__all__ = [
    "TENSOR_MAP_BYTES", "TENSOR_MAP_ALIGNMENT", "L2_PROMOTION", "MAX_RANK", "MAX_BOX_DIM", "MAX_GLOBAL_DIM",
    "MAX_GLOBAL_STRIDE", "GLOBAL_ALIGNMENT", "PADDING_MODES",
    "tma_data_type", "tma_swizzle", "TiledParams", "driver_order", "check_global",
    "check_box", "encode_tiled",
    "IM2COL_RANKS", "IM2COL_CORNER_RANGES", "MAX_PIXELS_PER_COLUMN", "MAX_ELEMENT_STRIDE", "encode_im2col",
]

TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap)
# The L2 promotion of tiled maps encoded from now on: "NONE", "L2_64B", "L2_128B" or "L2_256B"
# (the driver's CU_TENSOR_MAP_L2_PROMOTION_* names).
L2_PROMOTION = "L2_128B"
TENSOR_MAP_ALIGNMENT = 64  # the kernel parameter's (and any stored map's) alignment
MAX_RANK = 5
MAX_BOX_DIM = 256  # elements along any box dimension
MAX_GLOBAL_DIM = 2**32  # elements along any global dimension
MAX_GLOBAL_STRIDE = 2**40  # bytes, exclusive
GLOBAL_ALIGNMENT = 16  # bytes: the base address and every stride but the innermost

# im2col mode (cuTensorMapEncodeIm2col): tensors of rank 3 (NWC), 4 (NHWC) or 5 (NDHWC).  The
# pixel box corners are signed, with a width that shrinks as the rank grows (PTX ISA, "im2col
# mode"); one copy moves at most 1024 pixels (its channels are a box row: MAX_BOX_DIM).
IM2COL_RANKS = (3, 4, 5)
IM2COL_CORNER_RANGES = {3: (-2**15, 2**15 - 1), 4: (-2**7, 2**7 - 1), 5: (-2**4, 2**4 - 1)}
MAX_PIXELS_PER_COLUMN = 1024
MAX_ELEMENT_STRIDE = 8  # elementStrides (im2col: the traversal stride of each spatial dimension)

# gluonkit dtype name -> CUtensorMapDataType member (after CU_TENSOR_MAP_DATA_TYPE_).
# TMA only moves bits, so every 8-bit type (int8, fp8) is UINT8 and int16 is UINT16; the
# float types are named so that ``padding="nan"`` (a floating-point fill) is accepted.
_DATA_TYPES = {
    "int8": "UINT8", "uint8": "UINT8", "float8e4nv": "UINT8", "float8e5": "UINT8",
    "int16": "UINT16", "uint16": "UINT16", "float16": "FLOAT16", "bfloat16": "BFLOAT16",
    "int32": "INT32", "uint32": "UINT32", "float32": "FLOAT32",
    "int64": "INT64", "uint64": "UINT64", "float64": "FLOAT64",
}
# NVMMASharedLayout.swizzle_byte_width -> CUtensorMapSwizzle member (after CU_TENSOR_MAP_SWIZZLE_).
_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}
# TensorDescriptor.padding -> CUtensorMapFloatOOBfill member (after CU_TENSOR_MAP_FLOAT_OOB_FILL_).
_FILLS = {"zero": "NONE", "nan": "NAN_REQUEST_ZERO_FMA"}
PADDING_MODES = tuple(_FILLS)


def tma_data_type(dtype: ir.DType, round_f32_to_tf32: bool = False) -> str:
    """The ``CUtensorMapDataType`` member name (``"BFLOAT16"``) for elements of ``dtype``.

    ``round_f32_to_tf32`` selects ``TFLOAT32`` for float32 (the copy rounds to tf32, as a
    tf32 wgmma would read it).  Raises ``ValueError`` for dtypes TMA cannot move (``int1``).
    """
    name = _DATA_TYPES.get(dtype.name)
    if name is None:
        supported = ", ".join(_DATA_TYPES)
        hint = "; view a bool tensor as uint8" if dtype.is_bool() else ""
        raise ValueError(f"dtype: TMA cannot copy {dtype} elements (supported: {supported}){hint}")
    if round_f32_to_tf32:
        if dtype.name != "float32":
            raise ValueError(f"round_f32_to_tf32: only float32 tensors can be rounded to tf32, got {dtype}")
        return "TFLOAT32"
    return name


def tma_swizzle(swizzle_byte_width: int) -> str:
    """The ``CUtensorMapSwizzle`` member name (``"128B"``) for an NVMMA swizzle width in bytes."""
    try:
        return _SWIZZLES[swizzle_byte_width]
    except KeyError:
        raise ValueError(f"swizzle_byte_width: expected one of {list(_SWIZZLES)}, "
                         f"got {swizzle_byte_width!r}") from None


class TiledParams(NamedTuple):
    """The array arguments of ``cuTensorMapEncodeTiled``, in the driver's order.

    Index 0 is the innermost (fastest, stride-1) dimension, the reverse of the Python /
    torch order.  ``global_strides`` are in bytes and have ``rank - 1`` entries: the
    stride of dimension 0 is implicitly the element size.
    """

    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...]


def driver_order(shape: Sequence[int], strides: Sequence[int], box: Sequence[int],
                 itemsize: int) -> TiledParams:
    """Reorder a row-major description (``shape``, element ``strides``, ``box``; last
    dimension fastest) into ``cuTensorMapEncodeTiled``'s arrays (first dimension fastest,
    strides in bytes without the innermost one).

    Example: a ``[256, 512]`` bf16 tensor with strides ``[512, 1]`` and box ``[64, 64]``
    gives ``global_dim=(512, 256)``, ``global_strides=(1024,)``, ``box_dim=(64, 64)``.
    """
    rank = len(shape)
    return TiledParams(
        global_dim=tuple(int(s) for s in reversed(shape)),
        global_strides=tuple(int(strides[d]) * itemsize for d in reversed(range(rank - 1))),
        box_dim=tuple(int(b) for b in reversed(box)),
        element_strides=(1,) * rank,
    )


def check_global(shape: Sequence[int], strides: Sequence[int], address: int, itemsize: int) -> None:
    """Check a global tensor against TMA's limits; raise ``ValueError`` naming the parameter.

    Rank 1..5; every extent in [1, 2**32]; the last stride 1 (the innermost dimension must
    be contiguous); every other stride a non-negative multiple of 16 bytes below 2**40;
    the base ``address`` 16-byte aligned.
    """
    rank = len(shape)
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"shape: TMA tensors have rank 1 to {MAX_RANK}, got rank {rank} (shape {list(shape)})")
    if len(strides) != rank:
        raise ValueError(f"strides: expected {rank} strides (one per dimension of shape {list(shape)}), "
                         f"got {len(strides)}: {list(strides)}")
    for d, extent in enumerate(shape):
        if not 1 <= extent <= MAX_GLOBAL_DIM:
            raise ValueError(f"shape: dimension {d} must be in [1, 2**32], got {extent} (shape {list(shape)})")
    if strides[-1] != 1:
        raise ValueError(f"strides: the last dimension must be contiguous (stride 1), got strides "
                         f"{list(strides)}; make the tensor contiguous (.contiguous()) or transpose it "
                         "so that its stride-1 dimension comes last")
    for d in range(rank - 1):
        nbytes = strides[d] * itemsize
        if nbytes < 0 or nbytes % GLOBAL_ALIGNMENT or nbytes >= MAX_GLOBAL_STRIDE:
            raise ValueError(
                f"strides: stride {strides[d]} of dimension {d} is {nbytes} bytes; TMA needs a "
                f"non-negative multiple of {GLOBAL_ALIGNMENT} bytes below 2**40 (strides {list(strides)}, "
                f"{itemsize}-byte elements); pad the rows to a multiple of "
                f"{GLOBAL_ALIGNMENT // itemsize} elements")
    if address % GLOBAL_ALIGNMENT:
        raise ValueError(f"base: the tensor's address {address:#x} is not {GLOBAL_ALIGNMENT}-byte aligned "
                         f"(it is {address % GLOBAL_ALIGNMENT} bytes past a boundary); TMA needs an aligned "
                         "start: copy the tensor or describe its aligned parent and offset the coordinates")


def check_box(box: Sequence[int], itemsize: int, swizzle_byte_width: int) -> None:
    """Check a TMA box (elements per dimension, row-major) against the hardware's limits.

    Every dimension in [1, 256]; the innermost dimension's bytes a multiple of 16 and, for
    a swizzled map, at most the swizzle width.
    """
    for d, extent in enumerate(box):
        if not 1 <= extent <= MAX_BOX_DIM:
            raise ValueError(f"block_shape: the TMA box {list(box)} has dimension {d} = {extent}; "
                             f"each must be in [1, {MAX_BOX_DIM}]")
    inner = box[-1] * itemsize
    if inner % 16:
        raise ValueError(f"block_shape: the TMA box {list(box)} has an innermost row of {inner} bytes; "
                         f"TMA needs a multiple of 16 bytes: make block_shape[-1] a multiple of "
                         f"{max(1, 16 // itemsize)}")
    if swizzle_byte_width and inner > swizzle_byte_width:
        raise ValueError(f"block_shape: the TMA box {list(box)} has an innermost row of {inner} bytes, "
                         f"more than the {swizzle_byte_width}-byte swizzle allows")


def encode_tiled(descriptor) -> bytes:
    """Encode ``descriptor`` with ``cuTensorMapEncodeTiled``; return the 128-byte ``CUtensorMap``.

    ``descriptor`` is a :class:`gluonkit.nvidia.hopper.TensorDescriptor` (already checked)
    whose base lives on the GPU.  Makes a context current first (the driver needs one).
    A failure raises :class:`~gluonkit.runtime.driver.CudaError` with every argument listed.

    The map depends only on the parameters passed to the driver, so encodings are kept in
    a small cache keyed by them: a program that builds a new descriptor for the same
    tensor on every call (as ``TensorDescriptor.from_tensor`` in a host wrapper does) pays
    for the driver call, tens of microseconds through cuda-python, once.
    """
    if not descriptor.is_cuda:
        raise ValueError("base: the descriptor describes a host array (numpy or a CPU torch tensor); "
                         "only the interpreter (GLUONKIT_INTERPRET=1) can use it. Move the tensor to "
                         "the GPU to launch a compiled kernel")
    return _encode(descriptor.address, descriptor.dtype, descriptor.shape, descriptor.strides, descriptor.box_shape,
                   descriptor.layout.swizzle_byte_width, descriptor.padding, descriptor.round_f32_to_tf32,
                   L2_PROMOTION)


@functools.lru_cache(maxsize=1024)
def _encode(address: int, dtype: ir.DType, shape: tuple, strides: tuple, box: tuple, swizzle_byte_width: int,
            padding: str, round_f32_to_tf32: bool, promotion: str) -> bytes:
    import ctypes

    from . import driver

    params = driver_order(shape, strides, box, dtype.itemsize)
    data_type = tma_data_type(dtype, round_f32_to_tf32)
    swizzle = tma_swizzle(swizzle_byte_width)
    fill = _FILLS[padding]
    driver.ensure_context()
    cu = driver.bindings()
    # The driver reads rank - 1 strides, but rejects a NULL array, which is what
    # cuda-python passes for an empty list (rank 1): append the outermost dimension's byte
    # extent, which it never reads.
    outer_stride = params.global_strides[-1] if params.global_strides else dtype.itemsize
    byte_strides = list(params.global_strides) + [params.global_dim[-1] * outer_stride]
    result = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + data_type),
        len(params.global_dim),
        address,
        [cu.cuuint64_t(x) for x in params.global_dim],
        [cu.cuuint64_t(x) for x in byte_strides],
        [cu.cuuint32_t(x) for x in params.box_dim],
        [cu.cuuint32_t(x) for x in params.element_strides],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + swizzle),
        getattr(cu.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_" + promotion),
        getattr(cu.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + fill),
    )
    if result[0] != cu.CUresult.CUDA_SUCCESS:
        raise driver.CudaError(
            "cuTensorMapEncodeTiled", result[0],
            f"data type {data_type}, address {address:#x}, global_dim {list(params.global_dim)}, "
            f"global_strides (bytes) {list(params.global_strides)}, box_dim {list(params.box_dim)}, "
            f"swizzle {swizzle}, fill {fill} (arrays innermost dimension first)")
    return ctypes.string_at(result[1].getPtr(), TENSOR_MAP_BYTES)


def encode_im2col(descriptor) -> bytes:
    """Encode ``descriptor`` with ``cuTensorMapEncodeIm2col``; return the 128-byte ``CUtensorMap``.

    ``descriptor`` is a :class:`gluonkit.nvidia.hopper.TensorDescriptorIm2Col` (already
    checked) whose base lives on the GPU.  Its ``box_shape`` is ``[pixelsPerColumn,
    channelsPerPixel]``; the corners and element strides go to the driver innermost first,
    like the dimensions.  Encodings are cached like :func:`encode_tiled`'s.
    """
    if not descriptor.is_cuda:
        raise ValueError("base: the descriptor describes a host array (numpy or a CPU torch tensor); "
                         "only the interpreter (GLUONKIT_INTERPRET=1) can use it. Move the tensor to "
                         "the GPU to launch a compiled kernel")
    return _encode_im2col(descriptor.address, descriptor.dtype, descriptor.shape, descriptor.strides,
                          descriptor.box_shape, descriptor.layout.swizzle_byte_width, descriptor.padding,
                          descriptor.round_f32_to_tf32, descriptor.traversal_strides,
                          descriptor.pixel_box_lower_corner, descriptor.pixel_box_upper_corner)


@functools.lru_cache(maxsize=1024)
def _encode_im2col(address: int, dtype: ir.DType, shape: tuple, strides: tuple, box: tuple, swizzle_byte_width: int,
                   padding: str, round_f32_to_tf32: bool, element_strides: tuple, lower: tuple,
                   upper: tuple) -> bytes:
    import ctypes

    from . import driver

    rank = len(shape)
    params = driver_order(shape, strides, (1,) * rank, dtype.itemsize)
    data_type = tma_data_type(dtype, round_f32_to_tf32)
    swizzle = tma_swizzle(swizzle_byte_width)
    fill = _FILLS[padding]
    pixels, channels = box
    driver.ensure_context()
    cu = driver.bindings()
    result = cu.cuTensorMapEncodeIm2col(
        getattr(cu.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + data_type),
        rank,
        address,
        [cu.cuuint64_t(x) for x in params.global_dim],
        [cu.cuuint64_t(x) for x in params.global_strides],
        list(reversed(lower)),
        list(reversed(upper)),
        channels,
        pixels,
        [cu.cuuint32_t(x) for x in reversed(element_strides)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + swizzle),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        getattr(cu.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_" + fill),
    )
    if result[0] != cu.CUresult.CUDA_SUCCESS:
        raise driver.CudaError(
            "cuTensorMapEncodeIm2col", result[0],
            f"data type {data_type}, address {address:#x}, global_dim {list(params.global_dim)}, "
            f"global_strides (bytes) {list(params.global_strides)}, pixel box lower corner {list(reversed(lower))}, "
            f"upper corner {list(reversed(upper))}, channels per pixel {channels}, pixels per column {pixels}, "
            f"element strides {list(reversed(element_strides))}, swizzle {swizzle}, fill {fill} (arrays innermost "
            "dimension first)")
    return ctypes.string_at(result[1].getPtr(), TENSOR_MAP_BYTES)
