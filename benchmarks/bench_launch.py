"""Host time per launch of a tiny kernel: gluonkit beside Triton and a torch op (H100).

Every row launches a one-block vector add (4096 float32) back to back and reports the
median over rounds of the host time per call, with the 10-90 % range of the rounds (the GPU finishes each block in about 2 µs,
so the host is the bottleneck).  Rows:

- ``gluonkit kernel[grid]``: the ordinary launch, ``add_kernel[(1,)](x, y, out, n, ...)``
  (the first line of output says whether its generated launch ends in the C launcher,
  :mod:`gluonkit.runtime.claunch`, or in ctypes); with the C launcher, ``..., ctypes ending``
  is the same generated launch ending in ctypes, for comparison; ``launcher = kernel[grid],
  kept`` calls the same function without the ``kernel[grid]`` of each call; ``GIL kept``
  is the C launcher holding the GIL during the driver call (it releases it);
- ``gluonkit warmup handle``: ``handle = add_kernel.warmup(..., grid=(1,))`` then
  ``handle[(1,)](x, y, out, n)`` (compiled once, arguments typed by a precomputed plan);
- ``cuLaunchKernel (...)``: the bare driver call with an argument block packed once,
  through cuda-python (the stream as an int, or as a prebuilt ``CUstream``) and through
  ctypes (with ``argtypes``, or with the handles prebuilt as ``c_void_p``);
- ``cuLaunchKernelEx (ctypes, launch block)``: the bare call gluonkit's generated launch
  makes (:mod:`gluonkit.runtime.ctlaunch`: four prebuilt pointers, the config and the
  arguments in one block packed once) — the floor of gluonkit's launch path;
- ``triton kernel[grid]``: the same kernel in Triton;
- ``torch.add(out=)``: a torch op of the same size, for scale.

A second table times calls that launch nothing in the same rounds (the generated launch with
a no-op C function in place of libcuda, ctypes' own call cost, the torch reads the checks
make, the stream query), so the host's speed on the day splits gluonkit's time into the
driver, ctypes and Python.

Run on the GPU machine: ``PYTHONPATH=$PWD python benchmarks/bench_launch.py``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import gluonkit  # noqa: E402
from gluonkit.runtime import claunch, ctlaunch, driver, gpu  # noqa: E402
from vector_add import add_kernel, vector_add_layout  # noqa: E402

N = 4096
LAUNCHES = 2000
ROUNDS = int(os.environ.get("BENCH_LAUNCH_ROUNDS", "15"))


@triton.jit
def triton_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def per_launch_us(fn) -> float:
    """Host µs per call of ``fn`` over ``LAUNCHES`` back-to-back calls (after 100 warm calls)."""
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(LAUNCHES):
        fn()
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed / LAUNCHES * 1e6


def _ctypes_launch(entry):
    """A closure calling libcuda's ``cuLaunchKernel`` through ctypes with ``entry``'s packed block."""
    lib = ctypes.CDLL("libcuda.so.1")
    fn = lib.cuLaunchKernel
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    handle = int(entry.kernel.handle)
    params = entry.packer.pack([x, y, out, N], entry.device).kernel_params
    stream = torch.cuda.current_stream().cuda_stream
    threads = entry.block[0]
    return lambda: fn(handle, 1, 1, 1, threads, 1, 1, 0, stream, params, None)


def _ctypes_prebuilt_launch(entry):
    """Like :func:`_ctypes_launch` without ``argtypes``: handles as prebuilt ``c_void_p``
    objects and the small ints passed as C ints, so ctypes converts nothing per call."""
    fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    fn.restype = ctypes.c_int
    handle = ctypes.c_void_p(int(entry.kernel.handle))
    params = ctypes.c_void_p(entry.packer.pack([x, y, out, N], entry.device).kernel_params)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    threads = entry.block[0]
    return lambda: fn(handle, 1, 1, 1, threads, 1, 1, 0, stream, params, None)


def _ctypes_ex_launch(entry):
    """libcuda's ``cuLaunchKernelEx`` on a launch block packed once, as the generated launch calls it."""
    block = ctlaunch.LaunchBlock(entry.packer._format.size, entry.packer._offsets)
    ctlaunch.block_format(entry.packer._format.format).pack_into(
        block.buffer, block.offset, 1, 1, 1, *entry.block, entry.shared_bytes, torch.cuda.current_stream().cuda_stream,
        x.data_ptr(), y.data_ptr(), out.data_ptr(), N)
    fn, function = ctlaunch.entry_point(), ctypes.c_void_p(int(entry.kernel.handle))
    config, params = block.config, block.params
    return lambda kept=block: fn(config, function, params, None)  # (kept: the block stays alive)


