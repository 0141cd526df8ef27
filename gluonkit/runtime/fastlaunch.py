"""Launch functions generated for one loaded kernel and one way of calling it: the host hot path.

A launch of an already loaded kernel has little to do — check that each runtime argument
still has the type, device and 16-byte divisibility the kernel was compiled for, write the
values into the argument block, ask torch for the current stream, call the driver — but
done with a generic loop (one converter call per argument, a packer, a driver wrapper) the
Python around it costs more than the driver call itself.  :func:`build` writes that work
out as the straight-line source of one function for one :class:`~gluonkit.runtime.gpu.CompiledLaunch`
and one call pattern and compiles it with ``exec``: each check is a line of inline code, the
constants (dtypes, device, block, shared memory, function handle) are bound once, and one
call of the C launcher (:mod:`.claunch`: a CPython extension built on first use) packs the
grid, the stream and the arguments on the C stack and calls libcuda's ``cuLaunchKernelEx``.
Where the C launcher cannot be built (no compiler), one ``struct.pack_into`` writes them into
this thread's :class:`~gluonkit.runtime.ctlaunch.LaunchBlock` and one foreign call of
``cuLaunchKernelEx`` through ctypes (:mod:`.ctlaunch`) launches.

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

Both endings release the GIL during the driver call (which may wait for room in the launch
queue); the C launcher packs on the calling thread's stack, the ctypes ending into the
thread's own launch block, which the driver reads during the call.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from . import claunch, ctlaunch, driver

__all__ = ["build", "CALL", "HANDLE"]

CALL = "call"  # fn(grid, *args, **kwargs): kernel[grid](*args, **kwargs); compile-time values checked too
HANDLE = "handle"  # fn(grid3, *args, stream=None): a warmed-up kernel's launcher, runtime arguments only

_MISSING = object()  # the default of every generated parameter: an argument the call did not give


class _Decline(Exception):
    """Raised inside a generated launch for a call it does not take (never escapes it)."""


def build(entry, signatures: Sequence[Any], slots: Sequence[int], general: Callable,
          fixed: Sequence[Tuple[int, Any]] = (), pattern: Tuple[int, Sequence[str]] = (0, ()), kind: str = CALL,
          guard: Optional[Tuple[str, dict]] = None, stream_of: Optional[Callable[[int], int]] = None,
          stream_handle: Optional[Callable] = None) -> Optional[Callable]:
    """The generated launch function of ``entry`` (a ``CompiledLaunch``), or ``None`` when one
    of its runtime arguments has no cheap exact check or libcuda cannot be called.

    A call pattern is ``pattern``: how many positional arguments, then which keywords (the
    kernel's parameter names; ``kind=HANDLE`` takes exactly the runtime arguments,
    positionally).  ``slots``: per runtime argument, its place among the pattern's arguments
    (positional ones first, then the keywords in order); ``signatures``: per runtime argument,
    its :func:`~gluonkit.runtime.gpu.signature_of`; ``fixed``: ``(slot, value)`` of each
    compile-time value the kernel was built with.  ``general(grid, args, kwargs)`` (a
    ``HANDLE``'s: ``general(grid, args, stream)``) launches a call the function does not take.
    ``guard``: an expression and the names it reads, asked first, true when a generated launch
    must not be used now (the interpreter asked for, a timeline being measured).
    ``stream_of(device)``: the raw current stream; ``stream_handle``: turns a handle's
    ``stream=`` into a raw handle.

    The call's arguments bind straight to the function's parameters (positional-only ones,
    then the keywords as keyword-only ones; every one defaults to "missing"), which saves
    building an argument tuple and a keyword dict on each call.
    """
    launch_ex = ctlaunch.entry_point()
    if entry.tuple_args or launch_ex is None:
        return None
    positional, keywords = (pattern[0], tuple(pattern[1])) if kind == CALL else (len(signatures), ())
    params = [f"_p{i}" for i in range(positional)] + list(keywords)
    names = {"_tls": threading.local(), "_new_block": lambda: _thread_block(entry.packer), "_M": _MISSING,
             "_pack_into": ctlaunch.block_format(entry.packer._format.format).pack_into, "_launch_ex": launch_ex,
             "_stream_of": stream_of, "_stream_handle": stream_handle, "_Decline": _Decline, "_general": general,
             "_declined": (_declined_call if kind == CALL else _declined_handle_call), "_keywords": keywords,
             "_errors": (_Decline, AttributeError, KeyError, IndexError, TypeError, ValueError, OverflowError,
                         struct.error)}
    lines = ["    try:"]
    if kind == CALL:
        if guard is not None:
            names.update(guard[1])
            lines.append(f"        if {guard[0]}: raise _Decline")
        lines.append("        if _extra or _extra_kw: raise _Decline")
        for i, (slot, value) in enumerate(fixed):
            names[f"_k{i}"], names[f"_t{i}"] = value, type(value)
            lines.append(f"        if {params[slot]} is not _k{i} and (type({params[slot]}) is not _t{i} or "
                         f"{params[slot]} != _k{i}): raise _Decline")
        head = f"def launch(_grid, {''.join(p + '=_M, ' for p in params[:positional])}/, *_extra, " \
               f"{''.join(k + '=_M, ' for k in keywords)}**_extra_kw):"
        rest = f"({', '.join(params[:positional])}{',' if positional == 1 else ''}), _extra, " \
               f"({', '.join(keywords)}{',' if len(keywords) == 1 else ''}), _extra_kw"
        fallback = f"    _general(_grid, *_declined({rest}, _keywords))"
    else:
        head = f"def launch(_grid, {''.join(p + '=_M, ' for p in params)}/, *_extra, stream=None):"
        lines.append("        if _extra: raise _Decline")
        rest = f"({', '.join(params)}{',' if len(params) == 1 else ''}), _extra"
        fallback = f"    _general(_grid, _declined({rest}), stream)"
    values: List[str] = []
    divisible: List[Tuple[str, bool]] = []
    one_device = driver.device_count() == 1
    for i, (signature, slot) in enumerate(zip(signatures, slots)):
        check = _check(i, signature, params[slot], names, one_device)
        if check is None:
            return None
        lines += ["        " + line for line in check[0]]
        values += check[1]
        divisible += check[2]
    lines += ["        " + line for line in _divisibility(divisible)]
    stream = f"_stream_of({entry.device})"
    if kind == HANDLE:
        stream = f"({stream} if stream is None else stream if type(stream) is int else _stream_handle(stream))"
    used = set(names) | set(params[:positional]) | _LOCALS | {f"_r{i}" for i in range(len(slots))} | \
        {f"_{what}{i}" for what in ("shape", "strides") for i in range(len(slots))}
    if used & set(keywords):  # a kernel parameter named like a name of the generated code: no generated launch
        return None
    kernel = entry.kernel
    if entry.shared_bytes > kernel._dynamic_checked:  # opted in once here (a warmed-up kernel never ran)
        kernel.set_dynamic_shared_memory(entry.shared_bytes)
    packer = entry.packer
    plan = claunch.plan(ctypes.cast(launch_ex, ctypes.c_void_p).value, int(kernel.handle), entry.block,
                        entry.shared_bytes, entry.num_ctas, packer._format.format, packer._offsets,
                        packer._format.size)
    if plan is not None:  # the C launcher checks the grid (a tuple of 1 to 3 ints, 1 to 2**32 - 1), packs, launches
        names.update(_plan=plan, _claunch=claunch.module().launch)
        lines.append(f"        if _claunch(_plan, _grid, {stream}{''.join(', ' + v for v in values)}) == 0: return")
    else:
        names["_function"] = ctypes.c_void_p(int(kernel.handle))
        gx = f"_gx * {entry.num_ctas}" if entry.num_ctas > 1 else "_gx"  # a cluster launch: num_ctas CTAs per program
        config = f"{gx}, _gy, _gz, {', '.join(map(str, entry.block))}, {entry.shared_bytes}, _stream"
        lines += [
            "        _n = len(_grid)",
            "        _gx = _grid[0]; _gy = _grid[1] if _n > 1 else 1; _gz = _grid[2] if _n > 2 else 1",
            "        if _n > 3 or not (_gx > 0 and _gy > 0 and _gz > 0): raise _Decline",  # empty or bad: general path
            f"        _stream = {stream}",
            "        try: _buffer, _offset, _config, _params = _tls.block",
            "        except AttributeError: _buffer, _offset, _config, _params = _tls.block = _new_block()",
            f"        _pack_into(_buffer, _offset, {config}{''.join(', ' + v for v in values)})",
            "        if _launch_ex(_config, _function, _params, None) == 0: return",
        ]
    lines += [
        # a driver error (a bad grid, no current context, a sticky error): nothing was launched, and the
        # general path launches through cuda-python, which raises the error by name
        "    except _errors:",
        "        pass",
        fallback,
    ]
    source = "\n".join([head] + lines) + "\n"
    scope: dict = {}
    exec(compile(source, f"<gluonkit launch of {entry.compiled.name}>", "exec"), names, scope)
    launch = scope["launch"]
    launch.source = source  # for reading (tests, debugging)
    return launch


# Local names of the generated code (all start with "_": a kernel parameter passed by keyword
# with one of these names, or a global's, gets no generated launch rather than a wrong one).
_LOCALS = {"_grid", "_extra", "_extra_kw", "_v", "_n", "_gx", "_gy", "_gz", "_stream", "_buffer", "_offset",
           "_config", "_params", "_function", "_plan", "_claunch"}


def _declined_call(positional: tuple, extra: tuple, named: tuple, extra_kw: dict, keywords: tuple) -> tuple:
    """``(args, kwargs)`` of a call a generated ``CALL`` launch did not take, rebuilt from its
    parameters (the arguments given, in the pattern's keyword order, then any others)."""
    args = tuple(a for a in positional if a is not _MISSING) + extra
    kwargs = {k: v for k, v in zip(keywords, named) if v is not _MISSING}
    kwargs.update(extra_kw)
    return args, kwargs


def _declined_handle_call(positional: tuple, extra: tuple) -> tuple:
    """The arguments of a call a generated ``HANDLE`` launch did not take."""
    return tuple(a for a in positional if a is not _MISSING) + extra


def _check(i: int, signature, source: str, names: dict, one_device: bool) -> \
        Optional[Tuple[List[str], List[str], list]]:
    """``(lines, values, divisible)``: lines binding the block values of the argument ``source``
    (a parameter of the generated function) when it has ``signature`` and raising ``_Decline``
    otherwise, the expressions of those values, and ``(expression, divisible by 16)`` of the
    values the kernel is specialized on (checked together, :func:`_divisibility`); None for
    kinds with no cheap check.  ``one_device``: the process sees one CUDA device, so a
    tensor's ``is_cuda`` (a plain attribute read) says it is on the kernel's device, where
    ``get_device()`` (a method call, several times dearer in torch) is asked otherwise."""
    kind = signature[0] if signature else None
    if kind is float or kind is bool:
        names[f"_type{i}"] = kind
        return [f"_r{i} = {source}", f"if type(_r{i}) is not _type{i}: raise _Decline"], [f"_r{i}"], []
    if kind is int and signature[1] in (32, 64):
        bound = 2 ** (signature[1] - 1)
        low = "" if signature[1] == 32 else f"not -2**31 <= _r{i} < 2**31 and "  # 64: outside int32's range
        return [f"_r{i} = {source}",
                f"if type(_r{i}) is not int or not ({low}-{bound} <= _r{i} < {bound}): raise _Decline"], \
            [f"_r{i}"], [(f"_r{i}", signature[2])]
    if kind is TensorDescriptor or kind is TensorDescriptorIm2Col:
        return _descriptor_check(i, signature, source, names)
    if len(signature or ()) == 3 and not isinstance(kind, type):  # a torch CUDA tensor: (dtype, device, aligned)
        dtype, device, aligned = signature
        names[f"_dtype{i}"] = dtype
        on_device = f"not {source}.is_cuda" if one_device and device == 0 else f"{source}.get_device() != {device}"
        return [f"if {source}.dtype is not _dtype{i} and {source}.dtype != _dtype{i} or "  # torch's dtypes: singletons
                f"{on_device}: raise _Decline",
                f"_r{i} = {source}.data_ptr()"], [f"_r{i}"], [(f"_r{i}", aligned)]
    return None


def _divisibility(values: Sequence[Tuple[str, bool]]) -> List[str]:
    """The line declining a call whose addresses and integers are not divisible by 16 as the
    kernel was specialized (one test for all that must be, one each for those that must not)."""
    tests = []
    divisible = [expr for expr, yes in values if yes]
    if divisible:
        tests.append(f"({' | '.join(divisible)}) & 15")
    tests += [f"not {expr} & 15" for expr, yes in values if not yes]
    return [f"if {' or '.join(tests)}: raise _Decline"] if tests else []


def _descriptor_check(i: int, signature, source: str, names: dict) -> Optional[Tuple[List[str], List[str], list]]:
    """:func:`_check` of a host TMA descriptor over a CUDA tensor: the kernel takes its
    128-byte tensor map by value, then its shape (int32 each) and strides (int64 each).

    ``signature``: ``(class, block_shape, dtype, layout, is_cuda, rank)``
    (:func:`~gluonkit.runtime.gpu.signature_of`).  A shape past int32 does not pack: the
    general path then says so."""
    kind, block_shape, dtype, layout, is_cuda, rank = signature
    if not is_cuda:
        return None  # a host tensor's descriptor: the general path says why not
    names.update({f"_kind{i}": kind, f"_block_shape{i}": block_shape, f"_dtype{i}": dtype, f"_layout{i}": layout})
    lines = [f"_v = {source}",
             f"if type(_v) is not _kind{i} or not _v.is_cuda: raise _Decline",
             f"if _v.block_shape != _block_shape{i} or _v.dtype != _dtype{i}: raise _Decline",
             f"if _v.layout is not _layout{i} and _v.layout != _layout{i}: raise _Decline",
             f"_r{i} = _v.kernel_arg_bytes(); _shape{i} = _v.shape; _strides{i} = _v.strides",
             f"if len(_shape{i}) != {rank}: raise _Decline"]
    return lines, [f"_r{i}"] + [f"_shape{i}[{d}]" for d in range(rank)] + \
        [f"_strides{i}[{d}]" for d in range(rank)], []


def _thread_block(packer) -> tuple:
    """A new launch block for this thread, as the generated code reads it: ``(buffer, offset,
    config, params)`` (the buffer holds everything the driver reads)."""
    block = ctlaunch.LaunchBlock(packer._format.size, packer._offsets)
    return block.buffer, block.offset, block.config, block.params
