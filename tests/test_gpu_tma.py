"""TMA loads and stores on the GPU, against torch and the CPU interpreter.

The kernels are those of ``tests/test_tma.py``; marked ``gpu`` (skipped without a CUDA GPU
and torch).  Outputs are poisoned (NaN) before each launch so an element the kernel fails
to write, or writes outside the tensor, cannot pass.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.dirname(__file__))

from interpreting import launch_interpreted  # noqa: E402
import test_tma as t  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]


def _device_desc(tensor, block, dtype):
    return t.TensorDescriptor.from_tensor(tensor, block, t.nvmma(block, dtype))


@pytest.mark.parametrize("shape, block", [((128, 128), [64, 64]), ((100, 72), [64, 32]), ((200, 296), [64, 128]),
                                          ((48, 520), [32, 256])])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tma_load_add_store_matches_torch_and_the_interpreter(shape, block, dtype):
    gl_dtype = getattr(t.gl, dtype)
    x = torch.randn(shape, dtype=getattr(torch, dtype), device="cuda")
    y = torch.full_like(x, float("nan"))
    grid = (-(-shape[0] // block[0]), -(-shape[1] // block[1]))
    t.add_one_kernel[grid](_device_desc(x, block, gl_dtype), _device_desc(y, block, gl_dtype), t.REG)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x + 1, rtol=0, atol=0)
    if dtype == "float16":
        xs = x.cpu().numpy()
        expected = np.full_like(xs, np.nan)
        launch_interpreted(t.add_one_kernel, grid, t._desc(xs, block), t._desc(expected, block), t.REG)
        np.testing.assert_array_equal(y.cpu().numpy(), expected)


@pytest.mark.parametrize("block", [[64, 64], [64, 128], [32, 256]])
def test_ragged_edges_read_zero_like_the_interpreter(block):
    rows, cols = block[0] * 3 // 2, block[1] - 8
    x = t._data((rows, cols))
    expected = np.full((2 * block[0], block[1]), np.nan, np.float16)
    shape = np.zeros(2, np.int32)
    launch_interpreted(t.tile_kernel, (2,), t._desc(x, block), expected, shape, t.REG, STAGES=2)
    gx = torch.from_numpy(x).cuda()
    out = torch.full(expected.shape, float("nan"), dtype=torch.float16, device="cuda")
    gshape = torch.zeros(2, dtype=torch.int32, device="cuda")
    t.tile_kernel[(2,)](_device_desc(gx, block, t.gl.float16), out, gshape, t.REG, STAGES=2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected)
    np.testing.assert_array_equal(gshape.cpu().numpy(), [rows, cols])
