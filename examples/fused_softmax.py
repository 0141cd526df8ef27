"""Fused softmax: each program takes ``ROWS`` whole rows into registers.

The rows are loaded once, reduced twice (max, then sum of exponentials) with the
reductions running within each thread, across lanes by shuffles and across warps through
shared memory, and written once — one read and one write of the matrix, the least any
softmax can move.  The 2-D ``BlockedLayout`` gives every thread 16-byte vectors along a
row; short rows put several rows in one warp (and one program), so each program still has
enough bytes in flight.

Run: ``python examples/fused_softmax.py`` (on the GPU when there is one, else in the CPU
interpreter, at a smaller size).
"""

import numpy as np

import gluonkit
import gluonkit.language as gl


@gluonkit.jit
def softmax_kernel(out_ptr, in_ptr, n_rows, n_cols, in_row_stride, out_row_stride,
                   ROWS: gl.constexpr, BLOCK: gl.constexpr, layout: gl.constexpr):
    rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BLOCK, layout=gl.SliceLayout(0, layout))
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = gl.load(in_ptr + rows[:, None] * in_row_stride + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(gl.float32)
    shifted = x - gl.max(x, axis=1)[:, None]
    numerator = gl.exp(shifted)
    y = numerator / gl.sum(numerator, axis=1)[:, None]
    gl.store(out_ptr + rows[:, None] * out_row_stride + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_config(block: int, element_bytes: int):
    """(ROWS, layout, num_warps) for rows of ``block`` (a power of two) columns.

    16-byte vectors along the row; lanes along the row until it is covered, the rest of the
    warp on further rows; a warp takes up to 4 vectors per thread of one row before the row
    is split across warps (which costs a reduction through shared memory), and the warps
    left over take further rows.
    """
    vec = max(1, min(16 // element_bytes, block))
    lanes_along = min(32, block // vec)
    num_warps = 4 if block <= 4096 else 8 if block <= 8192 else 16
    warps_along = min(num_warps, max(1, block // (4 * vec * lanes_along)))
    layout = gl.BlockedLayout([1, vec], [32 // lanes_along, lanes_along],
                              [num_warps // warps_along, warps_along], [1, 0])
    # Short rows give a thread one 16-byte vector per row: take two rows per thread so each
    # has two loads in flight (bf16 rows of 256: 0.90x -> 1.0x copy bandwidth on the H100).
    vectors_per_row = max(1, block // (vec * lanes_along * warps_along))
    rows_per_thread = max(1, 2 // vectors_per_row)
    rows = (32 // lanes_along) * (num_warps // warps_along) * rows_per_thread
    return rows, layout, num_warps


def _row_stride(a) -> int:
    """Elements between rows of a numpy array or a torch tensor."""
    return a.stride(0) if hasattr(a, "element_size") else a.strides[0] // a.itemsize


def softmax(x, out):
    """Row-wise softmax of a 2-D array/tensor ``x`` into ``out`` (same shape and dtype)."""
    n_rows, n_cols = x.shape
    block = 1 << max(0, (n_cols - 1).bit_length())
    element_bytes = x.element_size() if hasattr(x, "element_size") else x.itemsize
    rows, layout, num_warps = softmax_config(block, element_bytes)
    softmax_kernel[(gluonkit.cdiv(n_rows, rows),)](out, x, n_rows, n_cols, _row_stride(x), _row_stride(out),
                                                   ROWS=rows, BLOCK=block, layout=layout, num_warps=num_warps)
    return out


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    from _device import arrays_for_device, full_size, gpu_available, to_numpy

    rows, cols = (4096, 1000) if full_size() else (16, 1000)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((rows, cols), dtype=np.float32)
    x, out = arrays_for_device(x_np, np.full((rows, cols), np.nan, dtype=np.float32))
    softmax(x, out)
    where = "GPU" if gpu_available() else "CPU interpreter"
    error = np.abs(to_numpy(out) - reference(x_np)).max()
    print(f"fused_softmax on the {where}: {rows}x{cols} float32, max |out - numpy float64| = {error:.3g}")
    assert error < 1e-6, error


if __name__ == "__main__":
    main()
