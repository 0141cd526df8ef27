"""Kernels whose tensors and buffers are split between the two CTAs of a cluster (``cga_layout``
bases ``[[1, 0]]``), and a ``two_ctas`` pair barrier protocol: run by the interpreter
(``tests/test_split_layouts.py``) and on the GPU (``tests/test_gpu_split.py``; Hopper can run
all of them: nothing here is a tcgen05 instruction)."""

from __future__ import annotations

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import cluster, mbarrier, tma


@gluonkit.jit
def split_round_trip(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr):
    """``y = 2 x + row``: each CTA loads its half of the rows, keeps it in its half of a split
    shared buffer, reads it back in another split layout, converts it back and stores its rows."""
    load_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], [[1, 0]])
    read_layout: gl.constexpr = gl.BlockedLayout([2, 2], [8, 4], [1, 4], [0, 1], [[1, 0]])
    smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, N], gl.float32, cga_layout=[[1, 0]])
    rows = gl.arange(0, M, gl.SliceLayout(1, load_layout))
    cols = gl.arange(0, N, gl.SliceLayout(0, load_layout))
    x = gl.load(x_ptr + rows[:, None] * N + cols[None, :])
    smem = gl.allocate_shared_memory(gl.float32, [M, N], smem_layout, x * 2)
    y = smem.load(read_layout)
    rows2 = gl.arange(0, M, gl.SliceLayout(1, read_layout))
    y = gl.convert_layout(y + rows2[:, None].to(gl.float32), load_layout)  # between two split layouts
    gl.store(y_ptr + rows[:, None] * N + cols[None, :], y)


@gluonkit.jit
def split_tma_load(a_desc, y_ptr):
    """Each CTA loads its half of A's block (TMA, its own barrier) and stores it back."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    smem = gl.allocate_shared_memory(a_desc.dtype, [BM, BK], a_desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, a_desc.nbytes_per_cta)
    tma.async_load(a_desc, [gl.program_id(0) * BM, 0], bar, smem)
    mbarrier.wait(bar, 0)
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], [[1, 0]])
    rows = gl.program_id(0) * BM + gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BK, gl.SliceLayout(0, layout))
    gl.store(y_ptr + rows[:, None] * BK + cols[None, :], smem.load(layout))


@gluonkit.jit
def pair_barrier_rounds(x_ptr, y_ptr, N: gl.constexpr, ROUNDS: gl.constexpr):
    """``y = x * ROUNDS`` by rounds on a pair barrier: each round both CTAs arrive on the pair's
    barrier (in the even CTA, count 1 per CTA), the even CTA waits for both, then a cluster
    barrier keeps the odd CTA from running a round ahead; each CTA stores its half."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0], [[1]])
    offs = gl.arange(0, N, layout)
    x = gl.load(x_ptr + offs)
    bar = mbarrier.allocate_mbarrier(two_ctas=True)
    mbarrier.init(bar, count=1)
    cluster.barrier()
    acc = gl.zeros([N], gl.int32, layout)
    for r in range(ROUNDS):
        mbarrier.arrive(bar)
        mbarrier.wait(bar, r & 1)
        acc += x
        cluster.barrier()
    gl.store(y_ptr + offs, acc)


def round_trip_reference(x: np.ndarray) -> np.ndarray:
    return x * 2 + np.arange(x.shape[0], dtype=np.float32)[:, None]
