"""A disagreement the GPU differential fuzzer found (H100, 2026-11-25): ``gl.max(-a, axis=1)`` of
int32 whose reduction ptxas 13.0 turns into ``VIMNMX3`` loses one operand's negation.

The PTX gluonkit emits is right (``neg.s32`` on each of the four registers, then ``max.s32``;
byte-identical before and after the day's changes); the SASS from ptxas 13.0 (``-O3``) negates
three of them with ``IMAD.MOV R, RZ, RZ, -R`` and feeds the fourth to ``VIMNMX3`` un-negated, so the
GPU returns 7 for ``max(-[5, 7, 7, ...])`` where the interpreter and numpy give -5.  The GPU test
is a strict xfail naming the ptxas bug: it turns into a failure, to be removed, when ptxas is fixed
or gluonkit works around it (docs/decisions.rst, "ptxas 13.0 drops a negation").
"""

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.runtime.driver import has_gpu
from interpreting import interpreter_on


@gluonkit.jit
def negated_row_max(x_ptr, out_ptr, C: gl.constexpr):
    src: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0])
    dst: gl.constexpr = gl.BlockedLayout([1, 1], [16, 2], [1, 1], [1, 0])
    c = gl.arange(0, C, gl.SliceLayout(0, src))
    a = gl.convert_layout(gl.load(x_ptr + c[None, :]), dst)
    row = gl.max(-a, axis=1)
    gl.store(out_ptr + gl.arange(0, 1, gl.SliceLayout(1, dst)), row)


def _inputs():
    x = np.full((1, 8), 7, np.int32)
    x[0, 0] = 5
    return x, np.array([-5], np.int32)


def test_the_interpreter_negates_every_operand():
    x, want = _inputs()
    out = np.full(1, 12345, np.int32)
    with interpreter_on():
        negated_row_max[(1,)](x, out, C=8, num_warps=1)
    np.testing.assert_array_equal(out, want)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.xfail(strict=True, reason="ptxas 13.0 drops one negation when it forms VIMNMX3 (SASS read on the H100)")
def test_the_gpu_negates_every_operand():
    torch = pytest.importorskip("torch")
    x, want = _inputs()
    out = torch.full((1,), 12345, dtype=torch.int32, device="cuda")
    negated_row_max[(1,)](torch.from_numpy(x).cuda(), out, C=8, num_warps=1)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), want)