def _cuda_python_launch(entry, stream_object=False):
    """cuda-python's ``cuLaunchKernel`` with the stream as an int (what gluonkit passes) or,
    with ``stream_object``, as a prebuilt ``CUstream``."""
    cu = driver.bindings()
    handle = entry.kernel.handle
    params = entry.packer.pack([x, y, out, N], entry.device).kernel_params
    stream = torch.cuda.current_stream().cuda_stream
    if stream_object:
        stream = cu.CUstream(stream)
    threads = entry.block[0]
    return lambda: cu.cuLaunchKernel(handle, 1, 1, 1, threads, 1, 1, 0, stream, params, 0)


x, y, out = (torch.randn(N, device="cuda") for _ in range(3))


def main() -> None:
    layout = vector_add_layout(4)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    rows = {
        "gluonkit kernel[grid]": lambda: add_kernel[(1,)](x, y, out, N, BLOCK=N, layout=layout, num_warps=4),
        "triton kernel[grid]": lambda: triton_add[(1,)](x, y, out, N, BLOCK=N),
        "torch.add(out=)": lambda: torch.add(x, y, out=out),
    }
    rows["gluonkit kernel[grid]"]()
    torch.cuda.synchronize()
    fast = add_kernel._fast_launch
    path = "none" if fast is None else "C launcher" if "_claunch(" in fast.source else "ctypes"
    print(f"gluonkit kernel[grid] takes the generated launch ending in: {path}"
          + ("" if claunch.module() else f" ({claunch.why_not()})"))
    entry = next(iter(gpu._launches[add_kernel].values()))
    kept = add_kernel[(1,)]
    rows["gluonkit launcher = kernel[grid], kept"] = lambda: kept(x, y, out, N, BLOCK=N, layout=layout, num_warps=4)
    if path == "C launcher":
        ctypes_launch = _generated(entry, c_launcher=False)
        rows["gluonkit kernel[grid], ctypes ending"] = lambda: functools.partial(ctypes_launch, (1,))(
            x, y, out, N, BLOCK=N, layout=layout, num_warps=4)
        holding = _generated(entry, release=False)
        rows["gluonkit kernel[grid], GIL kept in the driver"] = lambda: functools.partial(holding, (1,))(
            x, y, out, N, BLOCK=N, layout=layout, num_warps=4)
    if hasattr(add_kernel, "warmup"):
        handle = add_kernel.warmup(x, y, out, N, BLOCK=N, layout=layout, num_warps=4, grid=(1,))
        launcher = handle[(1,)]
        rows["gluonkit warmup handle[grid](...)"] = lambda: handle[(1,)](x, y, out, N)
        rows["gluonkit warmup handle, launcher kept"] = lambda: launcher(x, y, out, N)
    rows["cuLaunchKernel (cuda-python)"] = _cuda_python_launch(entry)
    rows["cuLaunchKernel (cuda-python, CUstream)"] = _cuda_python_launch(entry, stream_object=True)
    rows["cuLaunchKernel (ctypes)"] = _ctypes_launch(entry)
    rows["cuLaunchKernel (ctypes, prebuilt)"] = _ctypes_prebuilt_launch(entry)
    rows["cuLaunchKernelEx (ctypes, launch block)"] = _ctypes_ex_launch(entry)
    expected = x + y
    for fn in rows.values():  # every path computes the sum
        out.zero_()
        fn()
        torch.cuda.synchronize()
        assert torch.equal(out, expected)
    parts = _breakdown(entry, layout)
    times = {name: [] for name in [*rows, *parts]}
    for _ in range(ROUNDS):  # interleaved rounds: drifts of the host hit every row alike
        for name, fn in [*rows.items(), *parts.items()]:
            times[name].append(per_launch_us(fn))
    triton_us = statistics.median(times["triton kernel[grid]"])
    print(f"host µs per launch, median of {ROUNDS} rounds of {LAUNCHES} launches (10-90 % of the rounds)")
    print(f"{'path':46s} {'median':>8s} {'10 %':>7s} {'90 %':>7s} {'vs triton':>10s}")
    for name, values in times.items():
        if name == next(iter(parts)):
            print("where gluonkit's time goes (µs per call, same rounds; nothing launched):")
        median = statistics.median(values)
        deciles = statistics.quantiles(values, n=10)
        ratio = f"{median / triton_us:9.2f}x" if name in rows else ""
        print(f"{name:46s} {median:8.2f} {deciles[0]:7.2f} {deciles[-1]:7.2f} {ratio}")


