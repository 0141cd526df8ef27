"""The generated launch on the GPU, ending in the C launcher (:mod:`gluonkit.runtime.claunch`)
and in ctypes (:mod:`gluonkit.runtime.ctlaunch`): what it passes to libcuda's
``cuLaunchKernelEx`` — pointers, int32, int64 and float32 scalars, a 2-D grid, TMA
descriptors by value — computes what float64 references say; a driver error leaves nothing
launched and is raised by name; a thread without a current context launches too.

Marked ``gpu``: skipped without a CUDA GPU and torch.  Outputs are poisoned (NaN) first.
Each test runs with both endings, and checks that the launches went through the generated
launch by making the cuda-python launch (the general path) fail.
"""

import os
import sys
import threading

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.runtime import claunch, driver, launch
from gluonkit.runtime.driver import CudaError, has_gpu

sys.path.insert(0, os.path.dirname(__file__))

import test_tma as t  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]

BIG = 2**40 + 12345  # an int64 argument


@gluonkit.jit
def mixed_kernel(x_ptr, out_ptr, n, alpha, big, BLOCK: gl.constexpr):
    program = gl.program_id(1) * gl.num_programs(0) + gl.program_id(0)
    offs = program * BLOCK + gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [4], [0]))
    mask = offs < n
    shift = (big - 1099511627776).to(gl.float32)  # big - 2**40, computed in int64
    gl.store(out_ptr + offs, alpha * gl.load(x_ptr + offs, mask=mask) + shift, mask=mask)


def _expected(x, alpha, big):
    return (alpha * x.double() + float(big - 2**40)).float()


@pytest.fixture(autouse=True, params=["C launcher", "ctypes"])
def ending(request, monkeypatch):
    """Generated launches built afresh in this test, ending in the C launcher (which must build
    on the GPU machine) or in ctypes; returns the name the generated source then calls."""
    if request.param == "ctypes":
        monkeypatch.setattr(claunch, "module", lambda: None)
    else:
        assert claunch.module() is not None, claunch.why_not()
    monkeypatch.setattr(launch, "_PATTERNS", {})  # loaded kernels stay loaded; their launches are generated again
    for kernel in (mixed_kernel, t.add_one_kernel):
        monkeypatch.setattr(kernel, "_fast_launch", None)
    return "_claunch(" if request.param == "C launcher" else "_launch_ex("


@pytest.fixture
def no_general_launch(monkeypatch):
    """After the first (compiling) launch, cuda-python's launch fails: only the generated launch can launch."""
    def refuse(*args, **kwargs):
        raise AssertionError("launched through cuda-python, not the generated launch")

    def arm():
        monkeypatch.setattr(driver.Kernel, "launch", refuse)
    return arm


@pytest.mark.parametrize("grid", [(8,), (2, 4), (4, 2, 1)])
def test_scalars_pointers_and_grids_through_the_generated_launch(no_general_launch, ending, grid):
    n, block = 1000, 128
    generator = torch.Generator("cuda").manual_seed(7)
    x = torch.randn(n, device="cuda", generator=generator)
    out = torch.full((n,), float("nan"), device="cuda")
    mixed_kernel[grid](x, out, n, 1.5, BIG, BLOCK=block)  # compiles, loads
    assert ending in mixed_kernel._fast_launch.source
    no_general_launch()
    for alpha, big in [(-0.25, BIG + 3), (3.0, 2**40 - 7), (0.5, 2**62 + 5)]:  # int64, not divisible by 16
        out.fill_(float("nan"))
        mixed_kernel[grid](x, out, n, alpha, big, BLOCK=block)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, _expected(x, alpha, big), rtol=1e-6, atol=1e-6)


def test_the_warmed_up_handle_launches_through_the_generated_launch(no_general_launch, ending):
    n = 512
    x = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    handle = mixed_kernel.warmup(x, out, n, 1.0, BIG, BLOCK=128, grid=(4,))
    assert ending in handle._fast.source
    no_general_launch()
    side = torch.cuda.Stream()
    handle[(4,)](x, out, n, 2.0, BIG + 1, stream=side)
    side.synchronize()
    torch.testing.assert_close(out, _expected(x, 2.0, BIG + 1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, block", [((128, 128), [64, 64]), ((200, 296), [64, 128])])
def test_tma_descriptors_by_value_through_the_generated_launch(no_general_launch, ending, shape, block):
    def desc(tensor):
        return t.TensorDescriptor.from_tensor(tensor, block, t.nvmma(block, t.gl.float16))

    grid = (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
    x = torch.randn(shape, dtype=torch.float16, device="cuda")
    y = torch.full_like(x, float("nan"))
    t.add_one_kernel[grid](desc(x), desc(y), t.REG)
    assert "kernel_arg_bytes" in t.add_one_kernel._fast_launch.source
    assert ending in t.add_one_kernel._fast_launch.source
    no_general_launch()
    x2 = torch.randn(shape, dtype=torch.float16, device="cuda")
    y2 = torch.full_like(x2, float("nan"))
    t.add_one_kernel[grid](desc(x2), desc(y2), t.REG)  # new tensor maps, passed by value
    torch.cuda.synchronize()
    torch.testing.assert_close(y2, x2 + 1, rtol=0, atol=0)


def test_a_driver_error_launches_nothing_and_is_raised_by_name():
    n = 256
    x = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    mixed_kernel[(2,)](x, out, n, 1.0, BIG, BLOCK=128)
    torch.cuda.synchronize()
    out.fill_(float("nan"))
    with pytest.raises(CudaError, match="cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE"):
        mixed_kernel[(1, 2**16, 1)](x, out, n, 1.0, BIG, BLOCK=128)  # grid y past 65535
    torch.cuda.synchronize()
    assert torch.isnan(out).all()
    mixed_kernel[(2,)](x, out, n, 1.0, BIG, BLOCK=128)  # not a sticky error
    torch.cuda.synchronize()
    torch.testing.assert_close(out, _expected(x, 1.0, BIG), rtol=1e-6, atol=1e-6)


def test_a_thread_without_a_current_context_launches():
    n = 256
    x = torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    mixed_kernel[(2,)](x, out, n, 1.0, BIG, BLOCK=128)
    torch.cuda.synchronize()
    out.fill_(float("nan"))
    errors = []

    def worker():
        try:
            for alpha in (2.0, -1.0):  # the first finds no context (the general path sets it), the second is fast
                mixed_kernel[(2,)](x, out, n, alpha, BIG, BLOCK=128)
            torch.cuda.synchronize()
        except Exception as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert not errors
    torch.testing.assert_close(out, _expected(x, -1.0, BIG), rtol=1e-6, atol=1e-6)
