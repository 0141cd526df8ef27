"""Kernel arguments: their IR types, and packing them into the block ``cuLaunchKernel`` reads.

Typing follows Triton: ``bool`` -> ``int1``; ``int`` -> ``int32`` if it fits, else
``int64``, else ``uint64`` (for values >= 2**63); ``float`` -> ``float32``; a device array
-> a pointer to its element dtype.  Device arrays are recognised, in this order, as
torch tensors (``data_ptr()`` and ``device``), objects with ``__cuda_array_interface__``
(CuPy, Numba) and DLPack producers (``__dlpack__`` + ``__dlpack_device__``).  A raw ``int``
is accepted where the signature has a pointer: it is taken as a device address.  A host
:class:`gluonkit.nvidia.hopper.TensorDescriptor` is typed by its ``arg_type``
(``TensorDescType(block_shape, dtype, layout)``; a ``TensorDescriptorIm2Col``'s is a
``TensorDescIm2ColType``, which also records the tensor's rank) and packs, like Triton's, as its 128-byte tensor map (64-byte aligned)
followed by its shape (int32 each) and strides (int64 each).

Packing is split for speed: :class:`ArgPacker` is built once per signature and holds one
converter per parameter and a ``struct`` format placing each parameter at its natural
alignment.  Each thread gets one argument block per packer: a byte buffer plus a
``void*[]`` of the parameters' addresses in it (what ``cuLaunchKernel`` takes as
``kernelParams``), built once.  :meth:`ArgPacker.pack` then only converts the values and
writes them with one ``struct.pack_into`` (measured on an H100 host: about 1.2 us for two
arguments, against about 4 us when a ctypes structure and array were built per launch).
The block is reused, which is safe because the driver copies the parameters during the
``cuLaunchKernel`` call.

Every error names the parameter and says what was expected and what was found.
"""

from __future__ import annotations

import ctypes
import math
import numbers
import operator
import struct
import threading
from typing import Callable, Optional, Sequence

import numpy as np

from gluonkit import ir

__all__ = [
    "ArgPacker", "PackedArgs", "ir_type_of", "dtype_of", "data_pointer", "DLPACK_CUDA", "register_descriptor_class",
]

DLPACK_CUDA = 2  # kDLCUDA
_DLPACK_CUDA_MANAGED = 13  # kDLCUDAManaged: addressable from the device like kDLCUDA
_DLPACK_DEVICE_NAMES = {1: "CPU (kDLCPU)", 3: "pinned host memory (kDLCUDAHost)", 8: "Vulkan", 10: "ROCm"}


# ---------------------------------------------------------------------------- dtypes

# Element dtype names of torch (after "torch.") and numpy/ml_dtypes that differ from ours.
_DTYPE_ALIASES = {
    "bool": "int1",
    "float8_e4m3fn": "float8e4nv",
    "float8_e5m2": "float8e5",
}
# __cuda_array_interface__ typestr kind letter -> our kind prefix (size in bytes follows).
_TYPESTR_KINDS = {"f": "float", "i": "int", "u": "uint"}
# DLPack DLDataTypeCode -> our kind prefix (bits follow).
_DLPACK_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}


def _dtype_from(name: str, param: str, found: str) -> ir.DType:
    try:
        return ir.dtype_from_name(_DTYPE_ALIASES.get(name, name))
    except ValueError:
        raise TypeError(f"parameter {param!r}: element type {found} has no gluonkit dtype") from None


_DTYPES_SEEN: dict = {}  # torch / numpy dtype object -> ir.DType (dtype_of runs on every launch)


def dtype_of(obj, param: str = "?") -> ir.DType:
    """The gluonkit element dtype of a torch tensor, numpy/CuPy array, CAI or DLPack object."""
    dtype = getattr(obj, "dtype", None)
    if dtype is not None:
        known = _DTYPES_SEEN.get(dtype)
        if known is not None:
            return known
        text = str(dtype)
        if text.startswith("torch."):
            known = _dtype_from(text[len("torch."):], param, text)
        else:
            name = getattr(dtype, "name", None)  # numpy dtype (CuPy arrays use numpy dtypes)
            known = _dtype_from(name, param, f"numpy {name}") if isinstance(name, str) else None
        if known is not None:
            _DTYPES_SEEN[dtype] = known
            return known
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        typestr = cai["typestr"]
        kind, size = typestr[1], typestr[2:]
        if kind == "b" and size == "1":
            return ir.int1
        if kind in _TYPESTR_KINDS and size.isdigit():
            return _dtype_from(f"{_TYPESTR_KINDS[kind]}{int(size) * 8}", param, f"typestr {typestr!r}")
        raise TypeError(f"parameter {param!r}: __cuda_array_interface__ typestr {typestr!r} has no gluonkit dtype")
    if hasattr(obj, "__dlpack__"):
        code, bits, lanes = _dlpack_tensor(obj, param)[2]
        if code == 6 and bits == 8:  # kDLBool
            return ir.int1
        if lanes != 1 or code not in _DLPACK_CODES:
            raise TypeError(f"parameter {param!r}: DLPack dtype (code {code}, bits {bits}, lanes {lanes}) "
                            "has no gluonkit dtype")
        return _dtype_from(f"{_DLPACK_CODES[code]}{bits}", param, f"DLPack (code {code}, bits {bits})")
    raise TypeError(f"parameter {param!r}: cannot tell the element dtype of {type(obj).__name__}")


