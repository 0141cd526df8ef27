"""CTA clusters on the GPU: the kernels of ``cluster_kernels.py`` launched with
``num_ctas > 1`` (the PTX's ``.reqnctapercluster`` shapes the cluster), compared with numpy
and with the interpreter.  Marked ``gpu`` (skipped without a CUDA GPU and torch).  Outputs
are poisoned before each launch so an element the kernel fails to write cannot pass."""

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

from cluster_kernels import (cluster_ids, multicast_args, multicast_reference, multicast_sum, replicated, routed_arrivals,
                             routed_reference, ws_cluster_signal)
from interpreting import interpreter_on

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]


@pytest.mark.parametrize("num_ctas", [1, 2, 4, 8])
def test_cluster_launch_program_ids_stores_and_one_atomic_per_cluster(num_ctas):
    grid = 5
    x = np.random.default_rng(num_ctas).integers(-1000, 1000, grid * 128).astype(np.int32)
    gx = torch.from_numpy(x).cuda()
    out = torch.full_like(gx, -7)
    count = torch.zeros(grid, dtype=torch.int32, device="cuda")
    cluster_ids[(grid,)](gx, out, count, replicated(num_ctas), num_ctas=num_ctas)
    torch.cuda.synchronize()
    pid = np.repeat(np.arange(grid), 128)
    np.testing.assert_array_equal(out.cpu().numpy(), x * 2 + pid + 1000 * grid + 100000 * num_ctas)
    np.testing.assert_array_equal(count.cpu().numpy(), np.ones(grid, np.int32))


@pytest.mark.parametrize("num_ctas,mask", [(2, 0), (2, 1), (4, 0), (4, 1), (4, 2), (8, 5)])
def test_routed_remote_arrivals_complete_every_phase(num_ctas, mask):
    grid, rounds = 6, 5
    x = np.random.default_rng(mask).integers(-50, 50, grid * 128).astype(np.int32)
    gx = torch.from_numpy(x).cuda()
    out = torch.full_like(gx, -7)
    kw = dict(FROM=mask, COUNT=2, ROUNDS=rounds, SYNC=True, num_ctas=num_ctas)
    routed_arrivals[(grid,)](gx, out, replicated(num_ctas), **kw)
    torch.cuda.synchronize()
    expected = routed_reference(x, rounds)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)
    interpreted = np.zeros_like(x)
    with interpreter_on():
        routed_arrivals[(grid,)](x, interpreted, replicated(num_ctas), **kw)
    np.testing.assert_array_equal(interpreted, expected)


@pytest.mark.parametrize("num_ctas, split", [(1, False), (2, False), (4, False), (4, True), (8, True)])
def test_multicast_tma_reduction_matches_numpy(num_ctas, split):
    """With ``split`` the block's rows are split over CTA bit 0 and multicast over the other bits:
    every CTA must receive its half (or its wait hangs) and CTAs 0 and 1 store theirs."""
    x = np.random.default_rng(num_ctas).standard_normal((256, 512)).astype(np.float16)
    gx = torch.from_numpy(x).cuda()
    out = torch.full((256, 64), float("nan"), dtype=torch.float32, device="cuda")
    desc, layout = multicast_args(gx, num_ctas, split=split)
    multicast_sum[(4,)](desc, out, layout, K_TILES=8, num_ctas=num_ctas)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), multicast_reference(x), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_ctas, mask, before", [(1, 0, 1), (2, 0, 1), (2, 0, 2), (4, 1, 2)])
def test_worker_partitions_join_cluster_barriers_before_the_fork(num_ctas, mask, before):
    """Cluster barriers between the barrier init and the fork must be joined by the parked worker
    warps (barrier.cluster waits for every thread of the cluster): a miss hangs every warp."""
    x = np.random.default_rng(before).integers(-1000, 1000, 3 * 128).astype(np.int32)
    gx = torch.from_numpy(x).cuda()
    out = torch.full_like(gx, -7)
    ws_cluster_signal[(3,)](gx, out, replicated(num_ctas), FROM=mask, BEFORE=before, num_ctas=num_ctas)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), x * 3 + 1)
