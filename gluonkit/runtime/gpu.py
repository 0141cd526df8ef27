"""Launching kernels on the GPU: specialize, compile (with an on-disk cache), load, launch.

For each launch the runtime arguments are typed (Triton's rules, :mod:`.args`) and
specialized on divisibility by 16 (device pointers and integers).  The first launch of a
specialization builds the IR, compiles it for the device's target
(:func:`gluonkit.lower.compiler.compile_function`) — or finds the cubin and PTX in the
on-disk cache (keyed by :func:`.cache.kernel_key`) — loads the module and
keeps a :class:`CompiledLaunch`; later launches only pack the arguments and call
``cuLaunchKernel`` on torch's current stream (the legacy default stream without torch).
"""

from __future__ import annotations

import json
import struct
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..ir import PointerType, TensorDescType
from ..lang.constexpr import constexpr
from ..lang.launch_options import PORTABLE_NUM_CTAS
from ..lower.compiler import CompiledKernel, compile_function, dump_stages
from ..nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from . import driver
from .args import ArgPacker, data_pointer, ir_type_of
from .cache import KernelCache, kernel_key

__all__ = ["CompiledLaunch", "GraphCaptureError", "compile_for_device", "current_stream", "load_for_launch",
           "stream_handle", "stream_of", "stream_reader", "signature_of", "signature_and_raw"]


@dataclass
class CompiledLaunch:
    """A loaded kernel and what each launch of it needs."""

    compiled: CompiledKernel
    kernel: driver.Kernel
    packer: ArgPacker
    block: Tuple[int, int, int]
    shared_bytes: int
    device: int
    tuple_args: bool = False  # whether some runtime arguments are tuples (packed element by element)
    num_ctas: int = 1  # CTAs per cluster: the launch grid's x is this many times the program grid's

    def run(self, grid: Sequence[int], values: Sequence[Any], raw: Optional[Sequence[Any]] = None,
            stream: Optional[int] = None) -> None:
        """Pack ``values`` (the runtime arguments) and launch over ``grid`` (1 to 3 ints) on
        ``stream`` (a raw ``CUstream`` handle; ``None``: :func:`current_stream`).

        ``raw``, when given, holds the values already converted for the argument block (see
        :func:`signature_and_raw`), which skips the packer's conversions.
        """
        if self.tuple_args:
            values = flatten_tuple_args(values)
        if raw is not None:
            try:
                packed = self.packer.pack_raw(raw)
            except (struct.error, OverflowError):  # a number the block cannot hold: the packer's checks say which
                raw = None
        if raw is None:
            packed = self.packer.pack(values, self.device)
        if len(grid) < 3:
            grid = tuple(grid) + (1,) * (3 - len(grid))
        if 0 in grid:
            return
        if self.num_ctas > 1:  # the PTX fixes the cluster shape (.reqnctapercluster num_ctas, 1, 1)
            grid = (grid[0] * self.num_ctas, grid[1], grid[2])
        self.kernel.launch(grid, self.block, self.shared_bytes, current_stream() if stream is None else stream, packed)


_launches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # JITFunction -> {key: CompiledLaunch}


def compile_for_device(func, target: str, instrument=None) -> CompiledKernel:
    """``compile_function`` through the on-disk cache (IR, PTX, cubin and metadata).

    An entry that is missing, damaged or incomplete is a miss: the kernel is compiled
    again and the entry replaced (:mod:`.cache`).  ``instrument``: the
    :class:`~gluonkit.lower.instrument.TimelineOptions` of a measured-timeline build
    (:mod:`gluonkit.runtime.timeline`), ``None`` for none.
    """
    cache = KernelCache()
    key = kernel_key(func, target, instrument)
    compiled = _from_cache(cache.get(key), func, target)
    if compiled is not None:
        dump_stages(compiled)  # GLUONKIT_DUMP_DIR sees cached kernels too (no llir: not kept)
        return compiled
    compiled = compile_function(func, target, instrument=instrument)
    metadata = {k: v for k, v in compiled.metadata.items() if k != "arg_types"}
    stored = {"kernel.ir": compiled.asm["ir"], "kernel.ptx": compiled.asm["ptx"], "metadata.json": json.dumps(metadata)}
    if "cubin" in compiled.asm:
        stored["kernel.cubin"] = compiled.asm["cubin"]
    cache.put(key, stored)
    return compiled


def _from_cache(files: Optional[Dict[str, bytes]], func, target: str) -> Optional[CompiledKernel]:
    """The kernel stored in an intact entry's ``files``; ``None`` when one of them is missing or unreadable."""
    if files is None:
        return None
    try:
        compiled = CompiledKernel(func.name, target)
        compiled.asm["ir"] = files["kernel.ir"].decode()
        compiled.asm["ptx"] = files["kernel.ptx"].decode()
        if "kernel.cubin" in files:
            compiled.asm["cubin"] = files["kernel.cubin"]
        compiled.metadata.update(json.loads(files["metadata.json"]))
    except (KeyError, ValueError):  # ValueError covers bad UTF-8 and bad JSON
        return None
    compiled.metadata["arg_types"] = [a.type for a in func.args]
    return compiled


