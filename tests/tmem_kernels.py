"""Tensor-memory kernels shared by the interpreter, ptxas, GPU and Triton cross-check tests.

The kernel source uses only Gluon 3.9 names, so ``tests/test_triton39_crosscheck.py`` can
build the same function with Triton by swapping the ``gl``/``blackwell`` modules it calls.
"""

from __future__ import annotations

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import TensorMemoryLayout, allocate_tensor_memory


def round_trip_source(gl, allocate_tensor_memory):
    """``y = x`` through TMEM: store in one instruction variant's layout, load it back (a factory, so the
    same body compiles with gluonkit and with Triton's Gluon)."""

    def round_trip(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, tmem_layout: gl.constexpr,
                   variant: gl.constexpr):
        tmem = allocate_tensor_memory(x_ptr.dtype.element_ty, [M, N], tmem_layout)
        reg: gl.constexpr = tmem.get_reg_layout(instr_variant=variant)
        rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
        offs = rows[:, None] * N + cols[None, :]
        tmem.store(gl.load(x_ptr + offs))
        gl.store(y_ptr + offs, tmem.load(reg))

    return round_trip


round_trip = gluonkit.jit(round_trip_source(gl, allocate_tensor_memory))


@gluonkit.jit
def staged_slices(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, tmem_layout: gl.constexpr):
    """Stores x in stage 1 of a two-stage buffer, then reads it back as two N/2 slices."""
    tmem = allocate_tensor_memory(gl.float32, [2, M, N], tmem_layout)
    stage = tmem.index(1)
    reg: gl.constexpr = stage.get_reg_layout()
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
    stage.store(gl.load(x_ptr + rows[:, None] * N + cols[None, :]))
    for h in gl.static_range(2):
        half = stage.slice(h * (N // 2), N // 2)
        hreg: gl.constexpr = half.get_reg_layout()
        r2 = gl.arange(0, M, layout=gl.SliceLayout(1, hreg))
        c2 = gl.arange(0, N // 2, layout=gl.SliceLayout(0, hreg))
        gl.store(y_ptr + r2[:, None] * N + h * (N // 2) + c2[None, :], half.load(hreg))


@gluonkit.jit
def row_max(x_ptr, y_ptr, m_ptr, M: gl.constexpr, N: gl.constexpr, ABS: gl.constexpr):
    """``load_max``: the tile and each row's maximum (of |x| when ABS)."""
    tmem_layout: gl.constexpr = TensorMemoryLayout([M, N], 1)
    tmem = allocate_tensor_memory(gl.float32, [M, N], tmem_layout)
    reg: gl.constexpr = tmem.get_reg_layout()
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
    tmem.store(gl.load(x_ptr + rows[:, None] * N + cols[None, :]))
    x, m = tmem.load_max(reg, abs=ABS)
    gl.store(y_ptr + rows[:, None] * N + cols[None, :], x)
    gl.store(m_ptr + gl.arange(0, M, layout=gl.SliceLayout(1, reg)), m)
