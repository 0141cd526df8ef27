"""Blackwell tensor memory: frontend errors, interpreter round trips, the column plan, and ptxas.

Round trips go through every ``instr_variant`` and element type (fp32, fp16/bf16 packed,
fp16 unpacked with ``col_stride=2``) and must be bit-identical; the same kernels compile
for sm_100a (ptxas accepts them) and stop with an error for sm_90a.  ``tests/test_gpu_tmem.py``
is for a Blackwell GPU; ``tests/test_triton39_crosscheck.py`` compares the PTX with Triton's.
"""

from __future__ import annotations

import re
import types

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.interpret.nvidia import tmem as itmem
from gluonkit.interpret.values import to_logical
from gluonkit.ir.tmem import TMEM_COLUMNS
from gluonkit.layouts.tmem import TMEM_ROWS
from gluonkit.language.nvidia.blackwell import TensorMemoryLayout, TensorMemoryScalesLayout, allocate_tensor_memory
from interpreting import launch_interpreted
from kernel_checks import line_containing, needs_ptxas
from tmem_kernels import alloc_in_partition, partition_load, round_trip, row_max, staged_slices

VARIANTS = ["32x32b", "16x64b", "16x128b", "16x256b"]
# (name, layout, M, N, element)
CASES = [
    ("fp32", TensorMemoryLayout([128, 64], 1), 128, 64),
    ("fp32_m64", TensorMemoryLayout([64, 64], 1), 64, 64),
    ("fp16_packed", TensorMemoryLayout([128, 64], 1), 128, 64),
    ("bf16_packed", TensorMemoryLayout([128, 64], 1), 128, 64),
    ("fp16_col_stride2", TensorMemoryLayout([128, 64], 2), 128, 64),
    ("fp8_packed", TensorMemoryLayout([128, 64], 1), 128, 64),
]


def _random(name, shape, rng):
    if name.startswith("bf16"):
        return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    if name.startswith("fp8"):
        return rng.standard_normal(shape).astype(ml_dtypes.float8_e4m3fn)
    dtype = np.float16 if name.startswith("fp16") else np.float32
    return rng.standard_normal(shape).astype(dtype)


def _ptr(name):
    return {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16", "fp8": "*fp8e4nv"}[name.split("_")[0]]


def _no_register_layout(error: CompilationError) -> bool:
    """Some (variant, layout) pairs have no register layout at all: get_tmem_reg_layout says so."""
    return "cannot access shape" in str(error)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name,layout,M,N", CASES, ids=[c[0] for c in CASES])
def test_round_trip_is_bit_identical(name, layout, M, N, variant):
    x = _random(name, (M, N), np.random.default_rng(7))
    y = np.zeros_like(x)
    try:
        launch_interpreted(round_trip, (1,), x, y, M, N, layout, variant, num_warps=4)
    except CompilationError as e:
        assert _no_register_layout(e), str(e)
        return
    assert np.array_equal(x.view(np.uint8), y.view(np.uint8))


def test_scales_layout_round_trip_writes_every_lane_quarter():
    """TensorMemoryScalesLayout repeats rows 0..31 in each lane quarter: each warp stores and loads its own copy."""
    x = np.random.default_rng(4).integers(0, 256, (128, 4)).astype(np.uint8)
    y = np.zeros_like(x)
    launch_interpreted(round_trip, (1,), x, y, 128, 4, TensorMemoryScalesLayout(), "32x32b", num_warps=4)
    assert np.array_equal(x, y)


@pytest.mark.parametrize("num_warps", [4, 8])
def test_round_trip_with_eight_warps_spreads_columns(num_warps):
    x = np.random.default_rng(1).standard_normal((128, 128)).astype(np.float32)
    y = np.zeros_like(x)
    launch_interpreted(round_trip, (1,), x, y, 128, 128, TensorMemoryLayout([128, 128], 1), "32x32b",
                       num_warps=num_warps)
    assert np.array_equal(x, y)


def test_stages_and_slices_address_the_right_columns():
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)
    y = np.zeros_like(x)
    launch_interpreted(staged_slices, (1,), x, y, 128, 64, TensorMemoryLayout([128, 64], 1), num_warps=4)
    assert np.array_equal(x, y)


@pytest.mark.parametrize("use_min", [False, True])
@pytest.mark.parametrize("use_abs", [False, True])
def test_load_max_and_min_give_each_rows_extreme(use_abs, use_min):
    x = np.random.default_rng(3).standard_normal((128, 32)).astype(np.float32)
    y, m = np.zeros_like(x), np.zeros(128, np.float32)
    launch_interpreted(row_max, (1,), x, y, m, 128, 32, use_abs, use_min, num_warps=4)
    assert np.array_equal(x, y)
    magnitude = (np.abs(x) if use_abs else x).astype(np.float64)
    want = magnitude.min(axis=1) if use_min else magnitude.max(axis=1)
    assert np.array_equal(m.astype(np.float64), want)


