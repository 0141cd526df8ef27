"""The CUDA driver through cuda-python: initialisation, context, device facts, modules, kernels.

Everything here is lazy: importing this module touches no driver, so gluonkit imports and
its CPU tests run on machines without ``libcuda``.  The first call that needs the GPU runs
``cuInit``, retains the device's *primary* context (the one torch and CuPy use too, so
pointers are shared with them) and makes it current on the calling thread.

Every driver call goes through :func:`call` / :func:`check`, which turn a failing
``CUresult`` into a :class:`CudaError` that names the call, the error and its description.

Launch overhead.  :meth:`Kernel.launch` is the hot path of ``kernel[grid](...)``.  It
takes an already packed argument block (see :mod:`gluonkit.runtime.args`: a per-thread
buffer holding every argument and a ``void*[]`` of their addresses, built once per
signature) and hands the array's *address* (a plain int) to ``cuLaunchKernel``, so
cuda-python converts no arguments.  What is left per launch is one binding call and one
comparison of its result: no context query and no attribute query (dynamic shared memory
is configured once per new size in :meth:`Kernel.set_dynamic_shared_memory`).  Measured on
an H100 host (cuda-bindings 13.3, batches of 250 launches of a one-block kernel, median):
about 5 us per pre-packed launch, the same as the bare driver call through ctypes; about
6 us including packing two arguments (6.5 us from a torch tensor); Triton 3.6's
``kernel[(1,)](t, 1)`` took about 16-19 us in the same run.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Optional, Sequence

_NOT_LOADED = object()
# cuda-python's driver module once bindings() has imported it (None: not installed).  Code that
# runs only after a driver call (a loaded module, a kernel, a device's properties) reads it directly.
_cu = _NOT_LOADED

__all__ = [
    "CudaError", "OutOfResources", "DriverUnavailable", "call", "check", "has_gpu",
    "ensure_context", "current_device", "DeviceProperties", "device_properties",
    "Module", "Kernel", "load_module", "check_shared_memory", "DeviceBuffer", "synchronize",
    "STATIC_SHARED_MEMORY_LIMIT", "bindings",
]

log = logging.getLogger("gluonkit.runtime")

# Kernels may use this much shared memory without opting in (CUDA's historical 48 KiB).
STATIC_SHARED_MEMORY_LIMIT = 48 * 1024


class DriverUnavailable(RuntimeError):
    """cuda-python or the NVIDIA driver (``libcuda``) cannot be used on this machine."""


class CudaError(RuntimeError):
    """A driver call returned an error.

    ``call`` is the driver function's name, ``result`` the ``CUresult``, ``name`` its
    symbolic name (``CUDA_ERROR_INVALID_VALUE``) and ``description`` the driver's text.
    """

    def __init__(self, call_name: str, result, detail: str = ""):
        self.call = call_name
        self.result = result
        self.name, self.description = _describe(result)
        text = f"{call_name} failed: {self.name} ({self.description})"
        super().__init__(f"{text}: {detail}" if detail else text)


class OutOfResources(Exception):
    """A kernel needs more of a per-block resource than the device has.

    The message matches Triton's ``OutOfResources`` so that code catching it by text (for
    example autotuners pruning configurations) behaves the same.
    """

    def __init__(self, required: int, limit: int, name: str):
        self.required = required
        self.limit = limit
        self.name = name
        super().__init__(
            f"out of resource: {name}, Required: {required}, Hardware limit: {limit}. "
            "Reducing block sizes or `num_stages` may help."
        )


def bindings():
    """cuda-python's driver module, ``None`` when cuda-python is not installed.

    Imported on first use, not with gluonkit: it is about 50 modules and 80 ms of CPU, which
    compiling without launching and the interpreter never need."""
    global _cu
    if _cu is _NOT_LOADED:
        try:  # cuda-python >= 12.6 ships the driver as cuda.bindings.driver ...
            from cuda.bindings import driver as cu
        except ImportError:  # pragma: no cover - older layouts (cuda-python < 12.6)
            try:
                from cuda import cuda as cu  # type: ignore[no-redef]
            except ImportError:
                cu = None
        _cu = cu
    return _cu


def _describe(result) -> tuple[str, str]:
    """Symbolic name and description of a ``CUresult``; works even without ``libcuda``."""
    name = getattr(result, "name", None) or f"CUresult {int(result)}"
    description = "no description available"
    cu = bindings()
    if cu is not None:
        try:
            err, text = cu.cuGetErrorString(result)
            if err == cu.CUresult.CUDA_SUCCESS and text:
                description = text.decode() if isinstance(text, bytes) else str(text)
        except Exception:  # the driver library itself is missing: keep the enum's name
            pass
    return name, description


def check(result, call_name: str):
    """Return the values of a cuda-python call's result, raising :class:`CudaError` on failure.

    cuda-python returns ``(CUresult,)``, ``(CUresult, value)`` or ``(CUresult, v1, v2, ...)``;
    this gives ``None``, ``value`` or ``(v1, v2, ...)`` respectively.
    """
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if err != bindings().CUresult.CUDA_SUCCESS:
        raise CudaError(call_name, err)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def call(name: str, *args):
    """Call driver function ``name`` (``"cuDeviceGet"``) with ``args`` and :func:`check` it."""
    cu = bindings()
    if cu is None:
        raise DriverUnavailable("cuda-python is not installed (pip install 'cuda-python>=12.6')")
    return check(getattr(cu, name)(*args), name)


# ---------------------------------------------------------------------------- initialisation

_lock = threading.Lock()
_initialized = False
_primary_contexts: dict[int, object] = {}  # device ordinal -> retained primary CUcontext


def _init() -> None:
    """Run ``cuInit`` once per process; raise :class:`DriverUnavailable` if it cannot run."""
    global _initialized
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        cu = bindings()
        if cu is None:
            raise DriverUnavailable("cuda-python is not installed (pip install 'cuda-python>=12.6')")
        try:
            result = cu.cuInit(0)
        except Exception as exc:  # libcuda.so not found / not loadable
            raise DriverUnavailable(f"the NVIDIA driver library could not be loaded: {exc}") from exc
        check(result, "cuInit")
        _initialized = True


def has_gpu() -> bool:
    """Whether a CUDA device can be used: cuda-python, ``libcuda`` and at least one device.

    Never raises; any failure (no package, no driver library, ``cuInit`` error, zero
    devices) means ``False``.
    """
    try:
        _init()
        return call("cuDeviceGetCount") > 0
    except Exception:
        return False


def device_count() -> int:
    """How many CUDA devices this process sees (``CUDA_VISIBLE_DEVICES`` applied); 0 where
    none can be used.  A count found is kept: it cannot change while the process runs."""
    global _device_count
    if _device_count is None:
        try:
            _init()
            _device_count = int(call("cuDeviceGetCount"))
        except Exception:
            return 0
    return _device_count


_device_count: Optional[int] = None


def _default_ordinal() -> int:
    """The device used when no context is current: ``GLUONKIT_DEVICE`` or 0."""
    text = os.environ.get("GLUONKIT_DEVICE", "0")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"GLUONKIT_DEVICE must be a device ordinal (an integer), got {text!r}") from None


def ensure_context():
    """The calling thread's current context, making a device's primary context current first
    if the thread has none (the device is ``GLUONKIT_DEVICE``, default 0).

    A context made current by someone else (torch, CuPy, the user) is respected.
    """
    _init()
    ctx = call("cuCtxGetCurrent")
    if ctx is not None and int(ctx) != 0:
        return ctx
    ordinal = _default_ordinal()
    with _lock:
        ctx = _primary_contexts.get(ordinal)
        if ctx is None:
            count = call("cuDeviceGetCount")
            if not 0 <= ordinal < count:
                raise ValueError(f"device ordinal must be in [0, {count}), got {ordinal} (GLUONKIT_DEVICE)")
            ctx = call("cuDevicePrimaryCtxRetain", call("cuDeviceGet", ordinal))
            _primary_contexts[ordinal] = ctx
    call("cuCtxSetCurrent", ctx)
    return ctx


def current_device() -> int:
    """Ordinal of the device of the calling thread's current context (see :func:`ensure_context`)."""
    ensure_context()
    return int(call("cuCtxGetDevice"))