def current_stream() -> int:
    """torch's current CUDA stream once torch has used CUDA, else the legacy default stream.

    torch is never imported here: a program that did not import it launches on stream 0."""
    if not _torch_cuda_ready():
        return 0
    return _torch_cuda._cuda_getCurrentRawStream(_torch_cuda._cuda_getDevice())


def stream_of(device: int) -> int:
    """Like :func:`current_stream`, for device ``device`` (the one a loaded kernel runs on)
    rather than torch's current device."""
    if not _torch_cuda_ready():
        return 0
    return _torch_cuda._cuda_getCurrentRawStream(device)


def stream_reader() -> Callable[[int], int]:
    """The cheapest function of a device ordinal that does what :func:`stream_of` does now:
    torch's own once torch has used CUDA (which stays so), else :func:`stream_of`."""
    return _torch_cuda._cuda_getCurrentRawStream if _torch_cuda_ready() else stream_of


def _torch_cuda_ready() -> bool:
    """Whether torch is imported and has initialized CUDA; its ``torch._C`` is kept then."""
    global _torch_cuda
    if _torch_cuda is None:
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_initialized():
            return False
        _torch_cuda = torch._C  # initialized CUDA stays initialized: ask only once
    return True


_torch_cuda = None


def stream_handle(stream) -> int:
    """The raw ``CUstream`` handle of ``stream``: an int as it is, a ``torch.cuda.Stream``'s
    ``cuda_stream``, a CuPy stream's ``ptr``, a cuda-python ``CUstream`` by ``int()``."""
    if type(stream) is int:
        return stream
    for attr in ("cuda_stream", "ptr"):
        handle = getattr(stream, attr, None)
        if isinstance(handle, int):
            return handle
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(f"stream must be a CUDA stream (an int handle, a torch.cuda.Stream, a CuPy stream or a "
                        f"CUstream), got {type(stream).__name__}") from None


def signature_of(value) -> tuple:
    """A cheap summary of one runtime argument that fixes its IR type and specialization.

    Tensors: dtype, device and whether the address is 16-byte aligned; ints: width class
    and divisibility by 16; TMA descriptors: block shape, dtype and layout.  ``None`` for values that are compile-time (``None``,
    ``gl.constexpr``).  Anything else falls back to the full typing rules.
    """
    return signature_and_raw(value)[0]


def signature_and_raw(value) -> Tuple[Optional[tuple], Any]:
    """``(signature_of(value), what the argument block holds for it)``; the raw part is
    ``None`` when the value needs the packer's full conversion (CuPy, DLPack, ...)."""
    kind = type(value)
    if kind is int:
        width = 32 if -2**31 <= value < 2**31 else 64 if -2**63 <= value < 2**63 else 65
        return (int, width, value % 16 == 0), value
    if kind is float or kind is bool:
        return (kind,), value
    if value is None or isinstance(value, constexpr):
        return None, None
    if kind is tuple:  # a tuple argument: its elements' signatures, compile-time elements by value
        return (tuple,) + tuple(signature_of(v) or ("constexpr", _constexpr_key(v)) for v in value), None
    if kind is TensorDescriptor or kind is TensorDescriptorIm2Col:  # the kernel takes (map, *shape, *strides)
        signature = (kind, value.block_shape, value.dtype, value.layout, value.is_cuda, len(value.shape))
        if not value.is_cuda or max(value.shape) >= 2**31:
            return signature, None  # the packer's conversion says what is wrong
        return signature, (value.kernel_arg_bytes(), *value.shape, *value.strides)
    if getattr(value, "is_cuda", False):  # a torch CUDA tensor
        address = value.data_ptr()
        return (value.dtype, value.get_device(), address % 16 == 0), address
    data_ptr = getattr(value, "data_ptr", None)
    if data_ptr is not None and hasattr(value, "dtype"):  # another torch tensor: the packer says why not
        return (value.dtype, data_ptr() % 16 == 0), None
    ty = ir_type_of(value)  # raises for a value of no kernel type
    aligned = isinstance(ty, PointerType) and data_pointer(value) % 16 == 0  # CuPy, DLPack: as the compile sees it
    return (kind, repr(ty), aligned), None


def _constexpr_key(value):
    value = value.value if isinstance(value, constexpr) else value
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def flatten_tuple_args(values: Sequence[Any]) -> List[Any]:
    """The runtime arguments with tuples replaced by their runtime elements (depth first)."""
    out: List[Any] = []
    for v in values:
        if type(v) is tuple:
            out += flatten_tuple_args([x for x in v if x is not None and not isinstance(x, constexpr)])
        else:
            out.append(v)
    return out