def _is_array_like(obj) -> bool:
    return (hasattr(obj, "data_ptr") or hasattr(obj, "__cuda_array_interface__")
            or hasattr(obj, "__dlpack__") or hasattr(obj, "__array_interface__"))


_DESCRIPTOR_CLASSES: tuple = ()  # host TMA descriptor classes, registered by gluonkit.nvidia


def register_descriptor_class(cls: type) -> None:
    """Make instances of ``cls`` (a host TMA descriptor, defined in :mod:`gluonkit.nvidia`, which
    builds on this module) kernel arguments typed by their ``block_type``."""
    global _DESCRIPTOR_CLASSES
    if cls not in _DESCRIPTOR_CLASSES:
        _DESCRIPTOR_CLASSES += (cls,)


def _is_tensor_descriptor(obj) -> bool:
    return isinstance(obj, _DESCRIPTOR_CLASSES)


def ir_type_of(value, param: str = "?"):
    """The IR type of a runtime argument, by Triton's rules (see the module docstring).

    numpy scalars are typed by value like Python ones (``np.int64(5)`` -> ``int32``).
    """
    if isinstance(value, (bool, np.bool_)):
        return ir.int1
    if isinstance(value, numbers.Integral):
        value = int(value)
        if -2**31 <= value < 2**31:
            return ir.int32
        if -2**63 <= value < 2**63:
            return ir.int64
        if 2**63 <= value < 2**64:
            return ir.uint64
        raise ValueError(f"parameter {param!r}: integer {value} does not fit in 64 bits")
    if isinstance(value, numbers.Real):
        return ir.float32
    if _is_tensor_descriptor(value):
        return value.arg_type
    if _is_array_like(value):
        return ir.PointerType(dtype_of(value, param))
    raise TypeError(f"parameter {param!r}: expected an int, float, bool or a device array "
                    f"(torch/CuPy/DLPack/__cuda_array_interface__), got {type(value).__name__}")