def synchronize() -> None:
    """Wait for all work of the current context to finish (errors of past launches surface here)."""
    ensure_context()
    call("cuCtxSynchronize")


# ---------------------------------------------------------------------------- device facts


@dataclass(frozen=True)
class DeviceProperties:
    """What the runtime needs to know about one device."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_shared_memory_per_block: int  # without opting in (48 KiB on every current GPU)
    max_shared_memory_per_block_optin: int  # with cuFuncSetAttribute (227 KiB on H100)
    max_threads_per_block: int
    warp_size: int
    driver_version: int  # e.g. 12080 for CUDA 12.8

    @property
    def arch(self) -> str:
        """The ptxas architecture name: ``sm_90a`` on Hopper, ``sm_100a`` on Blackwell, else ``sm_XY``."""
        major, minor = self.compute_capability
        suffix = "a" if major >= 9 else ""
        return f"sm_{major}{minor}{suffix}"


_properties: dict[int, DeviceProperties] = {}


def device_properties(ordinal: Optional[int] = None) -> DeviceProperties:
    """Properties of device ``ordinal`` (default: the current device); cached per device."""
    if ordinal is None:
        ordinal = current_device()
    cached = _properties.get(ordinal)
    if cached is not None:
        return cached
    _init()
    dev = call("cuDeviceGet", ordinal)
    attr = _cu.CUdevice_attribute

    def get(name: str) -> int:
        return int(call("cuDeviceGetAttribute", getattr(attr, "CU_DEVICE_ATTRIBUTE_" + name), dev))

    raw_name = call("cuDeviceGetName", 256, dev)
    props = DeviceProperties(
        ordinal=ordinal,
        name=raw_name.split(b"\0", 1)[0].decode(errors="replace"),
        compute_capability=(get("COMPUTE_CAPABILITY_MAJOR"), get("COMPUTE_CAPABILITY_MINOR")),
        sm_count=get("MULTIPROCESSOR_COUNT"),
        max_shared_memory_per_block=get("MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_memory_per_block_optin=get("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_threads_per_block=get("MAX_THREADS_PER_BLOCK"),
        warp_size=get("WARP_SIZE"),
        driver_version=int(call("cuDriverGetVersion")),
    )
    _properties[ordinal] = props
    return props


# ---------------------------------------------------------------------------- modules and kernels

# cuModuleLoadData errors that mean "this cubin is not for this driver/GPU", for which the
# PTX (JIT-compiled by the driver) may still work.  A cubin from a ptxas newer than the
# driver is refused with one of these.
_CUBIN_FALLBACK_ERRORS = (
    "CUDA_ERROR_NO_BINARY_FOR_GPU",
    "CUDA_ERROR_INVALID_IMAGE",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    "CUDA_ERROR_INVALID_SOURCE",
)


class Module:
    """A loaded ``CUmodule``; ``kind`` says whether it came from the ``"cubin"`` or the ``"ptx"``."""

    def __init__(self, handle, kind: str, device: int):
        self.handle = handle
        self.kind = kind
        self.device = device

    def get_kernel(self, name: str) -> "Kernel":
        """The kernel ``name`` of this module, with its static shared memory and the device's limit."""
        fn = call("cuModuleGetFunction", self.handle, name.encode())
        static_shared = int(call("cuFuncGetAttribute",
                                 _cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn))
        limit = device_properties(self.device).max_shared_memory_per_block_optin
        return Kernel(fn, name, static_shared, limit, module=self)

    def global_address(self, name: str) -> int:
        """The device address of the module's global variable ``name`` (``cuModuleGetGlobal``)."""
        address, _size = call("cuModuleGetGlobal", self.handle, name.encode())
        return int(address)