def _generated(entry, driver=None, c_launcher=True, release=True):
    """Another generated launch of ``add_kernel``'s call pattern and ``entry``: calling
    ``driver`` (a ctypes function) in place of libcuda's, ending in ctypes rather than the
    C launcher, or with the C launcher keeping the GIL during the driver call (``release``).
    What ``kernel[grid]`` calls is left as it was."""
    from gluonkit.runtime import launch

    pattern = next(iter(launch._PATTERNS[id(add_kernel)].values()))
    key, real = next(iter(pattern.fast.items()))
    entry_point, module, plan = ctlaunch.entry_point, claunch.module, claunch.plan
    if driver is not None:
        ctlaunch.entry_point = lambda: driver
    if not c_launcher:
        claunch.module = lambda: None
    claunch.plan = functools.partial(plan, release=release)
    try:
        del pattern.fast[key]
        return pattern.fast_launch(key, entry)
    finally:
        ctlaunch.entry_point, claunch.module, claunch.plan, pattern.fast[key] = entry_point, module, plan, real


def _breakdown(entry, layout) -> dict:
    """Calls that launch nothing, timed with the launches, so that the host's speed on the day
    splits gluonkit's time into the driver, ctypes and the Python around them:
    ``kernel[grid]`` whose generated launch calls a no-op C function instead of libcuda
    (everything but the driver), the foreign call of that no-op (ctypes' own cost), the
    torch attribute reads the checks make, torch's stream query and ``kernel[(1,)]`` alone."""
    noop = ctypes.CDLL("libm.so.6").feclearexcept  # int feclearexcept(int): returns 0, touches nothing
    noop.restype = ctypes.c_int
    stubbed = _generated(entry, driver=noop)  # the same generated code, calling the no-op
    config, function, params = (ctypes.c_void_p(v) for v in (1 << 40, 2 << 40, 3 << 40))
    stream = torch._C._cuda_getCurrentRawStream
    return {
        "kernel[grid], driver call stubbed": lambda: functools.partial(stubbed, (1,))(
            x, y, out, N, BLOCK=N, layout=layout, num_warps=4),
        "ctypes call of a no-op (4 pointers)": lambda: noop(config, function, params, None),
        "3 tensors' dtype, get_device(), data_ptr()": lambda: (
            x.dtype, x.get_device(), x.data_ptr(), y.dtype, y.get_device(), y.data_ptr(), out.dtype,
            out.get_device(), out.data_ptr()),
        "torch current stream": lambda: stream(0),
        "kernel[(1,)] alone": lambda: add_kernel[(1,)],
        "an empty lambda": lambda: None,
    }


if __name__ == "__main__":
    main()
