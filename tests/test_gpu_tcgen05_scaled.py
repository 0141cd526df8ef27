"""The block-scaled MMA and its GEMM example on a Blackwell GPU (sm_100a), against float64.

Marked ``gpu`` and skipped unless the device is a Blackwell (sm_100a) with torch; nothing of
this can run on Hopper.  Outputs are poisoned (NaN) before each launch.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import device_properties, has_gpu

sys.path[:0] = [os.path.dirname(__file__), os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm")]

from test_block_scaled_gemm import _problem  # noqa: E402

_BLACKWELL = has_gpu() and device_properties().arch == "sm_100a"
torch = pytest.importorskip("torch") if _BLACKWELL else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _BLACKWELL, reason="needs a Blackwell (sm_100a) GPU")]


def _device(array):
    """A torch copy on the GPU of a numpy array (fp8 arrays through their bytes)."""
    tdt = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}.get(str(array.dtype))
    if tdt is None:
        return torch.from_numpy(np.ascontiguousarray(array)).cuda()
    return torch.from_numpy(np.ascontiguousarray(array).view(np.uint8)).cuda().view(tdt)


@pytest.mark.parametrize("a_fmt, b_fmt, nvfp4", [("e4m3", "e4m3", False), ("e5m2", "e4m3", False),
                                                 ("e2m1", "e2m1", False), ("e2m1", "e2m1", True)])
@pytest.mark.parametrize("M, N, K", [(1024, 1024, 1024), (1000, 296, 768)])
def test_block_scaled_gemm_on_the_gpu(a_fmt, b_fmt, nvfp4, M, N, K):
    import blackwell_block_scaled_gemm as example
    a, b, sa, sb, ref = _problem(a_fmt, b_fmt, M, N, K, nvfp4, seed=1)
    c = torch.full((M, N), float("nan"), device="cuda")
    example.gemm(*(_device(x) for x in (a, b, sa, sb)), c, a_fmt, b_fmt, BN=128, BK=128, EPILOGUE_SPLIT=2)
    torch.cuda.synchronize()
    out = c.double().cpu().numpy()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5