def load_module(cubin: Optional[bytes], ptx: str) -> Module:
    """Load a kernel image into the current context: the cubin if given and loadable, else the PTX.

    A cubin refused as not matching this driver or GPU (see ``_CUBIN_FALLBACK_ERRORS``)
    falls back to JIT-compiling ``ptx``; which image was used is logged at INFO level on
    the ``gluonkit.runtime`` logger and recorded in :attr:`Module.kind`.
    """
    ensure_context()
    device = current_device()
    cubin_error: Optional[CudaError] = None
    if cubin:
        try:
            handle = call("cuModuleLoadData", bytes(cubin))
            log.info("loaded cubin (%d bytes) on device %d", len(cubin), device)
            return Module(handle, "cubin", device)
        except CudaError as exc:
            if exc.name not in _CUBIN_FALLBACK_ERRORS:
                raise
            cubin_error = exc
            log.info("cubin refused (%s); falling back to PTX", exc.name)
    image = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
    try:
        handle = call("cuModuleLoadData", image + b"\0")
    except CudaError as exc:
        if cubin_error is not None:
            raise CudaError("cuModuleLoadData", exc.result,
                            f"PTX could not be loaded either; the cubin failed with {cubin_error.name}. "
                            "The driver may be older than the toolkit that produced them: "
                            "update the driver or compile with an older ptxas/PTX ISA") from exc
        raise
    log.info("loaded PTX (%d bytes) on device %d", len(image), device)
    return Module(handle, "ptx", device)


def check_shared_memory(required: int, limit: int) -> None:
    """Raise :class:`OutOfResources` when a block needs more shared memory than ``limit``."""
    if required > limit:
        raise OutOfResources(required, limit, "shared memory")


