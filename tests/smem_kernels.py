"""Pieces shared by the shared-memory planning tests (barriers, lifetimes): 32 × 32 float32
tiles in a row-major and a column-major blocked layout and an unswizzled shared layout."""

import gluonkit
import gluonkit.language as gl

L = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
L_T = gl.BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1])
SMEM = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])


@gluonkit.jit
def tile_pointers(ptr, layout: gl.constexpr):
    """Pointers to a row-major 32 × 32 tile at ``ptr``, in ``layout``."""
    rows = gl.arange(0, 32, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, layout))
    return ptr + rows[:, None] * 32 + cols[None, :]
