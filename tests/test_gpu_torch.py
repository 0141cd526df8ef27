"""torch integration on the GPU: streams, CUDA graphs, a custom operator under
``torch.compile``, and arrays given through ``__cuda_array_interface__`` or DLPack.

Marked ``gpu``: skipped without a CUDA GPU and torch.  Outputs are poisoned (NaN) before
launches so an element a kernel fails to write cannot pass.
"""

import os
import sys

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.runtime.driver import has_gpu
from gluonkit.runtime.gpu import GraphCaptureError

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

N = 4096


@gluonkit.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, gl.BlockedLayout([4], [32], [4], [0]))
    mask = offs < n
    gl.store(out_ptr + offs, alpha * gl.load(x_ptr + offs, mask=mask) + gl.load(y_ptr + offs, mask=mask), mask=mask)


def _tensors(n=N):
    generator = torch.Generator("cuda").manual_seed(n)
    x = torch.randn(n, device="cuda", generator=generator)
    y = torch.randn(n, device="cuda", generator=generator)
    return x, y, torch.full((n,), float("nan"), device="cuda")


def _expected(x, y, alpha):
    return (alpha * x.double() + y.double()).float()


def test_launches_follow_torchs_current_stream():
    x, y, out = _tensors()
    source = x.clone()
    x.zero_()
    axpy_kernel[(1,)](x, y, out, N, 2.0, BLOCK=N)  # compiled and loaded before the streams' work
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # keeps the side stream busy: a launch elsewhere would run first
        x.copy_(source)
        axpy_kernel[(1,)](x, y, out, N, 2.0, BLOCK=N)
    side.synchronize()
    torch.testing.assert_close(out, _expected(source, y, 2.0), rtol=0, atol=1e-6)


def test_the_handle_launches_on_the_stream_it_is_given():
    x, y, out = _tensors()
    handle = axpy_kernel.warmup(x, y, out, N, 2.0, BLOCK=N, grid=(1,))
    source = x.clone()
    x.zero_()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)
        x.copy_(source)
    handle[(1,)](x, y, out, N, -1.5, stream=side)  # current stream: the default one, idle
    side.synchronize()
    torch.testing.assert_close(out, _expected(source, y, -1.5), rtol=0, atol=1e-6)


def test_cuda_graph_capture_and_replay():
    x, y, out = _tensors()
    out2 = torch.full_like(out, float("nan"))
    handle = axpy_kernel.warmup(x, y, out, N, 3.0, BLOCK=1024, grid=(4,))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        axpy_kernel[(4,)](x, y, out, N, 3.0, BLOCK=1024)
        handle[(4,)](out, y, out2, N, 0.5)
    torch.cuda.synchronize()
    for seed in range(3):  # new inputs in the same buffers, replayed
        x.copy_(torch.randn(N, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        out.fill_(float("nan"))
        out2.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, _expected(x, y, 3.0), rtol=0, atol=1e-5)
        torch.testing.assert_close(out2, _expected(out, y, 0.5), rtol=0, atol=1e-5)


def test_a_first_compile_during_capture_says_to_warm_up():
    x, y, out = _tensors()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(GraphCaptureError, match="before capturing"):
        with torch.cuda.graph(graph):
            axpy_kernel[(2,)](x, y, out, N, 1.0, BLOCK=2048)  # a BLOCK never launched before
    torch.cuda.synchronize()


class CudaArrayInterfaceOnly:
    """A device array known only by ``__cuda_array_interface__`` (as CuPy or Numba give)."""

    def __init__(self, tensor):
        self.tensor = tensor  # keeps the memory alive
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


class DLPackOnly:
    """A device array known only by ``__dlpack__`` / ``__dlpack_device__``."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


@pytest.mark.parametrize("wrap", [CudaArrayInterfaceOnly, DLPackOnly])
def test_cuda_array_interface_and_dlpack_arguments(wrap):
    x, y, out = _tensors(1000)
    axpy_kernel[(1,)](wrap(x), wrap(y), wrap(out), 1000, 2.0, BLOCK=1024)
    torch.testing.assert_close(out, _expected(x, y, 2.0), rtol=0, atol=1e-6)
    out.fill_(float("nan"))
    handle = axpy_kernel.warmup(wrap(x), wrap(y), wrap(out), 1000, 2.0, BLOCK=1024, grid=(1,))
    handle[(1,)](wrap(x), wrap(y), wrap(out), 1000, -2.0)
    torch.testing.assert_close(out, _expected(x, y, -2.0), rtol=0, atol=1e-6)


def test_custom_op_under_torch_compile():
    import torch_custom_op as example

    generator = torch.Generator("cuda").manual_seed(3)
    x = torch.randn(33, 1000, device="cuda", generator=generator)
    y = torch.randn(33, 1000, device="cuda", generator=generator)
    torch.library.opcheck(example.scaled_add, (x, y, 0.25))
    expected = torch.relu(x.double() * 2.0 + 0.5 * y.double()).sum(dim=-1)
    torch.testing.assert_close(example.compiled_model()(x, y).double(), expected, rtol=1e-5, atol=1e-3)


def test_warmed_up_handle_matches_the_ordinary_launch_on_random_inputs():
    x, y, out = _tensors(100_003)
    grid = (gluonkit.cdiv(100_003, 1024),)
    handle = axpy_kernel.warmup(x, y, out, 100_003, 0.75, BLOCK=1024, grid=grid)
    launcher = handle[grid]
    launcher(x, y, out, 100_003, 0.75)
    torch.testing.assert_close(out, _expected(x, y, 0.75), rtol=0, atol=1e-5)
