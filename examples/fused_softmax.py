"""Fused softmax: one program per row, the whole row in registers.

The row is loaded once, reduced twice (max, then sum of exponentials) with the
reductions running within each thread, across lanes by shuffles and across warps through
shared memory, and written once — one read and one write of the matrix, the least any
softmax can move.  The layout is a 1-D ``BlockedLayout`` whose ``size_per_thread`` makes
every access 16 bytes wide.

Run: ``python examples/fused_softmax.py`` (on the GPU when there is one, else in the CPU
interpreter, at a smaller size).
"""

import numpy as np

import gluonkit
import gluonkit.lang as gl


@gluonkit.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, in_row_stride, out_row_stride,
                   BLOCK: gl.constexpr, layout: gl.constexpr):
    row = gl.program_id(0)
    cols = gl.arange(0, BLOCK, layout=layout)
    mask = cols < n_cols
    x = gl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(gl.float32)
    shifted = x - gl.max(x, axis=0)
    numerator = gl.exp(shifted)
    denominator = gl.sum(numerator, axis=0)
    y = numerator / denominator
    gl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_layout(block: int, num_warps: int, element_bytes: int) -> gl.BlockedLayout:
    """16-byte vectors per thread (fewer if the row is short), lanes then warps along the row."""
    vec = max(1, min(16 // element_bytes, block // (32 * num_warps)))
    return gl.BlockedLayout([vec], [32], [num_warps], [0])


def _row_stride(a) -> int:
    """Elements between rows of a numpy array or a torch tensor."""
    return a.stride(0) if hasattr(a, "element_size") else a.strides[0] // a.itemsize


def softmax(x, out, num_warps: int | None = None):
    """Row-wise softmax of a 2-D array/tensor ``x`` into ``out`` (same shape and dtype)."""
    rows, cols = x.shape
    block = 1 << max(0, (cols - 1).bit_length())
    if num_warps is None:
        num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    element_bytes = x.element_size() if hasattr(x, "element_size") else x.itemsize
    layout = softmax_layout(block, num_warps, element_bytes)
    softmax_kernel[(rows,)](out, x, cols, _row_stride(x), _row_stride(out),
                            BLOCK=block, layout=layout, num_warps=num_warps)
    return out


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    from _device import arrays_for_device, gpu_available, to_numpy

    rows, cols = (4096, 1000) if gpu_available() else (16, 1000)
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
