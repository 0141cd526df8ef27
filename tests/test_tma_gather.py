"""Blackwell's TMA gather and scatter (``blackwell.tma.async_gather`` / ``async_scatter``).

The interpreter against numpy on random data (rows in and out of bounds, negative rows,
column windows hanging over either edge, several dtypes and offset layouts, pipelined
stages), the reports for what the hardware faults on, frontend errors at the user's line,
and the sm_100a PTX (``tile::gather4`` / ``scatter4``: one instruction per four rows and
column box, counted per warp) assembled by ptxas.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.blackwell import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor
from interpreting import launch_interpreted
from kernel_checks import marked_line, needs_ptxas

OUT = gl.BlockedLayout([1, 1], [1, 32], [1, 4], [1, 0])
SLICED = gl.SliceLayout(0, gl.BlockedLayout([1, 4], [32, 1], [1, 4], [1, 0]))  # 4 offsets per warp-row group
ONE_WARP = gl.BlockedLayout([16], [32], [4], [0])  # every warp holds all offsets: warp 0 issues


@gluonkit.jit
def gather_kernel(out_ptr, desc, x_ptr, y_offset, BX: gl.constexpr, offsets_layout: gl.constexpr):
    """out[i, :] = desc[x[i], y_offset:y_offset + BY] (zeros outside)."""
    BY: gl.constexpr = desc.block_type.shape[1]
    x = gl.load(x_ptr + gl.arange(0, BX, gl.BlockedLayout([1], [32], [4], [0])))
    x = gl.convert_layout(x, offsets_layout)
    smem = gl.allocate_shared_memory(desc.dtype, [BX, BY], desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, BX * desc.block_type.nbytes)
    tma.async_gather(desc, x, y_offset, bar, smem)  # GATHER
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    v = smem.load(OUT)
    rows = gl.arange(0, BX, gl.SliceLayout(1, OUT))
    cols = gl.arange(0, BY, gl.SliceLayout(0, OUT))
    gl.store(out_ptr + rows[:, None] * BY + cols[None, :], v)


@gluonkit.jit
def scatter_kernel(desc, x_ptr, y_offset, src_ptr, BX: gl.constexpr, offsets_layout: gl.constexpr):
    """desc[x[i], y_offset:y_offset + BY] = src[i, :] (dropped outside)."""
    BY: gl.constexpr = desc.block_type.shape[1]
    x = gl.convert_layout(gl.load(x_ptr + gl.arange(0, BX, gl.BlockedLayout([1], [32], [4], [0]))), offsets_layout)
    rows = gl.arange(0, BX, gl.SliceLayout(1, OUT))
    cols = gl.arange(0, BY, gl.SliceLayout(0, OUT))
    smem = gl.allocate_shared_memory(desc.dtype, [BX, BY], desc.layout)
    smem.store(gl.load(src_ptr + rows[:, None] * BY + cols[None, :]))
    fence_async_shared()  # FENCE
    tma.async_scatter(desc, x, y_offset, smem)  # SCATTER
    tma.store_wait(0)


@gluonkit.jit
def pipelined_gather_kernel(out_ptr, desc, x_ptr, BX: gl.constexpr, STAGES: gl.constexpr, STEPS: gl.constexpr):
    """Sums STEPS gathers of column windows BY apart, through a ring of STAGES buffers."""
    BY: gl.constexpr = desc.block_type.shape[1]
    x = gl.convert_layout(gl.load(x_ptr + gl.arange(0, BX, gl.BlockedLayout([1], [32], [4], [0]))), SLICED)
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES, BX, BY], desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for j in gl.static_range(STAGES):
        mbarrier.init(bars.index(j), count=1)
    for j in gl.static_range(STAGES):
        mbarrier.expect(bars.index(j), BX * desc.block_type.nbytes)
        tma.async_gather(desc, x, j * BY, bars.index(j), bufs.index(j))
    acc = gl.zeros([BX, BY], gl.float32, OUT)
    for i in range(STEPS):
        s = i % STAGES
        mbarrier.wait(bars.index(s), (i // STAGES) & 1)
        acc += bufs.index(s).load(OUT).to(gl.float32)
        gl.thread_barrier()  # every warp has read the stage before it is refilled
        nxt = i + STAGES
        mbarrier.expect(bars.index(s), BX * desc.block_type.nbytes, pred=nxt < STEPS)
        tma.async_gather(desc, x, nxt * BY, bars.index(s), bufs.index(s), pred=nxt < STEPS)
    rows = gl.arange(0, BX, gl.SliceLayout(1, OUT))
    cols = gl.arange(0, BY, gl.SliceLayout(0, OUT))
    gl.store(out_ptr + rows[:, None] * BY + cols[None, :], acc)


def _layout(block, dtype):
    return gl.NVMMASharedLayout.get_default_for(block, dtype)


def _desc(array, bx, by, dtype):
    return TensorDescriptor.from_tensor(array, [1, by], _layout([bx, by], dtype))


def _data(shape, np_dtype, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(np_dtype)


def _offsets(bx, rows, seed):
    """Shuffled row offsets from -rows to 2 * rows: negative, in bounds and past the end."""
    x = np.linspace(-rows, 2 * rows, bx).astype(np.int32)
    return np.random.default_rng(seed).permutation(x)


def _gathered(src, x, y, by):
    """numpy's answer: the rows and columns inside ``src``, zeros elsewhere."""
    out = np.zeros((len(x), by), src.dtype)
    for i, r in enumerate(x):
        for j in range(by):
            if 0 <= r < src.shape[0] and 0 <= y + j < src.shape[1]:
                out[i, j] = src[r, y + j]
    return out


