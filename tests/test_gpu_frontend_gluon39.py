"""Gluon 3.9 frontend features on the GPU, compared with numpy on random inputs: launch
options as parameters, aggregates, early returns, tuple kernel arguments, and a failing
``device_assert`` (in a subprocess: a device-side assert poisons the CUDA context).

Marked ``gpu``: skipped without a CUDA GPU and torch.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]

sys.path.insert(0, os.path.dirname(__file__))


def _kernels():
    import test_frontend_gluon39 as kernels
    return kernels


def test_launch_option_parameters_on_the_gpu():
    k = _kernels()
    x = torch.randint(-50, 50, (256,), device="cuda", dtype=torch.int32)
    out = torch.full_like(x, -7)
    k.warps_kernel[(1,)](x, out, num_warps=8)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), x.cpu().numpy() * 8 + 800 + 10000)


def test_aggregates_on_the_gpu():
    k = _kernels()
    x = torch.randn(64, device="cuda")
    out = torch.full_like(x, float("nan"))
    stats = torch.full((1,), float("nan"), device="cuda")
    k.aggregate_kernel[(1,)](x, out, stats, 1.5, ITERS=3, num_warps=2)
    x64 = x.double().cpu().numpy()
    expected = (x64 + 3.0) * 3.0 + 1.5 + 0.5
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.cpu().numpy()[0], (x64.max() - x64.min()) * 4, rtol=1e-5)


def test_early_return_on_the_gpu():
    k = _kernels()
    x = torch.randint(-9, 10, (40,), device="cuda", dtype=torch.int32)
    out = torch.full_like(x, 1234)
    signs = torch.full_like(x, 1234)
    k.early_return_kernel[(40,)](x, out, signs, 33, LIM=5)
    xs = x.cpu().numpy()
    expected = np.where(xs > 5, 5, np.where(xs < -5, -5, xs * 2))
    np.testing.assert_array_equal(out.cpu().numpy()[:33], expected[:33])
    np.testing.assert_array_equal(out.cpu().numpy()[33:], 1234)
    np.testing.assert_array_equal(signs.cpu().numpy()[:33], xs[:33])


def test_tuple_arguments_on_the_gpu():
    k = _kernels()
    x, y = torch.randn(128, device="cuda"), torch.randn(128, device="cuda")
    out = torch.full_like(x, float("nan"))
    for _ in range(2):  # the second launch takes the fast path
        k.tuple_args_kernel[(1,)]((x, y), out, (2.0, 3, k.gl.constexpr(4)), 5)
        expected = 2 * x.double() + 3 * y.double() + 20
        np.testing.assert_allclose(out.cpu().numpy(), expected.cpu().numpy(), rtol=1e-5)
    k.tuple_args_kernel[(1,)]((y, x), out, (0.5, -1, k.gl.constexpr(2)), 5)
    expected = 0.5 * y.double() - x.double() + 10
    np.testing.assert_allclose(out.cpu().numpy(), expected.cpu().numpy(), rtol=1e-5)


_ASSERTING = textwrap.dedent("""
    import torch, gluonkit, gluonkit.language as gl

    @gluonkit.jit(debug=True)
    def kernel(x_ptr, n):
        offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
        gl.device_assert(gl.load(x_ptr + offs) < n, "x is too big")

    x = torch.arange(128, device="cuda", dtype=torch.int32)
    kernel[(1,)](x, 1000)
    torch.cuda.synchronize()
    print("first launch passed", flush=True)
    kernel[(1,)](x, 50)
    torch.cuda.synchronize()
    print("second launch passed", flush=True)
""")


def test_device_assert_traps_on_the_gpu(tmp_path):
    script = tmp_path / "asserting.py"
    script.write_text(_ASSERTING)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    output = proc.stdout + proc.stderr
    assert "first launch passed" in output, output
    assert "second launch passed" not in output, output
    assert "x is too big" in output and "asserting.py" in output, output
