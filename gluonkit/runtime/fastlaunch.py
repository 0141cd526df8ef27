"""Launch functions generated for one loaded kernel and one way of calling it: the host hot path.

A launch of an already loaded kernel has little to do — check that each runtime argument
still has the type, device and 16-byte divisibility the kernel was compiled for, write the
values into the argument block, ask torch for the current stream, call ``cuLaunchKernel`` —
but done with a generic loop (one converter call per argument, a packer, a driver wrapper)
the Python around it costs more than the driver call itself.  :func:`build` writes that work
out as the straight-line source of one function for one :class:`~gluonkit.runtime.gpu.CompiledLaunch`
and one call pattern and compiles it with ``exec``: each check is a line of inline code, the
constants (dtypes, device, block, handle) are bound once, and the function calls the driver
directly.  Measured on a 2-core build host with the driver call stubbed, that takes the
Python of a ``kernel[grid]`` call from about 5.9 µs to 2.3 µs; on the H100 host a one-block
launch went from 10.6 to 7.0 µs (the bare driver call: 4.3 µs).

A generated function returns ``True`` when it launched and ``False`` when the call is not one
it can take — another number of arguments or keywords, other compile-time values, an argument
of another dtype, device, alignment or integer width, a value the argument block cannot hold,
a grid the driver refuses, or a driver error.  It never raises and never launches twice: the
caller then takes the general path, which finds or compiles the right kernel and reports
mistakes with the parameter's name (the checks that guard correctness live there).  Only
arguments with a cheap exact check are generated: torch CUDA tensors, Python ints of 32 or
64 bits, floats and bools.  Kernels with other runtime arguments (TMA descriptors, CuPy or
DLPack arrays, tuples) get no generated function and keep the general path.

Each thread packs into its own argument block (the driver reads the block during the call,
which runs without the GIL).
"""

from __future__ import annotations

import struct
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple

from . import driver
from .args import PackedArgs

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
    if entry.tuple_args:
        return None
    names = {"_entry": entry, "_pack_into": entry.packer._format.pack_into, "_tls": threading.local(),
             "_new_block": lambda: _thread_block(entry.packer), "_stream_of": stream_of,
             "_stream_handle": stream_handle, "_struct_error": struct.error}
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
        lines += ["        " + line for line in check]
        values.append(f"r{i}")
    stream = f"_stream_of({entry.device})"
    if kind == HANDLE:
        stream = f"({stream} if stream is None else stream if type(stream) is int else _stream_handle(stream))"
    lines += [
        "        try: buffer, offset, params, block = _tls.block",
        "        except AttributeError: buffer, offset, params, block = _tls.block = _new_block()",
        f"        _pack_into(buffer, offset{''.join(', ' + v for v in values)})",
        "        n = len(grid)",
        "        gx = grid[0]; gy = grid[1] if n > 1 else 1; gz = grid[2] if n > 2 else 1",
        "        if n > 3 or not (gx > 0 and gy > 0 and gz > 0): return False",  # empty or bad: the general path
        f"        stream = {stream}",
        *_launch_lines(entry, names),
        "    except (AttributeError, KeyError, IndexError, TypeError, ValueError, OverflowError, _struct_error):",
        "        return False",
    ]
    source = "\n".join(lines) + "\n"
    scope: dict = {}
    exec(compile(source, f"<gluonkit launch of {entry.compiled.name}>", "exec"), names, scope)
    launch = scope["launch"]
    launch.source = source  # for reading (tests, debugging)
    return launch


def _check(i: int, signature, source: str, names: dict) -> Optional[List[str]]:
    """Lines binding ``r{i}`` to the block value of the argument at ``source`` when it has
    ``signature`` and returning False otherwise; None for kinds with no cheap check."""
    kind = signature[0] if signature else None
    if kind is float or kind is bool:
        names[f"_type{i}"] = kind
        return [f"r{i} = {source}", f"if type(r{i}) is not _type{i}: return False"]
    if kind is int and signature[1] in (32, 64):
        bound = 2 ** (signature[1] - 1)
        low = "" if signature[1] == 32 else f"not -2**31 <= r{i} < 2**31 and "  # 64: outside int32's range
        divisible = "" if signature[2] else "not "
        return [f"r{i} = {source}",
                f"if type(r{i}) is not int or not ({low}-{bound} <= r{i} < {bound}) or "
                f"{divisible}(r{i} & 15): return False"]
    if len(signature or ()) == 3 and not isinstance(kind, type):  # a torch CUDA tensor: (dtype, device, aligned)
        dtype, device, aligned = signature
        names[f"_dtype{i}"] = dtype
        return [f"v = {source}", "d = v.dtype",
                f"if d is not _dtype{i} and d != _dtype{i}: return False",  # torch's dtypes are singletons
                f"if v.get_device() != {device}: return False",
                f"r{i} = v.data_ptr()",
                f"if {'' if aligned else 'not '}(r{i} & 15): return False"]
    return None


def _launch_lines(entry, names: dict) -> List[str]:
    """The lines launching over ``gx, gy, gz`` on ``stream`` with the packed block, returning True."""
    gx = f"gx * {entry.num_ctas}" if entry.num_ctas > 1 else "gx"  # a cluster launch: num_ctas CTAs per program
    kernel = entry.kernel
    if isinstance(kernel, driver.Kernel) and driver._cu is not None:
        if entry.shared_bytes > kernel._dynamic_checked:  # opted in once here (a warmed-up kernel never ran)
            kernel.set_dynamic_shared_memory(entry.shared_bytes)
        names.update(_cu_launch=driver._cu.cuLaunchKernel, _handle=kernel.handle, _success=driver._cu.CUresult.CUDA_SUCCESS)
        bx, by, bz = entry.block
        return [f"        result = _cu_launch(_handle, {gx}, gy, gz, {bx}, {by}, {bz}, {entry.shared_bytes}, stream, "
                "params, 0)",
                "        return result[0] == _success"]  # an error: the general path launches again and raises
    # another kernel object (a test's recorder): its own launch method
    names["_kernel"] = kernel
    return [f"        _kernel.launch(({gx}, gy, gz), _entry.block, _entry.shared_bytes, stream, block)",
            "        return True"]


def _thread_block(packer) -> tuple:
    """A new argument block for this thread, as the generated code reads it."""
    block = PackedArgs(packer._format.size, packer._offsets)
    return block.buffer, block.offset, block.kernel_params, block