# ------------------------------------------------------------------------ interpreter
@pytest.mark.parametrize("np_dtype, gl_dtype, bx, by, y, offsets_layout", [
    (np.float16, gl.float16, 8, 16, 0, SLICED), (np.float16, gl.float16, 32, 64, -16, SLICED),
    (np.float16, gl.float16, 64, 128, 48, SLICED), (np.float32, gl.float32, 16, 32, 40, SLICED),
    (np.float32, gl.float32, 32, 8, 1000, SLICED), (ml_dtypes.bfloat16, gl.bfloat16, 16, 64, 8, SLICED),
    (np.float16, gl.float16, 16, 64, 24, ONE_WARP), (np.float32, gl.float32, 16, 16, -8, ONE_WARP),
])
def test_gather_matches_numpy(np_dtype, gl_dtype, bx, by, y, offsets_layout):
    src = _data((100, 120), np_dtype, bx + by)
    x = _offsets(bx, 100, by)
    out = np.zeros((bx, by), np_dtype)
    launch_interpreted(gather_kernel, (1,), out, _desc(src, bx, by, gl_dtype), x, y, bx, offsets_layout)
    np.testing.assert_array_equal(out.astype(np.float64), _gathered(src, x, y, by).astype(np.float64))


@pytest.mark.parametrize("np_dtype, gl_dtype, bx, by, y", [
    (np.float16, gl.float16, 16, 64, 8), (np.float32, gl.float32, 32, 16, 96), (np.float16, gl.float16, 8, 128, 0),
])
def test_scatter_matches_numpy(np_dtype, gl_dtype, bx, by, y):
    rng = np.random.default_rng(bx * by)
    dst = _data((64, 128), np_dtype, 1)
    expected = dst.copy()
    x = rng.permutation(np.arange(0, 80, dtype=np.int32))[:bx]  # distinct rows, some past the end
    src = _data((bx, by), np_dtype, 2)
    for i, r in enumerate(x):
        cols = np.arange(y, y + by)
        keep = cols < dst.shape[1]
        if r < dst.shape[0]:
            expected[r, cols[keep]] = src[i, keep]
    launch_interpreted(scatter_kernel, (1,), _desc(dst, bx, by, gl_dtype), x, y, src, bx, SLICED)
    np.testing.assert_array_equal(dst, expected)


def test_pipelined_gathers_sum_the_windows():
    src = _data((64, 256), np.float16, 3)
    x = np.random.default_rng(4).permutation(np.arange(64, dtype=np.int32))[:32]
    out = np.zeros((32, 32), np.float32)
    for seed in (0, 1, 2):
        launch_interpreted(pipelined_gather_kernel, (1,), out, _desc(src, 32, 32, gl.float16), x, 32, 2, 6,
                           seed=seed)
        expected = sum(src[x, 32 * i:32 * i + 32].astype(np.float64) for i in range(6))
        np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_unaligned_column_offset_is_reported_at_the_line():
    src = _data((64, 64), np.float16, 0)
    with pytest.raises(InterpreterError, match="y_offset 4 is not a multiple of 16 bytes") as err:
        launch_interpreted(gather_kernel, (1,), np.zeros((8, 16), np.float16), _desc(src, 8, 16, gl.float16),
                           np.arange(8, dtype=np.int32), 4, 8, SLICED)
    assert err.value.loc.line == marked_line(gather_kernel, "GATHER")


def test_negative_scatter_row_is_reported():
    dst = _data((64, 64), np.float16, 0)
    x = np.arange(8, dtype=np.int32) - 1
    with pytest.raises(InterpreterError, match="offset -1 is negative") as err:
        launch_interpreted(scatter_kernel, (1,), _desc(dst, 8, 16, gl.float16), x, 0, _data((8, 16), np.float16, 1),
                           8, SLICED)
    assert err.value.loc.line == marked_line(scatter_kernel, "SCATTER")


def test_scattering_one_row_twice_with_different_data_is_reported():
    dst = _data((64, 64), np.float16, 0)
    x = np.array([0, 1, 2, 3, 4, 5, 6, 3], np.int32)
    with pytest.raises(InterpreterError, match="row 3 is scattered twice"):
        launch_interpreted(scatter_kernel, (1,), _desc(dst, 8, 16, gl.float16), x, 0, _data((8, 16), np.float16, 1),
                           8, SLICED)


