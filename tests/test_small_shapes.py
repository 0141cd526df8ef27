"""Tensors smaller than their layout's tile, end to end.

Triton 3.9 (and so gluonkit) gives a thread only the registers of its block that lie
inside the tensor: ``BlockedLayout([4, 4], …)`` on a 2 x 2 tensor holds 2 x 2 elements per
thread, not 16 copies, while lanes and warps beyond the tensor hold copies.  These kernels
use layouts much larger than their tensors for every op that moves data between layouts
(loads and stores, reductions, ``expand_dims``/broadcast, slices, conversions) and compare
the interpreter with numpy on random inputs; each one also lowers through ptxas.
"""

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

P32 = "*fp32:16"
BIG = gl.BlockedLayout([4, 4], [4, 8], [2, 2], [1, 0])  # tile 32 x 128
BIG_COLS = gl.BlockedLayout([1, 8], [32, 1], [1, 4], [0, 1])  # tile 32 x 32, column-major
SMALL_SHAPES = [(1, 1), (2, 2), (1, 8), (4, 1), (2, 16), (64, 2)]


@gluonkit.jit
def small_kernel(in_ptr, out_ptr, rowsum_ptr, colmax_ptr, M: gl.constexpr, N: gl.constexpr,
                 src: gl.constexpr, dst: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, src))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, src))
    tile = gl.load(in_ptr + rows[:, None] * N + cols[None, :])
    # Reductions along each axis, then expand_dims + broadcast back to the tile.
    row_sum = gl.sum(tile, axis=1)
    col_max = gl.max(tile, axis=0)
    centred = tile - gl.expand_dims(row_sum, 1) + gl.expand_dims(col_max, 0)
    moved = gl.convert_layout(centred, dst)
    rows2 = gl.arange(0, M, layout=gl.SliceLayout(1, dst))
    cols2 = gl.arange(0, N, layout=gl.SliceLayout(0, dst))
    gl.store(out_ptr + rows2[:, None] * N + cols2[None, :], moved * 2.0)
    gl.store(rowsum_ptr + rows, row_sum)
    gl.store(colmax_ptr + cols, col_max)


@gluonkit.jit
def small_1d_kernel(in_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(in_ptr + offs)
    total = gl.sum(x, axis=0)
    gl.store(out_ptr + offs, x * 3.0 + total)


@pytest.mark.parametrize("src, dst", [(BIG, BIG_COLS), (BIG_COLS, BIG), (BIG, BIG)],
                         ids=["rows-cols", "cols-rows", "same"])
@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=[f"{m}x{n}" for m, n in SMALL_SHAPES])
def test_two_dimensional_ops_on_tensors_smaller_than_the_tile(shape, src, dst):
    m, n = shape
    x = np.random.default_rng().standard_normal((m, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    rowsum = np.full(m, np.nan, np.float32)
    colmax = np.full(n, np.nan, np.float32)
    with interpreter_on():
        small_kernel[(1,)](x, out, rowsum, colmax, M=m, N=n, src=src, dst=dst, num_warps=4)
    x64 = x.astype(np.float64)
    ref_sum, ref_max = x64.sum(axis=1), x64.max(axis=0)
    np.testing.assert_allclose(rowsum, ref_sum, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(colmax, ref_max.astype(np.float32))
    np.testing.assert_allclose(out, 2 * (x64 - ref_sum[:, None] + ref_max[None, :]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 8, 32])
@pytest.mark.parametrize("layout", [gl.BlockedLayout([8], [32], [4], [0]), gl.BlockedLayout([2], [32], [8], [0])],
                         ids=["spt8", "spt2"])
def test_one_dimensional_ops_on_tensors_smaller_than_the_tile(n, layout):
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    with interpreter_on():
        small_1d_kernel[(1,)](x, out, N=n, layout=layout, num_warps=layout.num_warps)
    np.testing.assert_allclose(out, 3 * x.astype(np.float64) + x.astype(np.float64).sum(), rtol=1e-5, atol=1e-5)


def test_a_thread_holds_only_the_registers_inside_the_tensor():
    # 4 x 4 elements per thread on a 2 x 2 tensor: 2 x 2 registers (one copy of each
    # element per thread), and every lane and warp beyond the tensor repeats them.
    ll = BIG.to_linear_layout([2, 2])
    assert ll.bases["register"] == [[0, 1], [1, 0]]
    assert all(v == [0, 0] for v in ll.bases["lane"] + ll.bases["warp"])


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("shape", [(2, 2), (1, 8), (64, 2)], ids=["2x2", "1x8", "64x2"])
def test_small_shape_kernels_lower_and_ptxas_accepts_them(shape, target):
    m, n = shape
    compiled = small_kernel.compile(P32, P32, P32, P32, target=target, num_warps=4, M=m, N=n, src=BIG, dst=BIG_COLS)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    one_d = small_1d_kernel.compile(P32, P32, target=target, num_warps=4, N=2,
                                    layout=gl.BlockedLayout([8], [32], [4], [0]))
    assert one_d.asm["cubin"][:4] == b"\x7fELF"
