"""Matrix transpose by a layout conversion: load coalesced along rows, store coalesced
along columns.

A tile is loaded in a layout whose threads run along the input's rows, converted with
``gl.convert_layout`` to a layout whose threads run along the output's rows, and stored.
The conversion is where the data crosses threads: gluonkit plans it through shared memory
with a layout chosen to avoid bank conflicts.

Run: ``python examples/transpose.py``.
"""

import numpy as np

import gluonkit
import gluonkit.language as gl


@gluonkit.jit
def transpose_kernel(out_ptr, in_ptr, M, N, BM: gl.constexpr, BN: gl.constexpr,
                     load_layout: gl.constexpr, store_layout: gl.constexpr):
    rows = gl.program_id(0) * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, load_layout))
    cols = gl.program_id(1) * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, load_layout))
    tile = gl.load(in_ptr + rows[:, None] * N + cols[None, :])
    tile = gl.convert_layout(tile, store_layout)
    rows = gl.program_id(0) * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, store_layout))
    cols = gl.program_id(1) * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, store_layout))
    gl.store(out_ptr + cols[None, :] * M + rows[:, None], tile)


def layouts(num_warps: int, lanes_along_rows: int = 16):
    """(load, store): 16-byte vectors with ``lanes_along_rows`` lanes along the input's rows
    (a warp then reads ``4 * 4 * lanes_along_rows`` contiguous bytes per row), then the same
    along the input's columns for the store."""
    across = 32 // lanes_along_rows
    load = gl.BlockedLayout([1, 4], [across, lanes_along_rows], [num_warps, 1], [1, 0])
    store = gl.BlockedLayout([4, 1], [lanes_along_rows, across], [1, num_warps], [0, 1])
    return load, store


def transpose(x, out, BM: int = 64, BN: int = 64, num_warps: int = 4, lanes_along_rows: int = 16):
    """``out = x.T`` for a 2-D float32 array/tensor whose sides are multiples of the tile."""
    M, N = x.shape
    load, store = layouts(num_warps, lanes_along_rows)
    transpose_kernel[(M // BM, N // BN)](out, x, M, N, BM=BM, BN=BN, load_layout=load, store_layout=store,
                                         num_warps=num_warps)
    return out


def main() -> None:
    from _device import arrays_for_device, to_numpy

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((128, 192), dtype=np.float32)
    x, out = arrays_for_device(x_np, np.full((192, 128), np.nan, dtype=np.float32))
    transpose(x, out)
    assert np.array_equal(to_numpy(out), x_np.T)
    print("transpose: 128x192 float32 matches numpy exactly")


if __name__ == "__main__":
    main()
