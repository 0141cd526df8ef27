"""The launch hot path's driver call: ``cuLaunchKernelEx`` through :mod:`ctypes`, on a launch block.

cuda-python's ``cuLaunchKernel`` binding checks and converts its eleven arguments on every
call, and ctypes with ``argtypes`` builds a converted object per argument; either costs
about as much as the Python of the rest of a launch.  ``cuLaunchKernelEx`` takes four
pointers instead: a ``CUlaunchConfig`` (grid, block, dynamic shared memory, stream), the
function, the ``void*[]`` of parameter addresses and ``extra``.  A :class:`LaunchBlock`
holds the config and the parameters in one buffer, so one ``struct.pack_into`` writes the
grid, the stream and every argument of a launch, and the foreign call passes four objects
built once (three ``c_void_p`` and ``None``), which ctypes passes without converting.

libcuda is opened with :class:`ctypes.CDLL` (no compiler, nothing built at install time),
which releases the GIL during the call, as the driver may wait there for room in the
launch queue; each thread therefore packs into its own block.  The return code is the
``CUresult``: 0 is success, anything else leaves the launch to the checked cuda-python path
(:meth:`gluonkit.runtime.driver.Kernel.launch`), which raises the error by name.
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Callable, Optional, Sequence

__all__ = ["CONFIG_FORMAT", "CONFIG_BYTES", "LaunchBlock", "entry_point", "block_format"]

# CUlaunchConfig (cuda.h): gridDim xyz, blockDim xyz, sharedMemBytes (7 unsigned ints), 4 bytes of
# padding, hStream, attrs (NULL), numAttrs (0), padding to 56 bytes; then padding to 64, where the
# parameters start (tensor maps need 64-byte alignment).  Padding bytes are written as zeros.
CONFIG_FORMAT = "7I4xQ8x4x4x8x"
CONFIG_BYTES = 64  # struct.calcsize("<" + CONFIG_FORMAT)

_LIBRARIES = ("libcuda.so.1", "libcuda.so")
_entry: Optional[Callable] = None
_looked_up = False


def entry_point() -> Optional[Callable]:
    """libcuda's ``cuLaunchKernelEx`` as a ctypes function returning the ``CUresult`` as an
    int, or ``None`` where the library or the symbol is missing (no driver, a driver older
    than CUDA 11.8): launches then take the cuda-python path.

    With ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1`` (cuda-python's switch) it is the
    per-thread-default-stream variant, so stream 0 means what it means to cuda-python."""
    global _entry, _looked_up
    if not _looked_up:
        _looked_up = True
        name = "cuLaunchKernelEx"
        if os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") not in ("", "0"):
            name += "_ptsz"
        for library in _LIBRARIES:
            try:
                function = getattr(ctypes.CDLL(library), name)
            except (OSError, AttributeError):
                continue
            function.restype = ctypes.c_int
            _entry = function
            break
    return _entry


def block_format(parameters: str) -> struct.Struct:
    """The ``struct`` layout of a launch block whose parameters are laid out by the packer
    format ``parameters`` (:class:`gluonkit.runtime.args.ArgPacker`, offsets from 0): the
    config's grid, block, shared-memory size and stream, then the parameters from byte 64."""
    return struct.Struct("<" + CONFIG_FORMAT + parameters.lstrip("<@=!>"))


class LaunchBlock:
    """One thread's launch block: a buffer holding, from a 64-byte aligned address, the
    ``CUlaunchConfig``, the parameters (at ``offsets`` from byte 64, ``size`` bytes) and the
    ``void*[]`` of the parameters' addresses (written once here).

    ``buffer`` and ``offset`` are what ``pack_into`` takes; ``config`` and ``params`` are the
    ``c_void_p`` arguments of the foreign call (``params`` is NULL for a kernel without
    parameters, as the driver allows).  Everything the driver reads lies in ``buffer``, so
    keeping ``buffer`` keeps the block valid.
    """

    __slots__ = ("buffer", "offset", "config", "params")

    def __init__(self, size: int, offsets: Sequence[int]):
        array_at = CONFIG_BYTES + -(-size // 8) * 8
        self.buffer = ctypes.create_string_buffer(64 + array_at + 8 * len(offsets))
        start = ctypes.addressof(self.buffer)
        base = -(-start // 64) * 64
        self.offset = base - start
        self.config = ctypes.c_void_p(base)
        struct.pack_into(f"<{len(offsets)}Q", self.buffer, self.offset + array_at,
                         *[base + CONFIG_BYTES + o for o in offsets])
        self.params = ctypes.c_void_p(base + array_at if offsets else None)
