"""Tensor memory on a Blackwell GPU (sm_100a), against the CPU interpreter.

The kernels are ``tests/tmem_kernels.py``'s; marked ``gpu`` and skipped unless the device
is a Blackwell (sm_100a) with torch.  Outputs are poisoned before each launch so an element
the kernel fails to write cannot pass.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.language.nvidia.blackwell import TensorMemoryLayout
from gluonkit.runtime.driver import device_properties, has_gpu

sys.path.insert(0, os.path.dirname(__file__))

from interpreting import launch_interpreted  # noqa: E402
from tmem_kernels import round_trip, row_max, staged_slices  # noqa: E402

_BLACKWELL = has_gpu() and device_properties().arch == "sm_100a"
torch = pytest.importorskip("torch") if _BLACKWELL else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _BLACKWELL, reason="needs a Blackwell (sm_100a) GPU")]

LAYOUTS = {"fp32": (np.float32, TensorMemoryLayout([128, 64], 1)), "fp16": (np.float16, TensorMemoryLayout([128, 64], 1)),
           "fp16_col_stride2": (np.float16, TensorMemoryLayout([128, 64], 2))}


@pytest.mark.parametrize("variant", ["32x32b", "16x64b", "16x128b", "16x256b"])
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_round_trip_on_the_gpu_is_bit_identical(name, variant):
    dtype, layout = LAYOUTS[name]
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(dtype)
    gy = torch.full((128, 64), float("nan"), dtype=getattr(torch, np.dtype(dtype).name), device="cuda")
    round_trip[(1,)](torch.from_numpy(x).cuda(), gy, 128, 64, layout, variant, num_warps=4)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gy.cpu().numpy().view(np.uint8), x.view(np.uint8))


def test_stages_slices_and_load_max_match_the_interpreter():
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    gy = torch.full((128, 64), float("nan"), device="cuda")
    staged_slices[(1,)](torch.from_numpy(x).cuda(), gy, 128, 64, TensorMemoryLayout([128, 64], 1), num_warps=4)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gy.cpu().numpy(), x)
    y, m = np.zeros((128, 32), np.float32), np.zeros(128, np.float32)
    launch_interpreted(row_max, (1,), x[:, :32].copy(), y, m, 128, 32, True, num_warps=4)
    gm = torch.full((128,), float("nan"), device="cuda")
    row_max[(1,)](torch.from_numpy(x[:, :32].copy()).cuda(), torch.empty((128, 32), device="cuda"), gm, 128, 32, True,
                  num_warps=4)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gm.cpu().numpy(), m)
