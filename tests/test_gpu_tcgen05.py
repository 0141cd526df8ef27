"""tcgen05 MMAs and the Blackwell GEMM examples on a Blackwell GPU (sm_100a), against float64.

Marked ``gpu`` and skipped unless the device is a Blackwell (sm_100a) with torch; nothing of
this can run on Hopper.  Outputs are poisoned (NaN) before each launch.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import device_properties, has_gpu

sys.path[:0] = [os.path.dirname(__file__)] + [os.path.join(os.path.dirname(__file__), "..", "examples", d)
                                              for d in ("persistent_gemm", "warp_specialized")]

from tcgen05_kernels import mma, sync_mma  # noqa: E402

_BLACKWELL = has_gpu() and device_properties().arch == "sm_100a"
torch = pytest.importorskip("torch") if _BLACKWELL else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _BLACKWELL, reason="needs a Blackwell (sm_100a) GPU")]


@pytest.mark.parametrize("dtype, b_kmajor, acc", [("float16", False, False), ("bfloat16", True, True),
                                                  ("float32", True, False)])
def test_mma_on_the_gpu_matches_float64(dtype, b_kmajor, acc):
    M, N, K = 128, 64, 64 if dtype != "float32" else 32
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda").to(tdt)
    b = torch.randn(K, N, device="cuda").to(tdt)
    c0 = torch.randn(M, N, device="cuda")
    c = c0.clone() if acc else torch.full((M, N), float("nan"), device="cuda")
    mma[(1,)](a, b.t().contiguous() if b_kmajor else b, c, M, N, K, b_kmajor, acc, num_warps=4)
    torch.cuda.synchronize()
    ref = a.double() @ b.double() + (c0.double() if acc else 0)
    tol = 2e-3 if dtype == "float32" else 1e-5  # tf32 products
    assert ((c.double() - ref).norm() / ref.norm()).item() < tol


def test_synchronous_mmas_on_the_gpu():
    a = torch.randn(128, 32, device="cuda").half()
    b = (torch.randn(32, 32, device="cuda") / 4).half()
    c = torch.full((128, 32), float("nan"), device="cuda")
    sync_mma[(1,)](a, b, c, 128, 32, num_warps=4)
    torch.cuda.synchronize()
    ref = (a.double() @ b.double()).float().half().double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-3


@pytest.mark.parametrize("module", ["blackwell_gemm", "blackwell_ws_gemm"])
@pytest.mark.parametrize("M, N, K", [(1024, 1024, 1024), (1000, 296, 776)])
def test_gemm_examples_on_the_gpu(module, M, N, K):
    gemm = __import__(module).gemm
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    gemm(a, b, c, BN=128, EPILOGUE_SPLIT=2)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-5


@pytest.mark.parametrize("cluster_m, clc", [(1, False), (1, True), (2, False), (2, True)])
@pytest.mark.parametrize("M, N, K", [(2048, 1024, 1024), (1000, 296, 776)])
def test_2cta_gemm_example_on_the_gpu(cluster_m, clc, M, N, K):
    """CTA pairs (cta_group::2) and clusters of two pairs multicasting B (docs/blackwell_2cta.rst)."""
    gemm = __import__("blackwell_ws_gemm_2cta").gemm
    a = torch.randn(M, K, device="cuda").half()
    b = torch.randn(K, N, device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda")
    gemm(a, b, c, BN=128, EPILOGUE_SPLIT=2, use_clc=clc, cluster_m=cluster_m)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-5