def test_gather_into_a_buffer_being_read_by_a_scatter_is_reported():
    """The same hazards as TMA loads and stores: here a gather overwrites a scatter's source."""
    src = _data((64, 64), np.float16, 0)
    with pytest.raises(InterpreterError, match="still reading"):
        launch_interpreted(scatter_then_gather_kernel, (1,), _desc(src, 8, 16, gl.float16),
                           np.arange(8, dtype=np.int32))


@gluonkit.jit
def scatter_then_gather_kernel(desc, x_ptr):
    x = gl.convert_layout(gl.load(x_ptr + gl.arange(0, 8, gl.BlockedLayout([1], [32], [4], [0]))), SLICED)
    smem = gl.allocate_shared_memory(desc.dtype, [8, 16], desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    smem.store(gl.zeros([8, 16], desc.dtype, OUT))
    fence_async_shared()
    tma.async_scatter(desc, x, 16, smem)
    mbarrier.expect(bar, 8 * desc.block_type.nbytes)
    tma.async_gather(desc, x, 0, bar, smem)  # no store_wait before refilling the scatter's source
    mbarrier.wait(bar, 0)
    tma.store_wait(0)


# ------------------------------------------------------------------------ frontend
@pytest.mark.parametrize("bx, by, layout, message", [
    (8, 16, gl.BlockedLayout([4], [32], [4], [0]), "register bases [1], [2] first"),
    (8, 16, gl.BlockedLayout([1], [32], [4], [0]), "register bases [1], [2] first"),
    (4, 16, gl.BlockedLayout([4], [32], [4], [0]), "needs at least 8"),
    (8, 8, SLICED, "needs at least 32 (BLOCK_Y >= 16)"),
])
def test_frontend_errors_name_the_line(bx, by, layout, message):
    d = ir.TensorDescType((1, by), ir.float16, _layout([bx, by], gl.float16))
    with pytest.raises(CompilationError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
                       .replace("]", r"\]")) as err:
        gather_kernel.compile("*fp16:16", d, "*i32:16", "i32", BX=bx, offsets_layout=layout, target="sm_100a")
    assert f":{marked_line(gather_kernel, 'GATHER')}" in str(err.value)


def test_a_block_of_several_rows_is_refused():
    d = ir.TensorDescType((8, 16), ir.float16, _layout([8, 16], gl.float16))
    with pytest.raises(CompilationError, match=r"block must be \[1, BLOCK_Y\]"):
        gather_kernel.compile("*fp16:16", d, "*i32:16", "i32", BX=8, offsets_layout=SLICED, target="sm_100a")


# ------------------------------------------------------------------------ lowering
def _ptx(kernel, bx, by, dtype, layout, *args):
    d = ir.TensorDescType((1, by), dtype, _layout([bx, by], {ir.float16: gl.float16, ir.float32: gl.float32}[dtype]))
    if kernel is gather_kernel:
        return kernel.compile("*fp16:16", d, "*i32:16", "i32", BX=bx, offsets_layout=layout, target="sm_100a")
    pointer = "*fp16:16" if dtype == ir.float16 else "*fp32:16"
    return kernel.compile(d, "*i32:16", "i32", pointer, BX=bx, offsets_layout=layout, target="sm_100a")


@needs_ptxas
@pytest.mark.parametrize("bx, by, dtype, layout, per_warp", [
    (32, 64, ir.float16, SLICED, 2),     # 8 groups of 4 rows over 4 warps, one column box
    (32, 128, ir.float16, SLICED, 4),    # two 64-column boxes (128-byte swizzle)
    (8, 16, ir.float32, SLICED, 1),      # warps 2 and 3 hold copies of warps 0 and 1's groups
    (16, 16, ir.float16, ONE_WARP, 4),   # every warp holds all 16 offsets: only warp 0 issues
])
@pytest.mark.parametrize("kernel", [gather_kernel, scatter_kernel], ids=["gather", "scatter"])
def test_sm100a_ptx_has_one_instruction_per_four_rows_and_box(kernel, bx, by, dtype, layout, per_warp):
    c = _ptx(kernel, bx, by, dtype, layout)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    gather = "cp.async.bulk.tensor.2d.tile::gather4.shared::cta.global.mbarrier::complete_tx::bytes"
    scatter = "cp.async.bulk.tensor.2d.tile::scatter4.global.shared::cta.bulk_group"
    name = gather if kernel is gather_kernel else scatter
    assert ptx.count(name) == per_warp
    if kernel is scatter_kernel:
        assert "cp.async.bulk.commit_group;" in ptx and "@%p" not in ptx.split("cp.async.bulk.commit_group;")[0][-40:]


def test_sm90a_is_refused():
    d = ir.TensorDescType((1, 16), ir.float16, _layout([8, 16], gl.float16))
    with pytest.raises(CompilationError, match="sm_100a"):
        gather_kernel.compile("*fp16:16", d, "*i32:16", "i32", BX=8, offsets_layout=SLICED, target="sm_90a")