# ------------------------------------------------------------------------ errors
@gluonkit.jit
def too_many_columns(N: gl.constexpr):
    a = allocate_tensor_memory(gl.float32, [128, 256], TensorMemoryLayout([128, 256], 1))
    b = allocate_tensor_memory(gl.float32, [2, 128, N], TensorMemoryLayout([128, N], 1))  # the second
    reg: gl.constexpr = a.get_reg_layout()
    a.store(gl.zeros([128, 256], gl.float32, reg))
    b.index(0).store(gl.zeros([128, N], gl.float32, b.index(0).get_reg_layout()))


def test_more_than_512_columns_is_an_error_listing_each_allocation_in_the_interpreter():
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(too_many_columns, (1,), 256, num_warps=4)
    text = str(err.value)
    assert "768 tensor-memory columns but a CTA has 512" in text
    assert f"line {line_containing(too_many_columns, 'a = allocate')}: [128, 256] float32 -> 256 columns" in text
    assert "[2, 128, 256]" in text and "512 columns" in text


@needs_ptxas
def test_more_than_512_columns_is_a_compile_error():
    with pytest.raises(CompilationError, match="768 tensor-memory columns but a CTA has 512"):
        too_many_columns.compile(target="sm_100a", num_warps=4, N=256)
    too_many_columns.compile(target="sm_100a", num_warps=4, N=64)  # 256 + 128 columns fit


def test_tensor_memory_on_sm_90a_is_an_error_at_the_users_line():
    with pytest.raises(CompilationError) as err:
        round_trip.compile("*fp32:16", "*fp32:16", target="sm_90a", num_warps=4, M=128, N=64,
                           tmem_layout=TensorMemoryLayout([128, 64], 1), variant="32x32b")
    assert "tensor memory is a Blackwell (sm_100a) feature" in str(err.value)
    assert f":{line_containing(round_trip, 'allocate_tensor_memory(')}:" in str(err.value)


@gluonkit.jit
def bad_frontend(CASE: gl.constexpr):
    tl: gl.constexpr = TensorMemoryLayout([128, 64], 1)
    if CASE == 0:
        allocate_tensor_memory(gl.float32, [128, 64], gl.NVMMASharedLayout.get_default_for([128, 64], gl.float32))
    elif CASE == 1:
        allocate_tensor_memory(gl.float32, [128, 64], TensorMemoryLayout([128, 64], 2))
    elif CASE == 2:
        t = allocate_tensor_memory(gl.float32, [128, 64], tl)
        t.store(gl.zeros([128, 32], gl.float32, t.get_reg_layout()))
    elif CASE == 3:
        t = allocate_tensor_memory(gl.float32, [128, 64], tl)
        t.store(gl.zeros([128, 64], gl.float16, t.get_reg_layout()))
    elif CASE == 4:
        t = allocate_tensor_memory(gl.float32, [128, 64], tl)
        t.load(gl.BlockedLayout([1, 64], [32, 1], [1, 4], [0, 1]))
    elif CASE == 5:
        t = allocate_tensor_memory(gl.float32, [128, 64], tl)
        t.index(0)
    elif CASE == 6:
        t = allocate_tensor_memory(gl.float32, [128, 64], tl)
        t.slice(16, 32)
    elif CASE == 7:
        t = allocate_tensor_memory(gl.float32, [128, 64], tl)
        t.reinterpret(gl.float32, [128, 128], TensorMemoryLayout([128, 128], 1))


@pytest.mark.parametrize("case,message", [
    (0, "the layout must be a TensorMemoryLayout"),
    (1, "col_stride 2 with 32-bit"),
    (2, "has shape [128, 32] but the tensor memory view has shape [128, 64]"),
    (3, "has type float16 but the tensor memory holds float32"),
    (4, "lane-quarter rule"),
    (5, "has none"),
    (6, "start a multiple of it"),
    (7, "needs 128 TMEM columns but the view has 64"),
])
def test_frontend_errors_name_the_line(case, message):
    with pytest.raises(CompilationError) as err:
        launch_interpreted(bad_frontend, (1,), case, num_warps=4)
    assert message in str(err.value)
    assert "bad_frontend" in str(err.value)


# --------------------------------------------------------------------- PTX / ptxas
def _tcgen05_lines(ptx):
    return [line.strip() for line in ptx.splitlines() if "tcgen05." in line and not line.strip().startswith("//")]


