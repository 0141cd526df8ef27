"""Launch functions generated for one loaded kernel and one way of calling it: the host hot path.

A launch of an already loaded kernel has little to do — check that each runtime argument
still has the type, device and 16-byte divisibility the kernel was compiled for, write the
values into the argument block, ask torch for the current stream, call the driver — but
done with a generic loop (one converter call per argument, a packer, a driver wrapper) the
Python around it costs more than the driver call itself.  :func:`build` writes that work
out as the straight-line source of one function for one :class:`~gluonkit.runtime.gpu.CompiledLaunch`
and one call pattern and compiles it with ``exec``: each check is a line of inline code, the
constants (dtypes, device, block, shared memory, function handle) are bound once, one
``struct.pack_into`` writes the grid, the stream and the arguments into this thread's
:class:`~gluonkit.runtime.ctlaunch.LaunchBlock`, and one foreign call of libcuda's
``cuLaunchKernelEx`` (:mod:`.ctlaunch`) launches.

A generated function returns ``True`` when it launched and ``False`` when the call is not one
it can take — another number of arguments or keywords, other compile-time values, an argument
of another dtype, device, alignment or integer width, a value the argument block cannot hold,
a grid the driver refuses, or a driver error.  It never raises and never launches twice: the
caller then takes the general path, which finds or compiles the right kernel and reports
mistakes with the parameter's name, and driver errors by name (the checks that guard
correctness live there).  Only arguments with a cheap exact check are generated: torch CUDA
tensors, Python ints of 32 or 64 bits, floats, bools and host TMA descriptors over CUDA
tensors (passed by value: the 128-byte tensor map, the shape and the strides).  Kernels with
other runtime arguments (CuPy or DLPack arrays, tuples) get no generated function and keep
the general path, as do all kernels where libcuda cannot be opened through ctypes.

Each thread packs into its own launch block (the driver reads the block during the call,
which runs without the GIL).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from . import ctlaunch

__all__ = ["build", "CALL", "HANDLE"]

CALL = "call"  # fn(grid, args, kwargs): kernel[grid](*args, **kwargs); compile-time values checked too
HANDLE = "handle"  # fn(grid3, args, stream): a warmed-up kernel's launcher, runtime arguments only


def build(entry, signatures: Sequence[Any], sources: Sequence[str], fixed: Sequence[Tuple[str, Any]] = (),
          counts: Tuple[int, int] = (0, 0), kind: str = CALL, guard: Optional[Tuple[str, dict]] = None,
          stream_of: Optional[Callable[[int], int]] = None, stream_handle: Optional[Callable] = None
          ) -> Optional[Callable]:
    """The generated launch function of ``entry`` (a ``CompiledLaunch``), or ``None`` when one
    of its runtime arguments has no cheap exact check.

    ``signatures``: per runtime argument, its :func:`~gluonkit.runtime.gpu.signature_of`;
    ``sources``: per runtime argument, where the call holds it (``"args[0]"``,
    ``"kwargs['n']"``); ``fixed``: ``(source, value)`` of each compile-time value the kernel
    was built with; ``counts``: the number of positional and keyword arguments of the
    pattern (``kind=CALL``; a ``HANDLE`` takes exactly the runtime arguments).  ``guard``: an
    expression and the names it reads, asked first, true when a generated launch must not be
    used now (the interpreter asked for, a timeline being measured).  ``stream_of(device)``: the raw
    current stream; ``stream_handle``: turns a handle's ``stream=`` into a raw handle.
    """
    launch_ex = ctlaunch.entry_point()
    if entry.tuple_args or launch_ex is None:
        return None
    names = {"_tls": threading.local(), "_new_block": lambda: _thread_block(entry.packer),
             "_pack_into": ctlaunch.block_format(entry.packer._format.format).pack_into, "_launch_ex": launch_ex,
             "_stream_of": stream_of, "_stream_handle": stream_handle, "_struct_error": struct.error}
    if kind == CALL:
        lines = ["def launch(grid, args, kwargs):"]
        if guard is not None:
            names.update(guard[1])
            lines.append(f"    if {guard[0]}: return False")
        lines += ["    try:", f"        if len(args) != {counts[0]} or len(kwargs) != {counts[1]}: return False"]
        for i, (source, value) in enumerate(fixed):
            names[f"_k{i}"], names[f"_t{i}"] = value, type(value)
            lines += [f"        c = {source}",
                      f"        if c is not _k{i} and (type(c) is not _t{i} or c != _k{i}): return False"]
    else:
        lines = ["def launch(grid, args, stream):", "    try:", f"        if len(args) != {len(sources)}: return False"]
    values: List[str] = []
    for i, (signature, source) in enumerate(zip(signatures, sources)):
        check = _check(i, signature, source, names)
        if check is None:
            return None
        lines += ["        " + line for line in check[0]]
        values += check[1]
    stream = f"_stream_of({entry.device})"
    if kind == HANDLE:
        stream = f"({stream} if stream is None else stream if type(stream) is int else _stream_handle(stream))"
    kernel = entry.kernel
    if entry.shared_bytes > kernel._dynamic_checked:  # opted in once here (a warmed-up kernel never ran)
        kernel.set_dynamic_shared_memory(entry.shared_bytes)
    names["_function"] = ctypes.c_void_p(int(kernel.handle))
    gx = f"gx * {entry.num_ctas}" if entry.num_ctas > 1 else "gx"  # a cluster launch: num_ctas CTAs per program
    config = f"{gx}, gy, gz, {', '.join(map(str, entry.block))}, {entry.shared_bytes}, stream"
    lines += [
        "        n = len(grid)",
        "        gx = grid[0]; gy = grid[1] if n > 1 else 1; gz = grid[2] if n > 2 else 1",
        "        if n > 3 or not (gx > 0 and gy > 0 and gz > 0): return False",  # empty or bad: the general path
        f"        stream = {stream}",
        "        try: buffer, offset, config, params = _tls.block",
        "        except AttributeError: buffer, offset, config, params = _tls.block = _new_block()",
        f"        _pack_into(buffer, offset, {config}{''.join(', ' + v for v in values)})",
        # a driver error (a bad grid, no current context, a sticky error): nothing was launched, and the
        # general path launches through cuda-python, which raises the error by name
        "        return _launch_ex(config, _function, params, None) == 0",
        "    except (AttributeError, KeyError, IndexError, TypeError, ValueError, OverflowError, _struct_error):",
        "        return False",
    ]
    source = "\n".join(lines) + "\n"
    scope: dict = {}
    exec(compile(source, f"<gluonkit launch of {entry.compiled.name}>", "exec"), names, scope)
    launch = scope["launch"]
    launch.source = source  # for reading (tests, debugging)
    return launch


def _check(i: int, signature, source: str, names: dict) -> Optional[Tuple[List[str], List[str]]]:
    """``(lines, values)``: lines binding the block values of the argument at ``source`` when
    it has ``signature`` and returning False otherwise, and the expressions of those values;
    None for kinds with no cheap check."""
    kind = signature[0] if signature else None
    if kind is float or kind is bool:
        names[f"_type{i}"] = kind
        return [f"r{i} = {source}", f"if type(r{i}) is not _type{i}: return False"], [f"r{i}"]
    if kind is int and signature[1] in (32, 64):
        bound = 2 ** (signature[1] - 1)
        low = "" if signature[1] == 32 else f"not -2**31 <= r{i} < 2**31 and "  # 64: outside int32's range
        divisible = "" if signature[2] else "not "
        return [f"r{i} = {source}",
                f"if type(r{i}) is not int or not ({low}-{bound} <= r{i} < {bound}) or "
                f"{divisible}(r{i} & 15): return False"], [f"r{i}"]
    if kind is TensorDescriptor or kind is TensorDescriptorIm2Col:
        return _descriptor_check(i, signature, source, names)
    if len(signature or ()) == 3 and not isinstance(kind, type):  # a torch CUDA tensor: (dtype, device, aligned)
        dtype, device, aligned = signature
        names[f"_dtype{i}"] = dtype
        return [f"v = {source}", "d = v.dtype",
                f"if d is not _dtype{i} and d != _dtype{i}: return False",  # torch's dtypes are singletons
                f"if v.get_device() != {device}: return False",
                f"r{i} = v.data_ptr()",
                f"if {'' if aligned else 'not '}(r{i} & 15): return False"], [f"r{i}"]
    return None


def _descriptor_check(i: int, signature, source: str, names: dict) -> Optional[Tuple[List[str], List[str]]]:
    """:func:`_check` of a host TMA descriptor over a CUDA tensor: the kernel takes its
    128-byte tensor map by value, then its shape (int32 each) and strides (int64 each).

    ``signature``: ``(class, block_shape, dtype, layout, is_cuda, rank)``
    (:func:`~gluonkit.runtime.gpu.signature_of`).  A shape past int32 does not pack: the
    general path then says so."""
    kind, block_shape, dtype, layout, is_cuda, rank = signature
    if not is_cuda:
        return None  # a host tensor's descriptor: the general path says why not
    names.update({f"_kind{i}": kind, f"_block_shape{i}": block_shape, f"_dtype{i}": dtype, f"_layout{i}": layout})
    lines = [f"v = {source}",
             f"if type(v) is not _kind{i} or not v.is_cuda: return False",
             f"if v.block_shape != _block_shape{i} or v.dtype != _dtype{i}: return False",
             f"if v.layout is not _layout{i} and v.layout != _layout{i}: return False",
             f"r{i} = v.kernel_arg_bytes(); shape{i} = v.shape; strides{i} = v.strides",
             f"if len(shape{i}) != {rank}: return False"]
    return lines, [f"r{i}"] + [f"shape{i}[{d}]" for d in range(rank)] + [f"strides{i}[{d}]" for d in range(rank)]


def _thread_block(packer) -> tuple:
    """A new launch block for this thread, as the generated code reads it: ``(buffer, offset,
    config, params)`` (the buffer holds everything the driver reads)."""
    block = ctlaunch.LaunchBlock(packer._format.size, packer._offsets)
    return block.buffer, block.offset, block.config, block.params
