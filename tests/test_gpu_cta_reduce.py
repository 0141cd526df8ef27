"""Reductions across the CTAs of a cluster on the GPU (Hopper or Blackwell): the kernels of
``cta_reduce_kernels.py`` against float64 numpy and against the interpreter (same combine
order: sums, maxima and argmax agree bit for bit), a row softmax vs torch, and layout
conversions between different ``cga_layout`` (exact).  Marked ``gpu``
(skipped without a CUDA GPU and torch).  Outputs are poisoned before each launch."""

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

from cta_reduce_kernels import (CONVERSIONS, convert_tile, row_softmax, row_sums_in_a_loop, split_1d, split_2d,
                                tile_sum_max, tile_sum_max_reference, vector_argmax, vector_sum_max,
                                vector_sum_max_reference)
from interpreting import interpreter_on

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]


@pytest.mark.parametrize("num_ctas", [2, 4, 8])
@pytest.mark.parametrize("per_cta", [1024, 64])  # 64: smaller than the layout's tile (copies in lanes and warps)
def test_vector_sum_and_max_match_the_interpreter_bit_for_bit(num_ctas, per_cta):
    n = per_cta * num_ctas
    x = np.random.default_rng(num_ctas).standard_normal((3, n)).astype(np.float32)
    out = torch.full((6,), float("nan"), device="cuda")
    vector_sum_max[(3,)](torch.from_numpy(x).cuda(), out, n, split_1d(num_ctas), num_ctas=num_ctas)
    torch.cuda.synchronize()
    expected = np.full(6, np.nan, np.float32)
    with interpreter_on():
        vector_sum_max[(3,)](x, expected, n, split_1d(num_ctas), num_ctas=num_ctas)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)
    np.testing.assert_allclose(expected, vector_sum_max_reference(x), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_ctas, cga, axis", [(2, [[0, 1]], 1), (4, [[1, 0], [0, 1]], 1), (4, [[0, 1], [1, 0]], 0)])
def test_tile_reductions_along_a_split_axis(num_ctas, cga, axis):
    m, n = 32, 256
    x = np.random.default_rng(7).standard_normal((m, n)).astype(np.float32)
    out = torch.full(((m, n)[1 - axis] * 2,), float("nan"), device="cuda")
    tile_sum_max[(1,)](torch.from_numpy(x).cuda(), out, m, n, split_2d(cga), axis, num_ctas=num_ctas)
    torch.cuda.synchronize()
    expected = np.full(out.shape, np.nan, np.float32)
    with interpreter_on():
        tile_sum_max[(1,)](x, expected, m, n, split_2d(cga), axis, num_ctas=num_ctas)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)
    np.testing.assert_allclose(expected, tile_sum_max_reference(x, axis), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_ctas", [2, 8])
def test_argmax_over_the_cluster(num_ctas):
    n = 4096
    x = torch.randint(-50, 50, (64, n), device="cuda").float()
    values = torch.full((64,), float("nan"), device="cuda")
    index = torch.full((64,), -1, device="cuda", dtype=torch.int32)
    vector_argmax[(64,)](x, values, index, n, split_1d(num_ctas), num_ctas=num_ctas)
    torch.cuda.synchronize()
    assert torch.equal(values, x.max(1).values)
    first = (x == x.max(1, keepdim=True).values).int().argmax(1)  # the first index of the max
    assert torch.equal(index.long(), first)


@pytest.mark.parametrize("num_ctas, n", [(2, 2048), (4, 8192), (8, 65536), (16, 2**18)])  # 16: non-portable
def test_row_softmax_matches_torch(num_ctas, n):
    x = 3 * torch.randn((64, n), device="cuda")
    y = torch.full_like(x, float("nan"))
    row_softmax[(64,)](x, y, n, split_1d(num_ctas), num_ctas=num_ctas)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, dim=1), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", range(len(CONVERSIONS)))
def test_conversions_between_cga_layouts(case):
    num_ctas, src, dst = CONVERSIONS[case]
    x = torch.randn((64, 128), device="cuda")
    y = torch.full_like(x, float("nan"))
    convert_tile[(1,)](x, y, 64, 128, src, dst, num_ctas=num_ctas)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2 + 1)


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_exchanges_in_a_loop_and_under_a_branch_match_the_interpreter(num_ctas):
    x = np.random.default_rng(5).standard_normal((5, 2048)).astype(np.float32)
    out = torch.full((5,), float("nan"), device="cuda")
    row_sums_in_a_loop[(1,)](torch.from_numpy(x).cuda(), out, 5, 2048, split_1d(num_ctas), num_ctas=num_ctas)
    torch.cuda.synchronize()
    expected = np.full(5, np.nan, np.float32)
    with interpreter_on():
        row_sums_in_a_loop[(1,)](x, expected, 5, 2048, split_1d(num_ctas), num_ctas=num_ctas)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)