# ---------------------------------------------------------------------------- device pointers


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """The head of ``DLManagedTensor`` (its first member is this ``DLTensor``), DLPack 0.x/1.x."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_tensor(obj, param: str) -> tuple[int, tuple[int, int], tuple[int, int, int]]:
    """``(data address, (device type, device id), (dtype code, bits, lanes))`` of a DLPack producer.

    The capsule is read, not consumed: its deleter releases the producer's bookkeeping when
    it is collected, while ``obj`` keeps owning the memory.  ``stream=-1`` asks the producer
    not to synchronise any stream (we only want the address).
    """
    try:
        capsule = obj.__dlpack__(stream=-1)
    except TypeError:  # producers that take no stream argument
        capsule = obj.__dlpack__()
    address = _capsule_pointer(capsule, b"dltensor")
    if not address:
        raise TypeError(f"parameter {param!r}: __dlpack__ did not return a 'dltensor' capsule")
    t = _DLTensor.from_address(address)
    data = (t.data or 0) + t.byte_offset
    return data, (t.device.device_type, t.device.device_id), (t.dtype.code, t.dtype.bits, t.dtype.lanes)


def _check_device(param: str, found: int, device: Optional[int]) -> None:
    if device is not None and found != device:
        raise ValueError(f"parameter {param!r}: tensor is on CUDA device {found}, but the kernel "
                         f"runs on the current device {device}; move it or switch devices")


def _check_dlpack_device(param: str, obj, device: Optional[int]) -> None:
    device_type, device_id = obj.__dlpack_device__()
    if device_type not in (DLPACK_CUDA, _DLPACK_CUDA_MANAGED):
        where = _DLPACK_DEVICE_NAMES.get(device_type, f"DLPack device type {device_type}")
        raise ValueError(f"parameter {param!r}: expected a CUDA device array, got one in {where}; "
                         "move it to the GPU first")
    _check_device(param, device_id, device)


def data_pointer(obj, param: str = "?", device: Optional[int] = None) -> int:
    """The device address ``obj`` stands for, checking it lives on CUDA device ``device``.

    ``obj`` is a raw address (``int``), a torch tensor, an object with
    ``__cuda_array_interface__`` or a DLPack producer.  ``device=None`` skips the device check.
    """
    if isinstance(obj, int) and not isinstance(obj, bool):
        if not 0 <= obj < 2**64:
            raise ValueError(f"parameter {param!r}: a raw device pointer must be in [0, 2**64), got {obj}")
        return obj
    if hasattr(obj, "data_ptr") and hasattr(obj, "is_cuda"):  # torch (cheap attributes first)
        if not obj.is_cuda:
            raise ValueError(f"parameter {param!r}: expected a CUDA tensor, got a tensor on "
                             f"{obj.device}; move it with .cuda() or .to('cuda')")
        if device is not None:
            _check_device(param, obj.get_device(), device)
        return obj.data_ptr()
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        if hasattr(obj, "__dlpack_device__"):  # CAI has no device field; CuPy also speaks DLPack
            _check_dlpack_device(param, obj, device)
        return cai["data"][0] or 0
    if hasattr(obj, "__dlpack_device__") and hasattr(obj, "__dlpack__"):
        _check_dlpack_device(param, obj, device)
        return _dlpack_tensor(obj, param)[0]
    raise TypeError(f"parameter {param!r}: expected a CUDA device array (torch tensor, CuPy array, "
                    f"DLPack or __cuda_array_interface__ object) or a raw device pointer (int), "
                    f"got {type(obj).__name__}")


# ---------------------------------------------------------------------------- scalars

# ``struct`` codes of the parameter types (their sizes equal their C alignments).
_INT_CODES = {
    "int1": "b", "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
}
# Finite magnitudes at or above these round to infinity in the dtype (largest finite + half an ulp).
_OVERFLOW_AT = {"float16": 65520.0, "bfloat16": 2.0**128 - 2.0**119, "float32": 2.0**128 - 2.0**103}


def _int_converter(dtype: ir.DType, param: str) -> Callable:
    if dtype.is_bool():
        lo, hi = 0, 1
    elif dtype.is_int_signed():
        lo, hi = -2 ** (dtype.primitive_bitwidth - 1), 2 ** (dtype.primitive_bitwidth - 1) - 1
    else:
        lo, hi = 0, 2 ** dtype.primitive_bitwidth - 1

    def convert(value, device):
        try:
            number = operator.index(value)
        except TypeError:
            raise TypeError(f"parameter {param!r}: expected an integer for {dtype}, "
                            f"got {type(value).__name__} {value!r}") from None
        if not lo <= number <= hi:
            raise ValueError(f"parameter {param!r}: {number} does not fit in {dtype} (range [{lo}, {hi}])")
        return number
    return convert


def _real(value, dtype, param: str) -> float:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
        raise TypeError(f"parameter {param!r}: expected a real number for {dtype}, "
                        f"got {type(value).__name__} {value!r}")
    return float(value)


def _float_converter(dtype: ir.DType, param: str) -> Callable:
    overflow_at = _OVERFLOW_AT.get(dtype.name)

    def in_range(value) -> float:
        number = _real(value, dtype, param)
        if overflow_at is not None and math.isfinite(number) and abs(number) >= overflow_at:
            raise ValueError(f"parameter {param!r}: {number} overflows {dtype} (rounds to infinity)")
        return number

    if dtype.name in ("float32", "float64"):
        return lambda value, device: in_range(value)
    if dtype.name == "float16":
        return lambda value, device: struct.unpack("<H", struct.pack("<e", in_range(value)))[0]
    return lambda value, device: _bfloat16_bits(in_range(value))


def _bfloat16_bits(number: float) -> int:
    """The bfloat16 bit pattern of ``number``, rounded to nearest even (NaN stays NaN)."""
    bits = struct.unpack("<I", struct.pack("<f", number))[0]
    if math.isnan(number):
        return (bits >> 16) | 0x40
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _descriptor_converter(ty: ir.TensorDescType, param: str) -> Callable:
    """Converter of a TensorDescriptor argument: (tensor map, *shape, *strides)."""
    def convert(value, device):
        if not _is_tensor_descriptor(value):
            raise TypeError(f"parameter {param!r}: expected a TensorDescriptor, got {type(value).__name__}")
        if ir_type_of(value, param) != ty:
            raise TypeError(f"parameter {param!r}: the kernel was compiled for a descriptor of type {ty}, "
                            f"got one of type {ir_type_of(value, param)}")
        for extent in value.shape:
            if extent >= 2**31:
                raise ValueError(f"parameter {param!r}: dimension {extent} of the descriptor does not fit the "
                                 "int32 shape kernels see")
        return (value.kernel_arg_bytes(), *value.shape, *value.strides)
    return convert


def _code_and_converter(ty, param: str):
    """The ``struct`` code(s) of parameter type ``ty`` and the converter of its values.

    A descriptor has several codes (several kernel parameters); its converter returns a tuple.
    """
    if isinstance(ty, ir.TensorDescType):
        return ["128s"] + ["i"] * ty.rank + ["q"] * ty.rank, _descriptor_converter(ty, param)
    if isinstance(ty, ir.PointerType):
        def pointer(value, device):
            # torch tensors first, without the general protocol checks (the launch hot path).
            if getattr(value, "is_cuda", False) and (device is None or value.get_device() == device):
                return value.data_ptr()
            return data_pointer(value, param, device)
        return "Q", pointer
    if isinstance(ty, ir.DType):
        if ty.is_int():
            return _INT_CODES[ty.name], _int_converter(ty, param)
        if ty.name in ("float16", "bfloat16"):
            return "H", _float_converter(ty, param)
        if ty.name in ("float32", "float64"):
            return ("f" if ty.name == "float32" else "d"), _float_converter(ty, param)
    raise TypeError(f"parameter {param!r}: kernel arguments of type {ty} are not supported")


# ---------------------------------------------------------------------------- packing


_MAX_ALIGN = 64  # the strictest parameter alignment (a tensor map)


class PackedArgs:
    """An argument block: a buffer holding the parameters and the ``void*[]`` pointing into it.

    The parameters start ``offset`` bytes into ``buffer`` (64-byte aligned);
    ``kernel_params`` is the array's address (0 for a kernel without parameters).
    """

    __slots__ = ("buffer", "offset", "params", "kernel_params")

    def __init__(self, size: int, offsets: Sequence[int]):
        # 64 spare bytes so the block can start 64-byte aligned (tensor maps are .align 64).
        self.buffer = ctypes.create_string_buffer(max(size, 1) + _MAX_ALIGN)
        base = -(-ctypes.addressof(self.buffer) // _MAX_ALIGN) * _MAX_ALIGN
        self.offset = base - ctypes.addressof(self.buffer)
        self.params = (ctypes.c_void_p * len(offsets))(*[base + off for off in offsets])
        self.kernel_params = ctypes.addressof(self.params) if offsets else 0


class ArgPacker:
    """Packs arguments for one kernel signature (a list of IR scalar/pointer types)."""

    def __init__(self, signature: Sequence, names: Sequence[str]):
        if len(signature) != len(names):
            raise ValueError(f"ArgPacker: {len(signature)} types but {len(names)} parameter names")
        self.names = list(names)
        self._converters, self._offsets, fmt, size = [], [], "<", 0
        self._flatten = False  # whether a converter returns several values (a descriptor)
        for ty, name in zip(signature, names):
            codes, convert = _code_and_converter(ty, name)
            if isinstance(codes, list):
                self._flatten = True
            for code in codes if isinstance(codes, list) else [codes]:
                width = struct.calcsize("<" + code)
                align = _MAX_ALIGN if code == "128s" else width  # natural alignment, as in a C struct
                offset = -(-size // align) * align
                fmt += "x" * (offset - size) + code
                size = offset + width
                self._offsets.append(offset)
            self._converters.append(convert)
        self._format = struct.Struct(fmt)
        self._local = threading.local()

    def pack(self, args: Sequence, device: Optional[int] = None) -> PackedArgs:
        """Convert ``args`` (one per parameter) into this thread's argument block and return it.

        ``device`` (an ordinal) is checked against device arrays' devices; ``None`` skips the
        check.  The block is overwritten by the next ``pack`` of this packer on this thread,
        so launch before packing again.
        """
        if len(args) != len(self._converters):
            raise TypeError(f"kernel takes {len(self._converters)} runtime arguments "
                            f"({', '.join(self.names)}), got {len(args)}")
        block = getattr(self._local, "block", None)
        if block is None:
            block = self._local.block = PackedArgs(self._format.size, self._offsets)
        values = [convert(a, device) for convert, a in zip(self._converters, args)]
        if self._flatten:
            values = [x for v in values for x in (v if isinstance(v, tuple) else (v,))]
        self._format.pack_into(block.buffer, block.offset, *values)
        return block

    def pack_raw(self, values: Sequence, own: bool = False) -> PackedArgs:
        """Like :meth:`pack` for values already converted (device addresses, numbers whose
        range the caller has checked): the launch fast path.  The block is reused by the
        next call in this thread, unless ``own`` asks for a block of the caller's own (kept
        to launch with the same arguments again: :func:`gluonkit.runtime.launch.bind`)."""
        block = None if own else getattr(self._local, "block", None)
        if block is None:
            block = PackedArgs(self._format.size, self._offsets)
            if not own:
                self._local.block = block
        if self._flatten:  # a descriptor's raw value is the tuple (map, *shape, *strides)
            values = [x for v in values for x in (v if isinstance(v, tuple) else (v,))]
        self._format.pack_into(block.buffer, block.offset, *values)
        return block
