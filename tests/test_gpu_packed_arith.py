"""Blackwell's packed arithmetic (``add2`` …) on the GPU, bit for bit against the interpreter and the exact reference.

The kernels are those of ``tests/test_packed_arith.py``; marked ``gpu`` (skipped without a CUDA GPU and torch).
The 16-bit pairs (``add.rn.f16x2`` …) run on Hopper too; the float32 pairs need a Blackwell GPU.  Outputs are
poisoned with NaN before each launch.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import device_properties, has_gpu

sys.path.insert(0, os.path.dirname(__file__))

from interpreting import launch_interpreted  # noqa: E402
from packed_arith_kernels import packed  # noqa: E402
from test_packed_arith import CASES, DTYPES, _bits, _inputs, reference  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]
_BLACKWELL = has_gpu() and device_properties().arch == "sm_100a"


def _cuda(a: np.ndarray):
    """``a`` on the GPU with its own element type (bfloat16 through its bits: numpy has no torch bfloat16)."""
    name = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}[a.dtype.name]
    return torch.from_numpy(_bits(a).view(np.int32 if a.itemsize == 4 else np.int16)).cuda().view(getattr(torch, name))


@pytest.mark.parametrize("dtype, op", CASES)
def test_packed_lanes_match_the_interpreter_bit_for_bit(dtype, op):
    if dtype == "float32" and not _BLACKWELL:
        pytest.skip("float32 pairs (add.rn.f32x2 …) need a Blackwell GPU")
    x, y, z = _inputs(dtype, 512, np.random.default_rng(len(op)))
    out = _cuda(np.full(512, np.nan, DTYPES[dtype]))
    packed[(1,)](_cuda(x), _cuda(y), _cuda(z), out, OP=op, N=512, SPT=4, num_warps=4)
    torch.cuda.synchronize()
    gpu = out.view(torch.int32 if dtype == "float32" else torch.int16).cpu().numpy().view(_bits(x).dtype)
    interpreted = np.full(512, np.nan, DTYPES[dtype])
    launch_interpreted(packed, (1,), x, y, z, interpreted, OP=op, N=512, SPT=4, num_warps=4)
    np.testing.assert_array_equal(gpu, _bits(interpreted))
    np.testing.assert_array_equal(gpu, _bits(reference(op, x, y, z, DTYPES[dtype])))
