"""Split tensors, buffers, TMA blocks and pair barriers on the GPU (Hopper or Blackwell): the
kernels of ``split_kernels.py`` launched as clusters of two CTAs, against numpy.  Marked
``gpu`` (skipped without a CUDA GPU and torch).  Outputs are poisoned before each launch."""

import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit.runtime.driver import has_gpu

from split_kernels import pair_barrier_rounds, round_trip_reference, split_round_trip, split_tma_load

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]


def test_split_round_trip_on_the_gpu():
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    gx = torch.from_numpy(x).cuda()
    y = torch.full_like(gx, float("nan"))
    split_round_trip[(1,)](gx, y, 256, 64, num_ctas=2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), round_trip_reference(x))


def test_split_tma_load_on_the_gpu():
    from gluonkit.nvidia.hopper import TensorDescriptor

    a = torch.randn(1024, 64, device="cuda").half()
    y = torch.full_like(a, float("nan"))
    layout = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16, cga_layout=[[1, 0]])
    split_tma_load[(4,)](TensorDescriptor.from_tensor(a, [256, 64], layout), y, num_ctas=2)
    torch.cuda.synchronize()
    assert torch.equal(y, a)


@pytest.mark.parametrize("rounds", [1, 4])
def test_pair_barrier_rounds_on_the_gpu(rounds):
    x = np.random.default_rng(rounds).integers(-100, 100, 256).astype(np.int32)
    gx = torch.from_numpy(x).cuda()
    y = torch.full_like(gx, -7)
    pair_barrier_rounds[(6,)](gx, y, 256, rounds, num_ctas=2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), x * rounds)
