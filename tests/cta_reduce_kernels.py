"""Reductions along an axis that a ``cga_layout`` splits between the CTAs of a cluster, and
layout conversions between different ``cga_layout``: kernels and float64 references, run by the
interpreter and compiled (``tests/test_cta_reduce.py``) and on the GPU
(``tests/test_gpu_cta_reduce.py``)."""

from __future__ import annotations

import numpy as np

import gluonkit
import gluonkit.language as gl


def split_1d(num_ctas: int, num_warps: int = 4, size_per_thread: int = 4) -> gl.BlockedLayout:
    """A 1-D layout whose CTA bits take consecutive chunks of the vector (tutorial 14's)."""
    bases = [[1 << i] for i in range(num_ctas.bit_length() - 1)]
    return gl.BlockedLayout([size_per_thread], [32], [num_warps], [0], cga_layout=bases)


def split_2d(cga_layout, num_warps: int = 4) -> gl.BlockedLayout:
    """A 2-D layout with the warps along the columns (so a row sum also crosses warps)."""
    return gl.BlockedLayout([1, 4], [4, 8], [1, num_warps], [1, 0], cga_layout=cga_layout)


@gluonkit.jit
def vector_sum_max(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    """``out[2 p]``, ``out[2 p + 1]``: the sum and the max of row ``p`` of ``x`` (``N`` wide)."""
    pid = gl.program_id(0)
    x = gl.load(x_ptr + pid * N + gl.arange(0, N, layout))
    gl.store(out_ptr + 2 * pid, gl.sum(x, axis=0))
    gl.store(out_ptr + 2 * pid + 1, gl.max(x, axis=0))


def vector_sum_max_reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return np.stack([x64.sum(1), x64.max(1)], axis=1).ravel()


@gluonkit.jit
def row_sums_in_a_loop(x_ptr, out_ptr, ROWS: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    """``out[r]``: the sum of row ``r``, one row per iteration (an exchange between CTAs in a loop,
    and one under a branch taken on odd rows)."""
    offs = gl.arange(0, N, layout)
    for r in range(ROWS):
        x = gl.load(x_ptr + r * N + offs)
        total = gl.sum(x, axis=0)
        if r % 2 == 1:
            total = total + gl.max(x, axis=0)
        gl.store(out_ptr + r, total)


def row_sums_in_a_loop_reference(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64.sum(1) + np.where(np.arange(len(x)) % 2 == 1, x64.max(1), 0)


@gluonkit.jit
def tile_sum_max(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr, AXIS: gl.constexpr):
    """The sums then the maxima of an ``M x N`` tile along ``AXIS``, stored one after the other."""
    rows = gl.arange(0, M, gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, gl.SliceLayout(0, layout))
    x = gl.load(x_ptr + rows[:, None] * N + cols[None, :])
    if AXIS == 1:
        gl.store(out_ptr + rows, gl.sum(x, axis=1))
        gl.store(out_ptr + M + rows, gl.max(x, axis=1))
    else:
        gl.store(out_ptr + cols, gl.sum(x, axis=0))
        gl.store(out_ptr + N + cols, gl.max(x, axis=0))


def tile_sum_max_reference(x: np.ndarray, axis: int) -> np.ndarray:
    x64 = x.astype(np.float64)
    return np.concatenate([x64.sum(axis), x64.max(axis)])


@gluonkit.jit
def _max_then_first(v1, i1, v2, i2):
    take = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return gl.where(take, v1, v2), gl.where(take, i1, i2)


@gluonkit.jit
def vector_argmax(x_ptr, value_ptr, index_ptr, N: gl.constexpr, layout: gl.constexpr):
    """The max of row ``p`` and the first index where it is (a two-operand reduce)."""
    pid = gl.program_id(0)
    offs = gl.arange(0, N, layout)
    value, index = gl.reduce((gl.load(x_ptr + pid * N + offs), offs), 0, _max_then_first)
    gl.store(value_ptr + pid, value)
    gl.store(index_ptr + pid, index)


@gluonkit.jit
def row_softmax(x_ptr, y_ptr, N: gl.constexpr, layout: gl.constexpr):
    """Program ``p`` writes the softmax of row ``p`` (``N`` wide, split over the cluster)."""
    offs = gl.program_id(0) * N + gl.arange(0, N, layout)
    x = gl.load(x_ptr + offs)
    e = gl.exp(x - gl.max(x, axis=0))
    gl.store(y_ptr + offs, e / gl.sum(e, axis=0))


def row_softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@gluonkit.jit
def convert_tile(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, SRC: gl.constexpr, DST: gl.constexpr):
    """``y = 2 x + 1`` of an ``M x N`` tile, loaded in layout ``SRC`` and stored in ``DST``."""
    rows = gl.arange(0, M, gl.SliceLayout(1, SRC))
    cols = gl.arange(0, N, gl.SliceLayout(0, SRC))
    y = gl.convert_layout(gl.load(x_ptr + rows[:, None] * N + cols[None, :]) * 2 + 1, DST)
    rows_d = gl.arange(0, M, gl.SliceLayout(1, DST))
    cols_d = gl.arange(0, N, gl.SliceLayout(0, DST))
    gl.store(y_ptr + rows_d[:, None] * N + cols_d[None, :], y)


# (num_ctas, source layout, destination layout) of convert_tile, on a 64 x 128 tile
CONVERSIONS = [
    (2, gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[1, 0]]),
     gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[0, 0]])),        # rows split -> every CTA all (gather)
    (2, gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[1, 0]]),
     gl.BlockedLayout([4, 1], [8, 4], [1, 4], [0, 1], [[0, 1]])),        # rows split -> columns split
    (4, gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[1, 0], [2, 0]]),
     gl.BlockedLayout([2, 2], [8, 4], [2, 2], [1, 0], [[0, 1], [1, 0]])),  # 4 row chunks -> 2 x 2 blocks
    (2, gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[0, 0]]),
     gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[0, 1]])),        # replicated -> columns split
    (4, gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[1, 0], [0, 0]]),
     gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0], [[0, 0], [0, 1]])),  # replicated over bit 1 -> over bit 0
]
