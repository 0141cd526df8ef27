"""What each candidate launch path costs on the GPU host: the driver alone, timed from C, and
the host-side pieces of gluonkit's launch, timed from Python (H100).

Prints:

1. the toolchain: the C compiler :mod:`gluonkit.runtime.claunch` would use, Python's headers,
   and whether the C launcher built (and why not);
2. **the driver timed from C**: a C loop (compiled here with that compiler, loaded with
   ctypes) calling the driver 2000 times per round on the one-block vector add of
   ``examples/vector_add.py``, so no Python is in the time — ``cuLaunchKernel`` and
   ``cuLaunchKernelEx`` on torch's current stream, ``cuLaunchKernel`` of an empty kernel
   without parameters, ``cuLaunchKernelEx`` with one launch
   attribute (a 1×1×1 cluster), ``cuLaunchKernel`` with the arguments in ``extra``
   (``CU_LAUNCH_PARAM_BUFFER_POINTER``), on the per-thread default stream and on a torch side
   stream;
3. **bare calls from Python**, the same launch: ctypes ``cuLaunchKernelEx`` on a launch
   block packed once (the ctypes path's floor), and the C launcher's ``launch`` (which packs
   every time), releasing the GIL during the driver call or keeping it;
4. pieces that launch nothing: the C launcher (both ways) with a no-op in place of the
   driver, ctypes' call of that no-op, and the torch reads the argument checks use.

Median over interleaved rounds with the 10-90 % range.  Run on the GPU machine:
``PYTHONPATH=$PWD python benchmarks/launch_paths.py``.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import gluonkit  # noqa: E402
from gluonkit.runtime import claunch, ctlaunch, gpu  # noqa: E402
from vector_add import add_kernel, vector_add_layout  # noqa: E402
from bench_launch import LAUNCHES, per_launch_us  # noqa: E402  (the same warm-up and timing loop)

N = 4096
ROUNDS = 15

# The driver loops: each takes the entry point's address and the launch's pieces and returns
# the seconds that `count` back-to-back calls took (negative: the CUresult of a failed call).
_LOOPS = r"""
#include <stdint.h>
#include <time.h>
typedef struct { unsigned gx, gy, gz, bx, by, bz, shared; void *stream; void *attrs; unsigned nattrs; } Config;
typedef struct { int id; int pad; union { unsigned dim[3]; char bytes[64]; } v; } Attribute;  /* CUlaunchAttribute */
typedef int (*Launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                      void **, void **);
typedef int (*LaunchEx)(const Config *, void *, void **, void **);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
double plain(void *entry, void *f, unsigned threads, void *stream, void **params, int count) {
    double t0 = now();
    for (int i = 0; i < count; i++) {
        int r = ((Launch)entry)(f, 1, 1, 1, threads, 1, 1, 0, stream, params, 0);
        if (r) return -r;
    }
    return now() - t0;
}
double extra(void *entry, void *f, unsigned threads, void *stream, void *buffer, size_t size, int count) {
    void *ex[] = {(void *)1, buffer, (void *)2, &size, (void *)0};
    double t0 = now();
    for (int i = 0; i < count; i++) {
        int r = ((Launch)entry)(f, 1, 1, 1, threads, 1, 1, 0, stream, 0, ex);
        if (r) return -r;
    }
    return now() - t0;
}
double ex(void *entry, void *f, unsigned threads, void *stream, void **params, int count, int cluster) {
    Attribute attr = {4, 0, {{1, 1, 1}}};  /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
    Config config = {1, 1, 1, threads, 1, 1, 0, stream, cluster ? &attr : 0, cluster ? 1 : 0};
    double t0 = now();
    for (int i = 0; i < count; i++) {
        int r = ((LaunchEx)entry)(&config, f, params, 0);
        if (r) return -r;
    }
    return now() - t0;
}
"""


@gluonkit.jit
def empty_kernel():
    pass


def toolchain() -> None:
    cc = claunch.compiler()
    include = sysconfig.get_paths().get("include")
    print(f"C compiler: {cc}; sysconfig CC: {sysconfig.get_config_var('CC')}; "
          f"Python.h: {os.path.exists(os.path.join(include or '', 'Python.h'))} ({include})")
    t0 = time.perf_counter()
    loaded = claunch.module()
    print(f"C launcher: {'built/loaded' if loaded else 'none: ' + str(claunch.why_not())} "
          f"({time.perf_counter() - t0:.2f} s)")


def _loops(cc: str):
    directory = tempfile.mkdtemp()
    source, library = os.path.join(directory, "loops.c"), os.path.join(directory, "loops.so")
    with open(source, "w") as f:
        f.write(_LOOPS)
    subprocess.run([cc, "-O2", "-shared", "-fPIC", source, "-o", library], check=True)
    lib = ctypes.CDLL(library)
    for name in ("plain", "extra", "ex"):
        getattr(lib, name).restype = ctypes.c_double
    return lib


def _address(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


def main() -> None:
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    toolchain()
    x, y, out = (torch.randn(N, device="cuda") for _ in range(3))
    layout = vector_add_layout(4)
    add_kernel[(1,)](x, y, out, N, BLOCK=N, layout=layout, num_warps=4)
    torch.cuda.synchronize()
    entry = next(iter(gpu._launches[add_kernel].values()))
    threads, handle = entry.block[0], int(entry.kernel.handle)
    packed = entry.packer.pack([x, y, out, N], entry.device)
    params = ctypes.c_void_p(packed.kernel_params)
    stream = torch._C._cuda_getCurrentRawStream(0)
    side = torch.cuda.Stream()
    try:
        empty_kernel[(1,)]()
        empty = int(next(iter(gpu._launches[empty_kernel].values())).kernel.handle)
    except Exception as e:  # noqa: BLE001 (reported; that row is left out)
        print(f"empty kernel: {type(e).__name__}: {e}")
        empty = None
    libcuda = ctypes.CDLL("libcuda.so.1")
    rows = {}
    cc = claunch.compiler()
    if cc:
        lib = _loops(cc)
        plain, ex = _address(libcuda.cuLaunchKernel), _address(libcuda.cuLaunchKernelEx)
        buffer = ctypes.c_void_p(ctypes.addressof(packed.buffer) + packed.offset)
        f, s, vp = ctypes.c_void_p(handle), ctypes.c_void_p(stream), ctypes.c_void_p
        c = ctypes.c_int
        rows["C loop: cuLaunchKernel"] = lambda n: lib.plain(vp(plain), f, threads, s, params, c(n))

        def bursts(n):  # a synchronize before each 200 launches: the launch queue never fills
            total, count = 0.0, max(1, n // 200)
            for _ in range(count):
                torch.cuda.synchronize()
                seconds = lib.plain(vp(plain), f, threads, s, params, c(200))
                if seconds < 0:
                    return seconds
                total += seconds
            return total * n / (count * 200)
        rows["C loop: cuLaunchKernel, bursts of 200"] = bursts
        if empty is not None:
            rows["C loop: cuLaunchKernel, empty kernel, no parameters"] = lambda n: lib.plain(
                vp(plain), vp(empty), 32, s, None, c(n))
        rows["C loop: cuLaunchKernelEx"] = lambda n: lib.ex(vp(ex), f, threads, s, params, c(n), c(0))
        rows["C loop: cuLaunchKernelEx, cluster attr"] = lambda n: lib.ex(vp(ex), f, threads, s, params, c(n), c(1))
        rows["C loop: cuLaunchKernel, extra buffer"] = lambda n: lib.extra(
            vp(plain), f, threads, s, buffer, ctypes.c_size_t(entry.packer._format.size), c(n))
        rows["C loop: cuLaunchKernel, per-thread stream"] = lambda n: lib.plain(
            vp(plain), f, threads, vp(2), params, c(n))
        rows["C loop: cuLaunchKernel, torch side stream"] = lambda n: lib.plain(
            vp(plain), f, threads, vp(side.cuda_stream), params, c(n))
    py = {}
    block = ctlaunch.LaunchBlock(entry.packer._format.size, entry.packer._offsets)
    ctlaunch.block_format(entry.packer._format.format).pack_into(
        block.buffer, block.offset, 1, 1, 1, *entry.block, entry.shared_bytes, stream,
        x.data_ptr(), y.data_ptr(), out.data_ptr(), N)
    launch_ex, function = ctlaunch.entry_point(), ctypes.c_void_p(handle)
    config, kparams = block.config, block.params
    py["ctypes cuLaunchKernelEx, launch block"] = lambda: launch_ex(config, function, kparams, None)
    noop = ctypes.CDLL("libm.so.6").feclearexcept  # int feclearexcept(int): returns 0, touches nothing
    noop.restype = ctypes.c_int
    loaded = claunch.module()
    if loaded is not None:
        fmt, offsets, size = entry.packer._format.format, entry.packer._offsets, entry.packer._format.size
        plan = claunch.plan(_address(launch_ex), handle, entry.block, entry.shared_bytes, 1, fmt, offsets, size)
        kept = claunch.plan(_address(launch_ex), handle, entry.block, entry.shared_bytes, 1, fmt, offsets, size,
                            release=False)
        nplan = claunch.plan(_address(noop), handle, entry.block, entry.shared_bytes, 1, fmt, offsets, size)
        go, grid = loaded.launch, (1,)
        xp, yp, op = x.data_ptr(), y.data_ptr(), out.data_ptr()
        py["C launcher launch(), values given"] = lambda: go(plan, grid, stream, xp, yp, op, N)
        py["C launcher launch(), GIL kept"] = lambda: go(kept, grid, stream, xp, yp, op, N)
        nkept = claunch.plan(_address(noop), handle, entry.block, entry.shared_bytes, 1, fmt, offsets, size,
                             release=False)
        py["C launcher, no-op driver (nothing launched)"] = lambda: go(nplan, grid, stream, xp, yp, op, N)
        py["C launcher, no-op driver, GIL kept"] = lambda: go(nkept, grid, stream, xp, yp, op, N)
    cvp = ctypes.c_void_p(1 << 40)
    py["ctypes call of a no-op (nothing launched)"] = lambda: noop(cvp, cvp, cvp, None)
    read = torch._C._cuda_getCurrentRawStream
    py["x.get_device()"] = lambda: x.get_device()
    py["x.is_cuda"] = lambda: x.is_cuda
    py["x.data_ptr()"] = lambda: x.data_ptr()
    py["x.dtype"] = lambda: x.dtype
    py["torch._C._cuda_getCurrentRawStream(0)"] = lambda: read(0)
    py["torch.cuda.current_stream().cuda_stream"] = lambda: torch.cuda.current_stream().cuda_stream
    py["an empty lambda"] = lambda: None
    expected = x + y
    launching = {*rows, "ctypes cuLaunchKernelEx, launch block", "C launcher launch(), values given",
                 "C launcher launch(), GIL kept"}
    for name, fn in [*rows.items(), *py.items()]:  # the launches compute the sum
        out.zero_()
        result = fn(1) if name in rows else fn()
        torch.cuda.synchronize()
        failed = name in launching and (result < 0 if name in rows else result != 0)
        if failed or name in launching and "empty kernel" not in name and not torch.equal(out, expected):
            print(f"{name}: failed (result {result}), left out")
            (rows if name in rows else py).pop(name)
    times = {name: [] for name in [*rows, *py]}
    for _ in range(ROUNDS):
        for name, fn in rows.items():
            fn(100)
            torch.cuda.synchronize()
            times[name].append(fn(LAUNCHES) / LAUNCHES * 1e6)
            torch.cuda.synchronize()
        for name, fn in py.items():
            times[name].append(per_launch_us(fn))
    print(f"µs per call, median of {ROUNDS} rounds of {LAUNCHES} (10-90 %)")
    for name, values in times.items():
        deciles = statistics.quantiles(values, n=10)
        print(f"{name:52s} {statistics.median(values):7.2f}  ({deciles[0]:.2f}-{deciles[-1]:.2f})")


if __name__ == "__main__":
    main()