def _tuple_leaves(name: str, ty) -> List[Tuple[str, Any]]:
    """(flat name, type) of the runtime leaves of a tuple argument's type, as the packer sees them."""
    if isinstance(ty, tuple):
        return [leaf for i, t in enumerate(ty) for leaf in _tuple_leaves(f"{name}_{i}", t)]
    return [] if isinstance(ty, constexpr) else [(name, ty)]


def _runtime_key(name: str, value) -> Tuple[Any, bool]:
    """(IR type, divisible by 16) of one runtime argument; a tuple's type is the tuple of its
    elements' types (``gl.constexpr`` for compile-time ones), never specialized."""
    if type(value) is tuple:
        return tuple(constexpr(v.value if isinstance(v, constexpr) else v) if v is None or isinstance(v, constexpr)
                     else _runtime_key(name, v)[0] for v in value), False
    ty = ir_type_of(value, name)
    if isinstance(ty, TensorDescType):
        return ty, False
    if isinstance(ty, PointerType):
        return ty, data_pointer(value, name) % 16 == 0
    if ty.is_int() and not ty.is_bool():
        return ty, int(value) % 16 == 0
    return ty, False


class GraphCaptureError(RuntimeError):
    """A launch that needs compiling or loading while its stream is being captured into a CUDA graph."""


def load_for_launch(kernel, names: List[str], values: List[Any], constexprs: Dict[str, Any], num_warps: int,
                    no_specialize: set, maxnreg: Optional[int] = None, num_ctas: int = 1,
                    instrument=None) -> CompiledLaunch:
    """The loaded kernel for runtime arguments like ``values``, compiled and loaded on first use;
    the caller launches it (:meth:`CompiledLaunch.run`) and may keep it for a faster path
    (:mod:`gluonkit.runtime.launch`, :mod:`gluonkit.runtime.precompiled`).  ``instrument``:
    the timeline options of the measured-timeline build (:mod:`gluonkit.runtime.timeline`), ``None`` for none.

    Compiling and loading a module cannot be recorded in a CUDA graph, so a first use while
    the current stream is capturing raises :class:`GraphCaptureError`, which says to launch
    (or ``warmup``) the kernel once before capturing.
    """
    signature = tuple(map(signature_of, values))
    try:
        cache_key = (signature, tuple(constexprs.values()), num_warps, maxnreg, num_ctas, instrument)
        hash(cache_key)
    except TypeError:  # a list or another unhashable constexpr: its text identifies it
        cache_key = (signature, repr(tuple(constexprs.values())), num_warps, maxnreg, num_ctas, instrument)
    per_kernel = _launches.get(kernel)
    if per_kernel is None:
        per_kernel = _launches[kernel] = {}
    entry = per_kernel.get(cache_key)
    if entry is None:
        _refuse_during_capture(kernel)
        keys = [_runtime_key(n, v) for n, v in zip(names, values)]
        entry = per_kernel[cache_key] = _compile_and_load(kernel, names, keys, constexprs, num_warps, no_specialize,
                                                          maxnreg, num_ctas, instrument)
    return entry


def _refuse_during_capture(kernel) -> None:
    """Raise :class:`GraphCaptureError` when the stream a launch would use is capturing."""
    stream = current_stream()
    if stream == 0:  # the legacy default stream cannot capture
        return
    driver.ensure_context()
    status = driver.call("cuStreamIsCapturing", stream)
    if int(status) != 0:  # CU_STREAM_CAPTURE_STATUS_NONE
        raise GraphCaptureError(
            f"{kernel.__name__} is launched for the first time with these argument types and compile-time "
            "values while the stream is being captured into a CUDA graph; compiling and loading a kernel "
            f"cannot be captured. Launch it once before capturing, or call {kernel.__name__}.warmup(..., "
            "grid=...) with the same arguments.")


def _compile_and_load(kernel, names, keys, constexprs, num_warps, no_specialize, maxnreg,
                      num_ctas=1, instrument=None) -> CompiledLaunch:
    driver.ensure_context()
    target = driver.device_properties().arch
    arg_types = [ty for ty, _ in keys]
    specialization = {n: {"divisibility": 16} for n, (_, div) in zip(names, keys) if div and n not in no_specialize}
    func = kernel.build_ir(arg_types, constexprs, num_warps, specialization, num_ctas=num_ctas, maxnreg=maxnreg)
    compiled = compile_for_device(func, target, instrument)
    module = driver.load_module(compiled.asm.get("cubin"), compiled.asm["ptx"])
    loaded = module.get_kernel(func.name)
    shared = int(compiled.metadata.get("shared", 0))
    loaded.set_dynamic_shared_memory(shared)
    if num_ctas > PORTABLE_NUM_CTAS:
        loaded.allow_non_portable_clusters()
    leaves = [leaf for n, ty in zip(names, arg_types) for leaf in _tuple_leaves(n, ty)]
    packer = ArgPacker([ty for _, ty in leaves], [n for n, _ in leaves])
    return CompiledLaunch(compiled, loaded, packer, (compiled.metadata["num_threads"], 1, 1), shared, driver.current_device(),
                          any(isinstance(ty, tuple) for ty in arg_types), num_ctas)
