"""Kernels for the cluster-launch-control tests (``test_clc.py``; the GPU run uses them too)."""

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import clc, mbarrier


@gluonkit.jit
def clc_tiles(x_ptr, out_ptr, owner_ptr, BLOCK: gl.constexpr, layout: gl.constexpr):
    """A persistent tile loop over a grid launched with one program per tile: each program
    processes its own tile, then keeps stealing (try_cancel) tiles of programs that have not
    started.  out = 3 * x + tile; owner[tile] += 1 + this program's id (who did it)."""
    result = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    me = gl.program_id(0)
    tile = me
    phase = 0
    running = True
    while running:
        offs = tile * BLOCK + gl.arange(0, BLOCK, layout)
        gl.store(out_ptr + offs, gl.load(x_ptr + offs) * 3 + tile)
        gl.atomic_add(owner_ptr + tile, 1 + me)
        mbarrier.expect(bar, 16)
        clc.try_cancel(result, bar)
        mbarrier.wait(bar, phase)  # WAIT
        phase ^= 1
        response = clc.load_result(result)
        running = response.is_canceled()
        tile = response.program_id(0)
    mbarrier.invalidate(bar)


@gluonkit.jit
def clc_load_too_early(out_ptr, layout: gl.constexpr):
    """Reads the response before waiting on its barrier (misuse the interpreter reports)."""
    result = gl.allocate_shared_memory(gl.int64, [2], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, 16)
    clc.try_cancel(result, bar)
    response = clc.load_result(result)  # EARLY
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + gl.arange(0, 32, layout), gl.full([32], 1, gl.int32, layout) * response.program_id(0))
