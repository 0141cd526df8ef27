"""The examples, run in the CPU interpreter on fresh random inputs and compared with numpy
(float64 references), at sizes with ragged edges."""

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))

import cross_entropy  # noqa: E402
import fused_softmax  # noqa: E402
import transpose  # noqa: E402
import vector_add  # noqa: E402


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")


def test_vector_add():
    rng = np.random.default_rng()
    x, y = rng.standard_normal((2, 5001), dtype=np.float32)
    out = np.full(5001, np.nan, np.float32)
    vector_add.add(x, y, out, BLOCK=1024)
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("cols", [1, 77, 512])
def test_fused_softmax(cols):
    x = np.random.default_rng().standard_normal((6, cols), dtype=np.float32) * 4
    out = np.full_like(x, np.nan)
    fused_softmax.softmax(x, out)
    assert np.abs(out - fused_softmax.reference(x)).max() < 1e-6


def test_transpose():
    x = np.random.default_rng().standard_normal((64, 128), dtype=np.float32)
    out = np.full((128, 64), np.nan, np.float32)
    transpose.transpose(x, out, BM=32, BN=64)
    np.testing.assert_array_equal(out, x.T)


@pytest.mark.parametrize("cols, block", [(1000, 256), (2048, 512), (7, 1024)])
def test_cross_entropy_forward_and_backward(cols, block):
    rng = np.random.default_rng()
    rows = 5
    logits = (3 * rng.standard_normal((rows, cols))).astype(np.float32)
    targets = rng.integers(0, cols, rows).astype(np.int32)
    loss = np.full(rows, np.nan, np.float32)
    grad = np.full((rows, cols), np.nan, np.float32)
    cross_entropy.cross_entropy(logits, targets, loss, grad, BLOCK=block, num_warps=4)
    ref_loss, ref_grad = cross_entropy.reference(logits, targets)
    assert np.abs(loss - ref_loss).max() < 1e-4
    assert np.abs(grad - ref_grad).max() < 1e-6
