"""Host-side Hopper objects, at the path of Gluon's ``triton.experimental.gluon.nvidia.hopper``.

:class:`TensorDescriptor` describes a global tensor and the block that each TMA copy moves
between it and shared memory, so a Gluon host script ports by changing its import line::

    from gluonkit.nvidia.hopper import TensorDescriptor
    layout = gl.NVMMASharedLayout.get_default_for([128, 64], gl.bfloat16)
    a_desc = TensorDescriptor.from_tensor(a, [128, 64], layout)
    kernel[grid](a_desc, ...)

The descriptor is checked against Gluon's rules when it is built (and when a field is
assigned), and against the TMA hardware's box limits when a kernel is given it, so mistakes
surface as a ``ValueError`` naming the parameter instead of a ``CUDA_ERROR_INVALID_VALUE``
at launch.  Its base may be a torch CUDA tensor or a CuPy
array (for compiled kernels) or a numpy array or torch CPU tensor (for the interpreter,
``GLUONKIT_INTERPRET=1``).  The 128-byte ``CUtensorMap`` is encoded only when a compiled
kernel needs it (:meth:`TensorDescriptor.kernel_arg_bytes`).  The constructor and
``from_tensor`` take Gluon 3.9's parameters, with its defaults.  :class:`TensorDescriptorIm2Col`
(:mod:`gluonkit.nvidia.im2col`) is the im2col-mode descriptor that convolution kernels
gather pixels through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from gluonkit import ir
from gluonkit.layouts.linear import is_power_of_two
from gluonkit.layouts.shared import NVMMASharedLayout
from gluonkit.runtime import tma
from gluonkit.runtime.args import dtype_of, register_descriptor_class

from .arrays import address_of, check_layout_and_padding, element_strides, int_tuple
from .im2col import TensorDescriptorIm2Col
from .record import DescriptorRecord

BlockType = ir.BlockType  # re-exported: what desc.block_type answers

__all__ = ["TensorDescriptor", "TensorDescriptorIm2Col", "BlockType", "MAX_BLOCK_NUMEL"]

MAX_BLOCK_NUMEL = 2**20  # Triton's largest tensor (TRITON_MAX_TENSOR_NUMEL); blocks obey it too


@dataclass(eq=False)
class TensorDescriptor(DescriptorRecord):
    """A global tensor plus the block shape and shared-memory layout of its TMA copies.

    ``base`` is the tensor whose memory is described (its address and dtype are used);
    ``shape`` and ``strides`` (in elements, Python order: last dimension fastest) describe
    the region, which may be a view of ``base`` with other extents; ``block_shape`` is the
    tile one ``tma.async_load`` / ``tma.async_store`` moves and ``layout`` the :class:`NVMMASharedLayout` that
    tile has in shared memory.  ``padding`` is what out-of-bounds elements read as:
    ``"zero"`` or ``"nan"`` (floating-point tensors only).  ``round_f32_to_tf32`` makes
    float32 loads round to tf32.

    It is a dataclass with Gluon's fields (``dataclasses.replace`` builds a checked copy);
    ``shape``, ``strides`` and ``block_shape`` are stored as tuples of ints.  Assigning a
    field checks the descriptor again (:mod:`gluonkit.nvidia.record`).

    The hardware moves a *box* of at most 256 elements per dimension whose innermost row
    is at most one swizzle width (:meth:`NVMMASharedLayout.tma_block_shape`); a larger
    block is several boxes, issued by the device-side copy.
    """

    base: Any
    shape: Sequence[int]
    strides: Sequence[int]
    block_shape: Sequence[int]
    layout: NVMMASharedLayout
    padding: str = "zero"
    round_f32_to_tf32: bool = False

    def _validate(self) -> None:
        """Check the fields (memoized by geometry), store them normalized and derive the rest."""
        layout = self.layout
        if not isinstance(layout, NVMMASharedLayout):
            raise TypeError(f"TensorDescriptor: parameter 'layout' must be an NVMMASharedLayout (the "
                            f"layout TMA writes), got {type(layout).__name__}; use "
                            "NVMMASharedLayout.get_default_for(block_shape, dtype)")
        address, is_cuda = address_of(self.base)
        dtype = dtype_of(self.base, "base")
        state = self.__dict__  # written directly: assignment through __setattr__ would revalidate
        state["shape"] = int_tuple(self.shape, "shape")
        state["strides"] = int_tuple(self.strides, "strides")
        state["block_shape"] = int_tuple(self.block_shape, "block_shape")
        state["round_f32_to_tf32"] = bool(self.round_f32_to_tf32)
        state["_address"] = address
        state["_is_cuda"] = is_cuda
        state["_dtype"] = dtype
        checked = (dtype, self.shape, self.strides, self.block_shape, layout, self.padding,
                   self.round_f32_to_tf32, address % tma.GLOBAL_ALIGNMENT == 0)
        result = _CHECKED.get(checked)
        if result is None:
            try:
                result = self._check()
            except ValueError as exc:
                raise ValueError(f"TensorDescriptor: {exc}") from None
            if len(_CHECKED) >= _CHECKED_LIMIT:
                _CHECKED.clear()
            _CHECKED[checked] = result
        state["_box_shape"], state["_box_problem"] = result
        state["_encoded"] = None

    @staticmethod
    def from_tensor(tensor: Any, block_shape: Sequence[int], layout: NVMMASharedLayout,
                    padding: str = "zero", round_f32_to_tf32: bool = False) -> "TensorDescriptor":
        """Describe all of ``tensor`` (its own shape and strides), copied in ``block_shape`` tiles."""
        itemsize = dtype_of(tensor, "tensor").itemsize
        return TensorDescriptor(tensor, tuple(tensor.shape), element_strides(tensor, itemsize),
                                block_shape, layout, padding, round_f32_to_tf32)

    def _check(self) -> tuple[tuple[int, ...], str | None]:
        """Validate Gluon's rules for every parameter; return the TMA box (row-major) and what
        in it breaks the hardware's box limits (``None`` if nothing).

        The box limits are reported only when the descriptor is used (:meth:`_usable`), as
        Gluon does: a host script may build a descriptor with a placeholder block
        (``[1, 1]``) and assign the real ``block_shape`` and ``layout`` before the launch, as
        Gluon's multi-CTA matmul example does in its autotuning hook.
        """
        rank = len(self.shape)
        itemsize = self._dtype.itemsize
        tma.tma_data_type(self._dtype, self.round_f32_to_tf32)
        tma.check_global(self.shape, self.strides, self._address, itemsize)
        block = list(self.block_shape)
        if len(block) != rank:
            raise ValueError(f"block_shape: expected {rank} dimensions like shape {list(self.shape)}, got {block}")
        numel = 1
        for d, s in enumerate(block):
            if s < 1 or not is_power_of_two(s):
                raise ValueError(f"block_shape: dimension {d} must be a positive power of two, got {s} ({block})")
            numel *= s
        if numel > MAX_BLOCK_NUMEL:
            raise ValueError(f"block_shape: {block} has {numel} elements, more than {MAX_BLOCK_NUMEL}")
        layout = self.layout
        if layout.rank != rank:
            raise ValueError(f"layout: has rank {layout.rank} but the tensor has rank {rank}; "
                             f"build it for {rank} dimensions")
        if layout.transposed:
            raise ValueError("layout: TMA writes shared memory in the global tensor's order (last "
                             "dimension contiguous), so the layout cannot be transposed; use "
                             "transposed=False and .permute() the shared memory descriptor instead")
        check_layout_and_padding(layout, self._dtype, self.padding)
        try:
            box = layout.tma_block_shape(block)
        except ValueError as exc:
            raise ValueError(f"block_shape: {block} does not fit the layout ({exc}); use a wider block "
                             f"or NVMMASharedLayout.get_default_for(block_shape, {self._dtype})") from None
        try:
            tma.check_box(box, itemsize, layout.swizzle_byte_width)
        except ValueError as exc:
            return tuple(box), str(exc)
        return tuple(box), None

    def _usable(self) -> None:
        """Raise the box-limit problem :meth:`_check` deferred, now that a kernel uses the descriptor."""
        if self._box_problem is not None:
            raise ValueError(f"TensorDescriptor: {self._box_problem} (checked when the descriptor is passed to a "
                             "kernel: its block_shape and layout may change until then)")

    @property
    def mode(self) -> str:
        """``"tiled"``: copies move whole blocks (Gluon's im2col mode is TensorDescriptorIm2Col)."""
        return "tiled"

    # ------------------------------------------------------------------ what kernels need
    @property
    def dtype(self) -> ir.DType:
        """The gluonkit element dtype of ``base``."""
        return self._dtype

    @property
    def block_type(self) -> BlockType:
        """The block one load produces (shape, dtype, nbytes): see :class:`BlockType`."""
        return BlockType(self.block_shape, self._dtype)

    @property
    def box_shape(self) -> tuple[int, ...]:
        """The box one hardware copy moves (row-major), encoded in the tensor map; the
        device-side copy issues ``prod(block_shape) / prod(box_shape)`` of them per block."""
        return self._box_shape

    @property
    def arg_type(self) -> ir.TensorDescType:
        """The IR type of this descriptor as a kernel argument (what a launch specializes on)."""
        self._usable()
        return ir.TensorDescType(self.block_shape, self._dtype, self.layout)

    @property
    def address(self) -> int:
        """The address of the described region's first element (device or host memory)."""
        return self._address

    @property
    def is_cuda(self) -> bool:
        """Whether ``base`` lives on the GPU (otherwise only the interpreter can use it)."""
        return self._is_cuda

    def kernel_arg_bytes(self) -> bytes:
        """The 128-byte ``CUtensorMap`` to pass by value as a ``.param .align 64 .b8 [128]``
        kernel parameter; encoded on first use (needs a GPU) and cached."""
        if self._encoded is None:
            self._usable()
            self._encoded = tma.encode_tiled(self)
        return self._encoded


# Parameters already validated (everything _check reads: the address only through its
# alignment) -> their TMA box.  Host wrappers build descriptors of the same geometry on
# every call; checking each parameter again costs more than the launch.
_CHECKED: dict = {}
_CHECKED_LIMIT = 1024


register_descriptor_class(TensorDescriptor)