class Kernel:
    """A ``CUfunction`` ready to launch.

    ``static_shared_bytes`` is the shared memory the kernel declares itself; dynamic shared
    memory comes on top of it.  ``shared_limit`` is the device's opt-in per-block maximum.
    """

    def __init__(self, handle, name: str, static_shared_bytes: int, shared_limit: int,
                 module: Optional[Module] = None):
        self.handle = handle
        self.name = name
        self.static_shared_bytes = static_shared_bytes
        self.shared_limit = shared_limit
        self.module = module  # keeps the CUmodule referenced while the function is in use
        self._dynamic_allowed = STATIC_SHARED_MEMORY_LIMIT  # opted in up to here (48 KiB: no opt-in)
        self._dynamic_checked = -1  # largest dynamic size validated against the limit so far

    def set_dynamic_shared_memory(self, nbytes: int) -> None:
        """Allow launches with ``nbytes`` of dynamic shared memory.

        Raises :class:`OutOfResources` when static + dynamic exceeds the device limit;
        above 48 KiB it opts in with ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``
        (once per new maximum).
        """
        check_shared_memory(self.static_shared_bytes + nbytes, self.shared_limit)
        if nbytes > self._dynamic_allowed:
            call("cuFuncSetAttribute", self.handle,
                 _cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
            self._dynamic_allowed = nbytes
        self._dynamic_checked = max(self._dynamic_checked, nbytes)

    def allow_non_portable_clusters(self) -> None:
        """Allow clusters above 8 CTAs (``.reqnctapercluster 16``): Hopper and Blackwell run
        them only for a kernel with ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED`` set."""
        call("cuFuncSetAttribute", self.handle,
             _cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)

    def launch(self, grid: Sequence[int], block: Sequence[int], shared_bytes: int, stream,
               packed_args) -> None:
        """Launch on ``grid`` blocks of ``block`` threads with ``shared_bytes`` dynamic shared memory.

        ``stream`` is a ``CUstream`` or a raw handle (0: the legacy default stream);
        ``packed_args`` has ``kernel_params``, the address of a ``void*[]`` with one entry per
        kernel parameter (see :class:`gluonkit.runtime.args.PackedArgs`), and must stay alive
        until this returns (the driver copies the values during the call).
        """
        if shared_bytes > self._dynamic_checked:  # first launch, or more than ever before
            self.set_dynamic_shared_memory(shared_bytes)
        gx, gy, gz = grid
        bx, by, bz = block
        result = _cu.cuLaunchKernel(self.handle, gx, gy, gz, bx, by, bz, shared_bytes, stream,
                                    packed_args.kernel_params, 0)
        if result[0] != _cu.CUresult.CUDA_SUCCESS:
            if result[0] == _cu.CUresult.CUDA_ERROR_INVALID_CONTEXT:
                # First launch from a thread with no current context: make one current, retry.
                ensure_context()
                result = _cu.cuLaunchKernel(self.handle, gx, gy, gz, bx, by, bz, shared_bytes,
                                            stream, packed_args.kernel_params, 0)
        if result[0] != _cu.CUresult.CUDA_SUCCESS:
            raise CudaError("cuLaunchKernel", result[0],
                            f"kernel {self.name!r}, grid {tuple(grid)}, block {tuple(block)}, "
                            f"{shared_bytes} bytes of dynamic shared memory")

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, static_shared_bytes={self.static_shared_bytes})"


# ---------------------------------------------------------------------------- device memory


def copy_to_device(address: int, array) -> None:
    """Copy a C-contiguous numpy ``array`` to device ``address`` (synchronous)."""
    call("cuMemcpyHtoD", address, array.ctypes.data, array.nbytes)


class DeviceBuffer:
    """``nbytes`` of device memory from ``cuMemAlloc`` (freed by :meth:`free` or on deletion).

    A small utility for the benchmark's L2-flush buffer and for tests that must not depend
    on torch or CuPy.
    """

    def __init__(self, nbytes: int):
        ensure_context()
        self.nbytes = nbytes
        self.handle = call("cuMemAlloc", nbytes)
        self.ptr = int(self.handle)

    def copy_from_host(self, array) -> None:
        """Copy a C-contiguous numpy ``array`` (``nbytes`` long) to the buffer."""
        call("cuMemcpyHtoD", self.handle, array.ctypes.data, array.nbytes)

    def zero(self) -> None:
        """Set every byte of the buffer to 0 (``cuMemsetD8``)."""
        call("cuMemsetD8", self.handle, 0, self.nbytes)

    def copy_to_host(self, array) -> None:
        """Copy the buffer's first ``array.nbytes`` bytes into a C-contiguous numpy ``array``."""
        call("cuMemcpyDtoH", array.ctypes.data, self.handle, array.nbytes)

    def free(self) -> None:
        if self.handle is not None:
            call("cuMemFree", self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.free()
        except Exception:  # interpreter shutdown / context already gone
            pass
