"""Kernels of Blackwell's packed arithmetic (``add2`` …), shared by the interpreter, ptxas, GPU and Triton
cross-check tests; written once as a factory over the ``gl``/``blackwell`` modules (Gluon 3.9 names only)."""

from __future__ import annotations

import gluonkit
import gluonkit.language as gluonkit_gl
from gluonkit.language.nvidia import blackwell as gluonkit_blackwell

#: The OP values of :func:`packed_source`: the six functions, and add2/fma2 with a Python number.
OPS = ("add", "sub", "mul", "fma", "min", "max", "add_number", "fma_number")


def packed_source(gl, blackwell):
    """``out = OP(x, y[, z])`` over N elements, SPT consecutive elements per thread (4 warps)."""

    def packed(x_ptr, y_ptr, z_ptr, out_ptr, OP: gl.constexpr, N: gl.constexpr, SPT: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([SPT], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        a = gl.load(x_ptr + offs)
        b = gl.load(y_ptr + offs)
        c = gl.load(z_ptr + offs)
        if OP == "add":
            r = blackwell.add2(a, b)
        elif OP == "sub":
            r = blackwell.sub2(a, b)
        elif OP == "mul":
            r = blackwell.mul2(a, b)
        elif OP == "fma":
            r = blackwell.fma2(a, b, c)
        elif OP == "min":
            r = blackwell.min2(a, b)
        elif OP == "max":
            r = blackwell.max2(a, b)
        elif OP == "add_number":
            r = blackwell.add2(a, 1.5)
        else:
            r = blackwell.fma2(a, 0.75, c)
        gl.store(out_ptr + offs, r)

    return packed


packed = gluonkit.jit(packed_source(gluonkit_gl, gluonkit_blackwell))
