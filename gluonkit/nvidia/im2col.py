"""The host descriptor of TMA's im2col mode: :class:`TensorDescriptorIm2Col` (Gluon 3.9's).

A convolution written as an implicit GEMM reads, for each filter tap, a column of input
pixels: pixel ``m`` of an output tile is input pixel ``m`` of a sliding window.  TMA's
im2col mode gathers such a column in one copy: for an N(D)HWC tensor it walks
``block_shape[0]`` pixels (*pixels per column*) through a *bounding box* in the spatial
dimensions, W fastest, then H, then D, then the batch N (stepped by ``element_strides[0]``),
and copies ``block_shape[1]`` channels (*channels per pixel*) of each into one row of
shared memory.

The bounding box of spatial dimension ``d`` (extent ``S``) spans the filter positions
``pixel_box_lower_corner[d]`` to ``S - 1 + pixel_box_upper_corner[d]`` (inclusive), stepped
by ``element_strides[d + 1]`` (the convolution's stride); for a convolution with padding
``p`` and a filter of ``R`` taps of dilation ``δ`` it is ``lower = -p`` and
``upper = p - (R - 1) δ``.  The
kernel's ``tma.async_load_im2col(desc, coord, offsets, ...)`` gives the first filter
position (``coord``, with the batch and first channel) and the filter tap (``offsets``), which
shifts every pixel read; pixels outside the tensor read as zero (NaN with
``padding="nan"``).  :mod:`gluonkit.interpret.nvidia.tma_im2col` is the exact rule.

The constructor and ``from_tensor`` take Gluon 3.9's parameters with its defaults, and
every check raises ``ValueError`` (``TypeError`` for a wrong kind of value) naming the
parameter, where Gluon asserts or the driver answers ``CUDA_ERROR_INVALID_VALUE``.  The
tensor map is encoded with ``cuTensorMapEncodeIm2col`` only when a compiled kernel is
launched with it (:meth:`TensorDescriptorIm2Col.kernel_arg_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from gluonkit import ir
from gluonkit.layouts.linear import is_power_of_two
from gluonkit.layouts.shared import NVMMASharedLayout
from gluonkit.runtime import tma
from gluonkit.runtime.args import dtype_of, register_descriptor_class

from .arrays import address_of, check_layout_and_padding, int_tuple
from .arrays import element_strides as strides_in_elements
from .record import DescriptorRecord

__all__ = ["TensorDescriptorIm2Col"]

_OWNER = "TensorDescriptorIm2Col"
_SPATIAL = {3: "W", 4: "H, W", 5: "D, H, W"}


@dataclass(eq=False)
class TensorDescriptorIm2Col(DescriptorRecord):
    """A global N(D)HWC tensor read by TMA im2col copies of ``block_shape = [pixels, channels]``.

    ``base``, ``shape``, ``strides`` (in elements), ``layout``, ``padding`` and
    ``round_f32_to_tf32`` mean what they mean for :class:`TensorDescriptor`; the tensor has
    rank 3 (NWC), 4 (NHWC) or 5 (NDHWC) with the channels contiguous.  ``element_strides``
    (one per dimension, each in [1, 8], the last 1; default all 1) are the traversal
    strides of the spatial dimensions.  ``pixel_box_lower_corner`` and
    ``pixel_box_upper_corner`` (required, one per spatial dimension, Python order ``[D,] H,
    W``) place the bounding box: see the module docstring.  Like :class:`TensorDescriptor` it
    is a dataclass with Gluon's fields, the integer sequences stored as tuples of ints.
    """

    base: Any
    shape: Sequence[int]
    strides: Sequence[int]
    block_shape: Sequence[int]
    layout: NVMMASharedLayout
    padding: str = "zero"
    round_f32_to_tf32: bool = False
    element_strides: Optional[Sequence[int]] = None
    pixel_box_lower_corner: Optional[Sequence[int]] = None
    pixel_box_upper_corner: Optional[Sequence[int]] = None

    def _validate(self) -> None:
        """Check the fields, store them normalized and derive the rest."""
        if not isinstance(self.layout, NVMMASharedLayout):
            raise TypeError(f"{_OWNER}: parameter 'layout' must be an NVMMASharedLayout (the layout TMA writes), "
                            f"got {type(self.layout).__name__}; use NVMMASharedLayout.get_default_for(block_shape, dtype)")
        address, is_cuda = address_of(self.base, _OWNER)
        state = self.__dict__  # written directly: assignment through __setattr__ would revalidate
        state["_address"] = address
        state["_is_cuda"] = is_cuda
        state["_dtype"] = dtype_of(self.base, "base")
        for name in ("shape", "strides", "block_shape"):
            state[name] = int_tuple(state[name], name, _OWNER)
        state["round_f32_to_tf32"] = bool(self.round_f32_to_tf32)
        for name in ("element_strides", "pixel_box_lower_corner", "pixel_box_upper_corner"):
            value = state[name]
            state[name] = None if value is None else int_tuple(value, name, _OWNER)
        try:
            state["_box_shape"] = self._check()
        except ValueError as exc:
            raise ValueError(f"{_OWNER}: {exc}") from None
        state["_steps"] = self.element_strides or (1,) * len(self.shape)
        state["_encoded"] = None

    @staticmethod
    def from_tensor(tensor: Any, block_shape: Sequence[int], layout: NVMMASharedLayout, padding: str = "zero",
                    round_f32_to_tf32: bool = False, element_strides: Optional[Sequence[int]] = None,
                    pixel_box_lower_corner: Optional[Sequence[int]] = None,
                    pixel_box_upper_corner: Optional[Sequence[int]] = None) -> "TensorDescriptorIm2Col":
        """Describe all of ``tensor`` (its own shape and strides) for im2col copies of ``block_shape``."""
        itemsize = dtype_of(tensor, "tensor").itemsize
        return TensorDescriptorIm2Col(tensor, tuple(tensor.shape), strides_in_elements(tensor, itemsize, _OWNER),
                                      block_shape, layout, padding, round_f32_to_tf32, element_strides,
                                      pixel_box_lower_corner, pixel_box_upper_corner)

    def _check(self) -> tuple[int, int]:
        """Validate every parameter; return the box one hardware copy moves, [pixels, channels]."""
        rank = len(self.shape)
        itemsize = self._dtype.itemsize
        tma.tma_data_type(self._dtype, self.round_f32_to_tf32)
        tma.check_global(self.shape, self.strides, self._address, itemsize)
        if rank not in tma.IM2COL_RANKS:
            raise ValueError(f"shape: im2col mode reads a tensor of rank 3 (NWC), 4 (NHWC) or 5 (NDHWC), got rank "
                             f"{rank} (shape {list(self.shape)})")
        block = list(self.block_shape)
        if len(block) != 2:
            raise ValueError(f"block_shape: im2col mode copies a 2-D block [pixels per column, channels per "
                             f"pixel], got {block}")
        for d, (s, what) in enumerate(zip(block, ("pixels per column", "channels per pixel"))):
            if s < 1 or not is_power_of_two(s):
                raise ValueError(f"block_shape: block_shape[{d}] ({what}) must be a positive power of two, "
                                 f"got {s} ({block})")
        if block[0] > tma.MAX_PIXELS_PER_COLUMN:
            raise ValueError(f"block_shape: block_shape[0] (pixels per column) is {block[0]}; one im2col copy "
                             f"moves at most {tma.MAX_PIXELS_PER_COLUMN} pixels")
        self._check_layout(block)
        box_channels = self.layout.tma_block_shape([min(block[0], tma.MAX_BOX_DIM), block[1]])[1]
        tma.check_box([box_channels], itemsize, self.layout.swizzle_byte_width)
        self._check_element_strides(rank)
        self._check_corners(rank)
        return block[0], box_channels

    def _check_layout(self, block: list) -> None:
        layout = self.layout
        if layout.rank != 2:
            raise ValueError(f"layout: has rank {layout.rank} but the im2col block {block} has rank 2")
        if layout.transposed:
            raise ValueError("layout: TMA writes each pixel's channels contiguously, so the layout cannot be "
                             "transposed; use transposed=False and .permute() the shared memory descriptor instead")
        check_layout_and_padding(layout, self._dtype, self.padding)
        try:
            layout.tma_block_shape([min(block[0], tma.MAX_BOX_DIM), block[1]])
        except ValueError as exc:
            raise ValueError(f"block_shape: {block} does not fit the layout ({exc}); use more channels per pixel "
                             f"or NVMMASharedLayout.get_default_for(block_shape, {self._dtype})") from None

    def _check_element_strides(self, rank: int) -> None:
        steps = self.element_strides
        if steps is None:
            return
        if len(steps) != rank:
            raise ValueError(f"element_strides: expected {rank} (one per dimension of shape {list(self.shape)}), "
                             f"got {len(steps)}: {list(steps)}")
        for d, s in enumerate(steps):
            if not 1 <= s <= tma.MAX_ELEMENT_STRIDE:
                raise ValueError(f"element_strides: element_strides[{d}] must be in [1, {tma.MAX_ELEMENT_STRIDE}], "
                                 f"got {s} ({list(steps)})")
        if steps[-1] != 1:
            raise ValueError(f"element_strides: the channel dimension's stride (the last) must be 1, got "
                             f"{list(steps)}")

    def _check_corners(self, rank: int) -> None:
        spatial = self.shape[1:-1]
        lo_limit, hi_limit = tma.IM2COL_CORNER_RANGES[rank]
        for name, corner in (("pixel_box_lower_corner", self.pixel_box_lower_corner), ("pixel_box_upper_corner", self.pixel_box_upper_corner)):
            if corner is None:
                raise ValueError(f"{name}: required in im2col mode: one offset per spatial dimension "
                                 f"([{_SPATIAL[rank]}] for a rank-{rank} tensor)")
            if len(corner) != rank - 2:
                raise ValueError(f"{name}: expected {rank - 2} offsets (spatial dimensions [{_SPATIAL[rank]}] of "
                                 f"the rank-{rank} tensor), got {list(corner)}")
            for d, value in enumerate(corner):
                if not lo_limit <= value <= hi_limit:
                    raise ValueError(f"{name}: {name}[{d}] must be in [{lo_limit}, {hi_limit}] for a rank-{rank} "
                                     f"tensor, got {value}")
        for d, (extent, lo, hi) in enumerate(zip(spatial, self.pixel_box_lower_corner, self.pixel_box_upper_corner)):
            if extent - 1 + hi < lo:
                raise ValueError(f"pixel_box_upper_corner: the bounding box of spatial dimension {d} is empty: it "
                                 f"spans filter positions {lo} (lower corner) to {extent - 1 + hi} (extent "
                                 f"{extent} - 1 + upper corner {hi})")

    @property
    def mode(self) -> str:
        """``"im2col"`` (a :class:`TensorDescriptor`'s is ``"tiled"``)."""
        return "im2col"

    # ------------------------------------------------------------------ what kernels need
    @property
    def traversal_strides(self) -> tuple[int, ...]:
        """Element strides of every dimension, Python order (all 1 unless ``element_strides`` says)."""
        return self._steps

    @property
    def dtype(self) -> ir.DType:
        return self._dtype

    @property
    def block_type(self) -> ir.BlockType:
        return ir.BlockType(self.block_shape, self._dtype)

    @property
    def box_shape(self) -> tuple[int, int]:
        """``(pixels, channels)`` one hardware copy moves; the device-side copy issues
        ``block_shape[1] / box_shape[1]`` of them, one per swizzle-wide slice of channels."""
        return self._box_shape

    @property
    def address(self) -> int:
        return self._address

    @property
    def is_cuda(self) -> bool:
        return self._is_cuda

    @property
    def arg_type(self) -> ir.TensorDescIm2ColType:
        """The IR type of this descriptor as a kernel argument (it records the tensor's rank)."""
        return ir.TensorDescIm2ColType(self.block_shape, self._dtype, self.layout, len(self.shape))

    def kernel_arg_bytes(self) -> bytes:
        """The 128-byte ``CUtensorMap`` (``cuTensorMapEncodeIm2col``), encoded on first use and cached."""
        if self._encoded is None:
            self._encoded = tma.encode_im2col(self)
        return self._encoded


register_descriptor_class(TensorDescriptorIm2Col)
