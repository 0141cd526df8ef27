"""Tensor-memory kernels shared by the interpreter, ptxas, GPU and Triton cross-check tests.

Each kernel is written once as a factory over the ``gl`` and ``blackwell`` modules it uses
(Gluon 3.9 names only), so ``tests/test_triton39_crosscheck.py`` can build the very same
source with Triton's Gluon; the ``@gluonkit.jit`` versions are below.
"""

from __future__ import annotations

import gluonkit
import gluonkit.language as gluonkit_gl
from gluonkit.language.nvidia import blackwell as gluonkit_blackwell


def round_trip_source(gl, blackwell):
    """``y = x`` through TMEM: store in one instruction variant's register layout, load it back."""

    def round_trip(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, tmem_layout: gl.constexpr,
                   variant: gl.constexpr):
        tmem = blackwell.allocate_tensor_memory(x_ptr.dtype.element_ty, [M, N], tmem_layout)
        reg: gl.constexpr = tmem.get_reg_layout(instr_variant=variant)
        rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
        offs = rows[:, None] * N + cols[None, :]
        tmem.store(gl.load(x_ptr + offs))
        gl.store(y_ptr + offs, tmem.load(reg))

    return round_trip


def staged_slices_source(gl, blackwell):
    """Stores x in stage 1 of a two-stage buffer, then reads it back as two N/2 slices."""

    def staged_slices(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, tmem_layout: gl.constexpr):
        tmem = blackwell.allocate_tensor_memory(gl.float32, [2, M, N], tmem_layout)
        stage = tmem.index(1)
        reg: gl.constexpr = stage.get_reg_layout()
        rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
        stage.store(gl.load(x_ptr + rows[:, None] * N + cols[None, :]))
        hreg: gl.constexpr = stage.slice(0, N // 2).get_reg_layout()
        for h in gl.static_range(2):
            half = stage.slice(h * (N // 2), N // 2)
            r2 = gl.arange(0, M, layout=gl.SliceLayout(1, hreg))
            c2 = gl.arange(0, N // 2, layout=gl.SliceLayout(0, hreg))
            gl.store(y_ptr + r2[:, None] * N + h * (N // 2) + c2[None, :], half.load(hreg))

    return staged_slices


def row_max_source(gl, blackwell):
    """``load_max`` (``load_min`` when MIN): the tile and each row's maximum (minimum) of x (|x| when ABS)."""

    def row_max(x_ptr, y_ptr, m_ptr, M: gl.constexpr, N: gl.constexpr, ABS: gl.constexpr, MIN: gl.constexpr = False):
        tmem_layout: gl.constexpr = blackwell.TensorMemoryLayout([M, N], 1)
        tmem = blackwell.allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
        reg: gl.constexpr = tmem.get_reg_layout()
        rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
        tmem.store(gl.load(x_ptr + rows[:, None] * N + cols[None, :]))
        if MIN:
            x, m = tmem.load_min(reg, abs=ABS)
        else:
            x, m = tmem.load_max(reg, abs=ABS)
        gl.store(y_ptr + rows[:, None] * N + cols[None, :], x)
        gl.store(m_ptr + gl.arange(0, M, layout=gl.SliceLayout(1, reg)), gl.convert_layout(m, gl.SliceLayout(1, reg)))

    return row_max


round_trip = gluonkit.jit(round_trip_source(gluonkit_gl, gluonkit_blackwell))
staged_slices = gluonkit.jit(staged_slices_source(gluonkit_gl, gluonkit_blackwell))
row_max = gluonkit.jit(row_max_source(gluonkit_gl, gluonkit_blackwell))


def _worker_copy(tmem, y_ptr, M: gluonkit_gl.constexpr, N: gluonkit_gl.constexpr):
    reg: gluonkit_gl.constexpr = tmem.get_reg_layout()
    rows = gluonkit_gl.arange(0, M, layout=gluonkit_gl.SliceLayout(1, reg))
    cols = gluonkit_gl.arange(0, N, layout=gluonkit_gl.SliceLayout(0, reg))
    gluonkit_gl.store(y_ptr + rows[:, None] * N + cols[None, :], tmem.load(reg))


def _idle():
    pass


worker_copy = gluonkit.jit(_worker_copy)
idle = gluonkit.jit(_idle)


@gluonkit.jit
def partition_load(x_ptr, y_ptr, M: gluonkit_gl.constexpr, N: gluonkit_gl.constexpr, FIRST: gluonkit_gl.constexpr):
    """The kernel's warps store x into TMEM; a 4-warp worker partition loads it (after ``FIRST`` one-warp workers)."""
    tmem = gluonkit_blackwell.allocate_tensor_memory(gluonkit_gl.float32, [M, N],
                                                     gluonkit_blackwell.TensorMemoryLayout([M, N], 1))
    reg: gluonkit_gl.constexpr = tmem.get_reg_layout()
    rows = gluonkit_gl.arange(0, M, layout=gluonkit_gl.SliceLayout(1, reg))
    cols = gluonkit_gl.arange(0, N, layout=gluonkit_gl.SliceLayout(0, reg))
    tmem.store(gluonkit_gl.load(x_ptr + rows[:, None] * N + cols[None, :]))
    if FIRST:
        gluonkit_gl.warp_specialize([(idle, ()), (idle, ()), (worker_copy, (tmem, y_ptr, M, N))], [1, 4])
    else:
        gluonkit_gl.warp_specialize([(idle, ()), (worker_copy, (tmem, y_ptr, M, N))], [4])


@gluonkit.jit
def _allocating_copy(x_ptr, y_ptr, M: gluonkit_gl.constexpr, N: gluonkit_gl.constexpr, SCALE: gluonkit_gl.constexpr):
    """Allocate TMEM here (inside a partition), store ``SCALE * x`` into it and copy it out to ``y``."""
    tmem = gluonkit_blackwell.allocate_tensor_memory(gluonkit_gl.float32, [M, N],
                                                     gluonkit_blackwell.TensorMemoryLayout([M, N], 1))
    reg: gluonkit_gl.constexpr = tmem.get_reg_layout()
    rows = gluonkit_gl.arange(0, M, layout=gluonkit_gl.SliceLayout(1, reg))
    cols = gluonkit_gl.arange(0, N, layout=gluonkit_gl.SliceLayout(0, reg))
    tmem.store(gluonkit_gl.load(x_ptr + rows[:, None] * N + cols[None, :]) * SCALE)
    gluonkit_gl.store(y_ptr + rows[:, None] * N + cols[None, :], tmem.load(reg))


@gluonkit.jit
def alloc_in_partition(x_ptr, y_ptr, z_ptr, M: gluonkit_gl.constexpr, N: gluonkit_gl.constexpr):
    """Both partitions allocate tensor memory of their own (as Gluon allows): y = 2x, z = 3x."""
    gluonkit_gl.warp_specialize([(_allocating_copy, (x_ptr, y_ptr, M, N, 2.0)),
                                 (_allocating_copy, (x_ptr, z_ptr, M, N, 3.0))], [4])
