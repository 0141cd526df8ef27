"""torch integration on the CPU: the custom-operator example traced by ``torch.compile``
and a warmed-up handle, with CPU tensors in the interpreter.  Skipped where torch is not
installed (the GPU side is in ``test_gpu_torch.py``)."""

import os
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import torch_custom_op as example  # noqa: E402


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")


def _inputs(rows, cols, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=generator), torch.randn(rows, cols, generator=generator)


def test_custom_op_passes_opcheck_and_matches_float64():
    x, y = _inputs(3, 1500, 0)
    torch.library.opcheck(example.scaled_add, (x, y, -0.75))
    expected = x.double() - 0.75 * y.double()
    torch.testing.assert_close(example.scaled_add(x, y, -0.75).double(), expected, rtol=0, atol=1e-6)


def test_custom_op_runs_in_one_compiled_graph():
    x, y = _inputs(5, 700, 1)
    expected = torch.relu(x.double() * 2.0 + 0.5 * y.double()).sum(dim=-1)
    torch.testing.assert_close(example.compiled_model()(x, y).double(), expected, rtol=1e-6, atol=1e-4)


def test_custom_op_refuses_other_dtypes_with_its_message():
    x, y = _inputs(2, 10, 2)
    with pytest.raises(RuntimeError, match="scaled_add needs float32 tensors of one shape"):
        example.scaled_add(x, y.double(), 1.0)


def test_warmed_up_handle_on_cpu_tensors():
    x, y = _inputs(1, 3000, 3)
    out = torch.full_like(x, float("nan"))
    n = x.numel()
    handle = example.scaled_add_kernel.warmup(x, y, out, n, 2.0, BLOCK=1024, num_warps=4, grid=(3,))
    assert torch.isnan(out).all()
    handle[(3,)](x, y, out, n, 0.125)
    torch.testing.assert_close(out.double(), x.double() + 0.125 * y.double(), rtol=0, atol=1e-6)
