"""Shared-memory staging and mbarrier phases on the GPU, against the CPU interpreter.

The kernels are those of ``tests/test_shared_memory.py``; marked ``gpu`` (skipped without
a CUDA GPU and torch).  Outputs are poisoned before each launch so an element the kernel
fails to write cannot pass.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.dirname(__file__))

import test_shared_memory as shared  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]


@pytest.mark.parametrize("name", sorted(shared.SMEM_LAYOUTS))
@pytest.mark.parametrize("stage", [0, 1])
def test_staging_through_shared_memory_matches_the_interpreter(name, stage):
    x = np.random.default_rng(stage).standard_normal((shared.M, shared.N)).astype(np.float16)
    expected = np.zeros_like(x)
    kw = dict(M=shared.M, N=shared.N, src=shared.SRC, dst=shared.DST, smem_layout=shared.SMEM_LAYOUTS[name],
              STAGE=stage)
    shared._interpret(shared.stage_kernel, x, expected, **kw)
    gx = torch.from_numpy(x).cuda()
    gy = torch.full_like(gx, float("nan"))
    shared.stage_kernel[(1,)](gx, gy, **kw)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gy.cpu().numpy(), expected)
    np.testing.assert_array_equal(expected, x)


@pytest.mark.parametrize("name", ["nvmma128", "swizzled"])
def test_sliced_permuted_views_match_the_interpreter(name):
    x = np.random.default_rng(3).standard_normal((shared.M, shared.N)).astype(np.float16)
    expected = np.zeros((shared.N // 2, shared.M // 2), np.float16)
    kw = dict(M=shared.M, N=shared.N, layout=shared.SRC, smem_layout=shared.SMEM_LAYOUTS[name])
    shared._interpret(shared.quadrant_kernel, x, expected, **kw)
    gy = torch.full(expected.shape, float("nan"), dtype=torch.float16, device="cuda")
    shared.quadrant_kernel[(1,)](torch.from_numpy(x).cuda(), gy, **kw)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gy.cpu().numpy(), expected)


@pytest.mark.parametrize("rounds", [1, 2, 5, 64])
def test_mbarrier_phases_match_the_interpreter(rounds):
    expected = np.full(2, -1, np.int32)
    shared._interpret(shared.phases_kernel, expected, ROUNDS=rounds)
    out = torch.full((2,), -1, dtype=torch.int32, device="cuda")
    shared.phases_kernel[(1,)](out, ROUNDS=rounds)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected)


@pytest.mark.parametrize("iters", [1, 4])
def test_a_conversion_through_a_dead_buffer_matches_float64(iters):
    """The conversion's scratch reuses the staging buffer's bytes; a missing barrier between the buffer's
    readers and the scratch writers (or back, in the next iteration) would corrupt tiles."""
    x = np.random.default_rng(iters).standard_normal((iters, 128, 64)).astype(np.float32)
    out = torch.full((128, 64), float("nan"), dtype=torch.float32, device="cuda")
    shared.dead_buffer_scratch_kernel[(1,)](torch.from_numpy(x).cuda(), out, STAGES=7, ITERS=iters)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), shared.dead_buffer_scratch_expected(x), rtol=1e-6, atol=1e-6)
