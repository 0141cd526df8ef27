"""What the host descriptors read from the arrays they describe (addresses, element strides, int
lists) and the layout and padding checks they share.

Shared by :class:`~gluonkit.nvidia.hopper.TensorDescriptor` and
:class:`~gluonkit.nvidia.hopper.TensorDescriptorIm2Col`; ``owner`` is the class name that
starts every error message.
"""

from __future__ import annotations

import operator
from typing import Any, Sequence

from gluonkit.runtime import tma

__all__ = ["int_tuple", "address_of", "element_strides", "check_layout_and_padding"]


def int_tuple(values: Sequence[int], param: str, owner: str = "TensorDescriptor") -> tuple[int, ...]:
    """``values`` as a tuple of Python ints; ``TypeError`` naming ``param`` otherwise."""
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{owner}: parameter {param!r} must be a sequence of ints, got {values!r}") from None


def address_of(base: Any, owner: str = "TensorDescriptor") -> tuple[int, bool]:
    """``(address, is_cuda)`` of a torch tensor, a CUDA array interface object or a numpy array."""
    if hasattr(base, "data_ptr") and hasattr(base, "is_cuda"):  # torch, CPU or CUDA
        return int(base.data_ptr()), bool(base.is_cuda)
    cai = getattr(base, "__cuda_array_interface__", None)
    if cai is not None:  # CuPy, Numba
        return int(cai["data"][0] or 0), True
    host = getattr(base, "__array_interface__", None)
    if host is not None:  # numpy
        return int(host["data"][0] or 0), False
    raise TypeError(f"{owner}: parameter 'base' must be a torch tensor, a CuPy array or a "
                    f"numpy array, got {type(base).__name__}")


def element_strides(tensor: Any, itemsize: int, owner: str = "TensorDescriptor") -> tuple[int, ...]:
    """A tensor's strides in elements: torch's ``stride()``, or numpy/CuPy byte ``strides``."""
    if callable(getattr(tensor, "stride", None)):
        return tuple(tensor.stride())
    byte_strides = getattr(tensor, "strides", None)
    if byte_strides is None:  # a bare __cuda_array_interface__ object: None means C-contiguous
        byte_strides = tensor.__cuda_array_interface__.get("strides")
    if byte_strides is None:
        strides, step = [], 1
        for extent in reversed(tuple(tensor.shape)):
            strides.append(step)
            step *= extent
        return tuple(reversed(strides))
    for s in byte_strides:
        if s % itemsize:
            raise ValueError(f"{owner}: parameter 'tensor' has a byte stride of {s}, not a "
                             f"multiple of its {itemsize}-byte elements (strides {list(byte_strides)})")
    return tuple(s // itemsize for s in byte_strides)


def check_layout_and_padding(layout, dtype, padding: str) -> None:
    """The checks a tiled and an im2col descriptor share: the layout's element width is the
    tensor's, it is not fp4-padded, and ``padding`` is a TMA fill mode the dtype can hold."""
    if layout.element_bitwidth != dtype.primitive_bitwidth:
        raise ValueError(f"layout: element_bitwidth is {layout.element_bitwidth} but the tensor's dtype {dtype} "
                         f"has {dtype.primitive_bitwidth}-bit elements; use "
                         f"NVMMASharedLayout.get_default_for(block_shape, {dtype})")
    if layout.fp4_padded:
        raise ValueError("layout: fp4_padded descriptors (Blackwell's padded fp4) are not supported")
    if padding not in tma.PADDING_MODES:
        raise ValueError(f"padding: expected one of {list(tma.PADDING_MODES)}, got {padding!r}")
    if padding == "nan" and not dtype.is_floating():
        raise ValueError(f"padding: 'nan' needs a floating-point tensor, got {dtype}; use 'zero'")