@needs_ptxas
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name,layout,M,N", CASES, ids=[c[0] for c in CASES])
def test_ptxas_accepts_sm_100a(name, layout, M, N, variant):
    try:
        kernel = round_trip.compile(f"{_ptr(name)}:16", f"{_ptr(name)}:16", target="sm_100a", num_warps=4, M=M, N=N,
                                    tmem_layout=layout, variant=variant)
    except CompilationError as e:
        assert _no_register_layout(e), str(e)
        return
    assert kernel.asm["cubin"]
    lines = _tcgen05_lines(kernel.asm["ptx"])
    shape = "(32x32b|16x32bx2)" if variant == "32x32b" else variant  # 16x32bx2: M=64 blocks with 32x32b's layout
    pairs = r"\.pack::16b" if layout.col_stride == 2 else ""  # unpacked fp16: two columns per register
    assert any(re.match(rf"tcgen05\.ld\.sync\.aligned\.{shape}\.x\d+{pairs}\.b32", ln) for ln in lines), lines
    assert any(re.search(rf"tcgen05\.st\.sync\.aligned\.{shape}\.x\d+{pairs.replace('pack', 'unpack')}\.b32", ln)
               for ln in lines), lines
    for needed in ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32", "tcgen05.relinquish_alloc_permit",
                   "tcgen05.dealloc.cta_group::1.sync.aligned.b32", "tcgen05.wait::ld.sync.aligned",
                   "tcgen05.wait::st.sync.aligned"):
        assert any(needed in ln for ln in lines), (needed, lines)


@needs_ptxas
def test_ptxas_accepts_slices_stages_and_load_max():
    staged_slices.compile("*fp32:16", "*fp32:16", target="sm_100a", num_warps=4, M=128, N=64,
                          tmem_layout=TensorMemoryLayout([128, 64], 1))
    ptx = row_max.compile("*fp32:16", "*fp32:16", "*fp32:16", target="sm_100a", num_warps=4, M=128, N=32,
                          ABS=True).asm["ptx"]
    assert "max.f32" in ptx
    ptx = row_max.compile("*fp32:16", "*fp32:16", "*fp32:16", target="sm_100a", num_warps=4, M=128, N=32,
                          ABS=False, MIN=True).asm["ptx"]
    assert "min.f32" in ptx


# ------------------------------------------------- whole-view access (for tcgen05 ops)
@pytest.mark.parametrize("layout,dtype", [(TensorMemoryLayout([128, 64], 1), np.float32),
                                          (TensorMemoryLayout([64, 64], 1), np.float32),
                                          (TensorMemoryLayout([128, 64], 1), np.float16),
                                          (TensorMemoryLayout([128, 64], 2), np.float16)])
def test_write_tile_places_elements_where_tcgen05_ld_finds_them(layout, dtype):
    """write_tile (what an MMA's accumulator update uses) and tcgen05.ld agree on every element's cell."""
    element = {np.float32: ir.float32, np.float16: ir.float16}[dtype]
    ty = ir.TensorMemoryDescType(element, (layout.block[0], 64), layout, (layout.block[0], 64))
    memory = itmem.TensorMemory(np.zeros((TMEM_ROWS, 4 * TMEM_COLUMNS), np.uint8),
                                np.zeros((TMEM_ROWS, 4 * TMEM_COLUMNS), bool), None)
    ref = itmem.TmemRef(memory, 0, 32)
    op = types.SimpleNamespace(name="test", loc=None)
    x = np.random.default_rng(5).standard_normal(ty.shape).astype(dtype)
    itmem.write_tile(ref, ty, x, op)
    assert np.array_equal(itmem.read_tile(ref, ty, op), x)
    reg = ty.get_reg_layout(4)
    value = itmem.read_view(types.SimpleNamespace(num_warps=4, threads=4), ref, ty, ir.TensorType(element, ty.shape, reg), op)
    assert np.array_equal(to_logical(value, 4, None), x)


# -------------------------------------------------------------------- warp_specialize
def test_a_worker_partition_loads_what_the_kernel_stored():
    x = np.random.default_rng(6).standard_normal((128, 32)).astype(np.float32)
    y = np.zeros_like(x)
    launch_interpreted(partition_load, (1,), x, y, 128, 32, False, num_warps=4)
    assert np.array_equal(x, y)


@needs_ptxas
@pytest.mark.parametrize("first", [False, True])
def test_ptxas_accepts_tmem_in_a_worker_partition(first):
    """With a one-warp worker first, the 4-warp worker still starts at a warpgroup (warp 8): lane quarters hold."""
    ptx = partition_load.compile("*fp32:16", "*fp32:16", target="sm_100a", num_warps=4, M=128, N=32,
                                 FIRST=first).asm["ptx"]
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx


def test_partitions_may_allocate_tensor_memory_of_their_own():
    """As in Gluon, ``allocate_tensor_memory`` inside a partition gives that partition a buffer
    no other allocation overlaps (Gluon's warp-specialized block-scaled tutorial does this)."""
    x = np.random.default_rng(7).standard_normal((128, 32)).astype(np.float32)
    y, z = np.full_like(x, np.nan), np.full_like(x, np.nan)
    launch_interpreted(alloc_in_partition, (1,), x, y, z, 128, 32, num_warps=4)
    assert np.array_equal(y, 2 * x) and np.array_equal(z, 3 * x)


@needs_ptxas
def test_ptxas_accepts_tensor_memory_allocated_in_partitions():
    ptx = alloc_in_partition.compile("*fp32:16", "*fp32:16", "*fp32:16", target="sm_100a", num_warps=4, M=128,
                                     N=32).asm["ptx"]
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1  # one allocation, 64 columns
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], 64;", ptx)
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x32.b32") == 2
