"""TMA on the device: descriptor arguments, ``tma.async_copy_*`` and ``tma.store_wait``.

Frontend and IR, the interpreter (asynchronous completion at seeded points, ragged edges,
the hazards it reports with both lines), argument packing and lowering for sm_90a and
sm_100a.  ``tests/test_gpu_tma.py`` runs the same kernels on the GPU.
"""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor
from gluonkit.runtime.args import ArgPacker
from interpreting import launch_interpreted
from kernel_checks import marked_line, needs_ptxas

REG = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])


# --------------------------------------------------------------------------- kernels
@gluonkit.jit
def add_one_kernel(in_desc, out_desc, layout: gl.constexpr):
    """Each program: TMA-load its block, add one, TMA-store it back."""
    BM: gl.constexpr = in_desc.block_type.shape[0]
    BN: gl.constexpr = in_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [off_m, off_n], bar, smem)
    mbarrier.wait(bar, 0)
    x = smem.load(layout)
    smem.store(x + 1)
    fence_async_shared()
    tma.async_store(out_desc, [off_m, off_n], smem)
    tma.store_wait(0)
    mbarrier.invalidate(bar)


@gluonkit.jit
def tile_kernel(desc, out_ptr, shape_ptr, layout: gl.constexpr, STAGES: gl.constexpr):
    """Loads program 0's block into each stage in turn (two mbarrier phases each), writes the
    last stage with pointer stores (so out-of-bounds zeros show) and ``desc.shape``."""
    BM: gl.constexpr = desc.block_shape[0]
    BN: gl.constexpr = desc.block_shape[1]
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES, BM, BN], desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    phase = 0
    m = gl.program_id(0) * BM
    for s in gl.static_range(STAGES):
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [m, 0], bar, bufs.index(s))
        mbarrier.wait(bar, phase)
        phase ^= 1
    x = bufs.index(STAGES - 1).load(layout)
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    gl.store(out_ptr + (m + rows)[:, None] * BN + cols[None, :], x)
    two = gl.arange(0, 2, layout=gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(shape_ptr + two, gl.where(two == 0, desc.shape[0], desc.shape[1]))


@gluonkit.jit
def early_read_kernel(desc, layout: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load(desc, [0, 0], bar, smem)  # LOAD
    smem.load(layout)  # READ
    mbarrier.wait(bar, 0)


@gluonkit.jit
def bytes_kernel(desc, EXPECT: gl.constexpr, LOAD_FIRST: gl.constexpr = False):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    if LOAD_FIRST:  # the load counts towards the phase its expect then arms
        tma.async_load(desc, [0, 0], bar, smem)  # EARLY
    mbarrier.expect(bar, EXPECT)  # EXPECT
    if not LOAD_FIRST:
        tma.async_load(desc, [0, 0], bar, smem)  # LOAD
    mbarrier.wait(bar, 0)  # WAIT


@gluonkit.jit
def overwrite_kernel(desc, layout: gl.constexpr, WAIT_FIRST: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    smem.store(gl.zeros(desc.block_shape, desc.dtype, layout))
    fence_async_shared()
    tma.async_store(desc, [0, 0], smem)  # STORE
    if WAIT_FIRST:
        tma.store_wait(0)
    smem.store(gl.full(desc.block_shape, 2, desc.dtype, layout))  # OVERWRITE
    tma.store_wait(0)


@gluonkit.jit
def unfenced_kernel(desc, layout: gl.constexpr, FENCE: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    smem.store(gl.full(desc.block_shape, 3, desc.dtype, layout))  # GENERIC
    if FENCE:
        fence_async_shared()
    tma.async_store(desc, [0, 0], smem)  # STORE
    tma.store_wait(0)


@gluonkit.jit
def no_store_wait_kernel(desc, layout: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    smem.store(gl.zeros(desc.block_shape, desc.dtype, layout))
    fence_async_shared()
    tma.async_store(desc, [0, 0], smem)  # STORE


def nvmma(block, dtype=gl.float16):
    return gl.NVMMASharedLayout.get_default_for(block, dtype)


def _desc(array, block, dtype=gl.float16):
    return TensorDescriptor.from_tensor(array, block, nvmma(block, dtype))


def _data(shape, dtype=np.float16, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------- frontend and IR
def test_descriptor_arguments_print_with_their_shape_and_strides():
    ty = ir.TensorDescType((64, 64), ir.float16, nvmma([64, 64]))
    func = add_one_kernel.build_ir([ty, ty], {"layout": REG})
    text = ir.print_function(func)
    assert str(ty) == f"!tma<64x64xfloat16, {nvmma([64, 64])!r}>"
    assert f"%in_desc0: {ty}, %in_desc_shape01: int32, %in_desc_shape12: int32, %in_desc_stride03: int64" in text
    assert re.search(r"async_tma_copy_global_to_shared %in_desc0, (%\d+, ){4}%\d+  // line \d+", text)
    assert re.search(r"async_tma_copy_shared_to_global %out_desc5, (%\d+, ){2}%\d+  // line \d+", text)
    assert "async_tma_store_wait {pendings = 0, read_only = True}" in text
    assert re.search(r"mbarrier_expect %\d+, %\d+ \{bytes = 8192\}", text)
    assert ty.flat_arg_types() == (ty, ir.int32, ir.int32, ir.int64, ir.int64)


def test_descriptor_attributes_match_gluon():
    x = _data((128, 64))
    d = _desc(x, [64, 32])
    assert ir.TensorDescType((64, 32), ir.float16, d.layout) == gluonkit.runtime.args.ir_type_of(d)
    from gluonkit.lang.nvidia.tma import block_type

    bt = block_type((64, 32), gl.float16)
    assert (bt.nbytes, bt.numel, bt.element_ty) == (4096, 2048, gl.float16)
    assert tma.__name__ == "gluonkit.language.nvidia.hopper.tma"


_BAD_CASES = [
    ("tma.async_load(d, [0, 0], bar, gl.allocate_shared_memory(gl.float16, [64, 64], "
     "gl.SwizzledSharedLayout(1, 1, 1, [1, 0])))", "the descriptor's layout is"),
    ("tma.async_load(d, [0, 0], bar, gl.allocate_shared_memory(gl.float16, [64, 128], "
     "d.layout))", "but the descriptor's block is [64, 64]"),
    ("tma.async_load(d, [0], bar, gl.allocate_shared_memory(gl.float16, [64, 64], d.layout))",
     "one entry per dimension"),
    ("tma.async_load(d, [0, 0.5], bar, gl.allocate_shared_memory(gl.float16, [64, 64], "
     "d.layout))", "does not fit in int32"),
    ("tma.async_store(bar, [0, 0], bar)", "must be a tensor descriptor"),
    ("tma.async_store(d, [0, 0], gl.allocate_shared_memory(gl.float16, [128, 64], "
     "d.layout).slice(0, 64))", "index() the stage"),
    ("tma.store_wait(-1)", "non-negative"),
    ("tma.async_load(d, [0, 0], gl.allocate_shared_memory(gl.int64, [2, 1], "
     "mbarrier.MBarrierLayout()), gl.allocate_shared_memory(gl.float16, [64, 64], d.layout))", "bars.index(i)"),
]


@pytest.mark.parametrize("body, fragment", _BAD_CASES)
def test_frontend_errors_name_the_line_and_the_fix(tmp_path, body, fragment):
    source = ("import gluonkit, gluonkit.lang as gl\nfrom gluonkit.language.nvidia.hopper import mbarrier, tma\n"
              "@gluonkit.jit\ndef bad(d):\n"
              "    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())\n"
              f"    {body}\n")
    path = tmp_path / "bad_tma.py"
    path.write_text(source)
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_tma", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as err:
        module.bad.build_ir([ir.TensorDescType((64, 64), ir.float16, nvmma([64, 64]))])
    assert fragment in str(err.value)
    assert "bad_tma.py:6" in str(err.value)


def test_verifier_checks_the_copy_against_the_descriptor():
    from ir_helpers import KernelBuilder

    ty = ir.TensorDescType((64, 64), ir.float16, nvmma([64, 64]))
    k = KernelBuilder(args=[("d", ty), ("c", ir.int32)])
    smem = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.float16, (64, 32), nvmma([64, 32]), (64, 32)))
    d, c = k.args
    k.op("async_tma_copy_shared_to_global", [d, smem, c, c])
    with pytest.raises(CompilationError, match=r"must hold the descriptor's block \[64, 64\]"):
        ir.verify(k.finish())


# ------------------------------------------------------------------------ interpreter
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_load_add_store_round_trip_with_ragged_edges(seed):
    x = _data((100, 72), seed=seed)
    y = np.full_like(x, np.nan)
    launch_interpreted(add_one_kernel, (2, 3), _desc(x, [64, 32]), _desc(y, [64, 32]), REG, seed=seed)
    np.testing.assert_array_equal(y, x + np.float16(1))


@pytest.mark.parametrize("block, swizzle_boxes", [([64, 64], 1), ([64, 128], 2), ([32, 256], 4)])
def test_out_of_bounds_elements_read_as_zero(block, swizzle_boxes):
    rows, cols = block[0] * 3 // 2, block[1] - 8  # the second program's block and the last columns are ragged
    x = _data((rows, cols))
    d = _desc(x, block)
    assert len(d.box_shape) == 2 and block[1] // d.box_shape[1] == swizzle_boxes
    out = np.full((2 * block[0], block[1]), np.nan, np.float16)
    shape = np.zeros(2, np.int32)
    launch_interpreted(tile_kernel, (2,), d, out, shape, REG, STAGES=2)
    expected = np.zeros_like(out)
    expected[:rows, :cols] = x
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(shape, [rows, cols])


def test_nan_padding_of_bfloat16():
    import ml_dtypes

    x = _data((40, 64), ml_dtypes.bfloat16)
    d = TensorDescriptor.from_tensor(x, [64, 64], nvmma([64, 64], gl.bfloat16), padding="nan")
    out = np.zeros((64, 64), ml_dtypes.bfloat16)
    launch_interpreted(tile_kernel, (1,), d, out, np.zeros(2, np.int32), REG, STAGES=1)
    assert np.isnan(out[40:].astype(np.float32)).all()
    np.testing.assert_array_equal(out[:40], x)


def test_reading_a_buffer_with_a_copy_in_flight_names_both_lines():
    d = _desc(_data((64, 64)), [64, 64])
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(early_read_kernel, (1,), d, REG)
    text = str(err.value)
    assert f"the TMA load issued at line {marked_line(early_read_kernel, 'LOAD')}" in text
    assert f":{marked_line(early_read_kernel, 'READ')}" in text and "mbarrier.wait" in text


@pytest.mark.parametrize("load_first", [False, True])
def test_expecting_too_few_bytes_is_a_mismatch(load_first):
    """Reported with the expect's and the load's lines, whichever comes first (the check is made when the
    load is issued into an armed phase, and when the arrival that arms the phase comes)."""
    d = _desc(_data((64, 64)), [64, 64])
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(bytes_kernel, (1,), d, EXPECT=4096, LOAD_FIRST=load_first)
    text = str(err.value)
    assert "transaction bytes mismatch" in text and "4096 byte(s) more" in text
    assert f"mbarrier.expect at line {marked_line(bytes_kernel, 'EXPECT')}" in text
    assert f":{marked_line(bytes_kernel, 'EARLY' if load_first else 'LOAD')}" in text


def test_expecting_too_many_bytes_deadlocks():
    d = _desc(_data((64, 64)), [64, 64])
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(bytes_kernel, (1,), d, EXPECT=16384)
    text = str(err.value)
    assert "deadlock" in text and "8192 transaction byte(s)" in text
    assert f":{marked_line(bytes_kernel, 'WAIT')}" in text


def test_writing_a_buffer_a_tma_store_still_reads_is_reported():
    x = np.zeros((64, 64), np.float16)
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(overwrite_kernel, (1,), _desc(x, [64, 64]), REG, WAIT_FIRST=False)
    text = str(err.value)
    assert f"the TMA store issued at line {marked_line(overwrite_kernel, 'STORE')}" in text
    assert f":{marked_line(overwrite_kernel, 'OVERWRITE')}" in text and "store_wait" in text
    launch_interpreted(overwrite_kernel, (1,), _desc(x, [64, 64]), REG, WAIT_FIRST=True)
    np.testing.assert_array_equal(x, 0)


def test_tma_store_of_unfenced_generic_writes_is_reported():
    x = np.zeros((64, 64), np.float16)
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(unfenced_kernel, (1,), _desc(x, [64, 64]), REG, FENCE=False)
    text = str(err.value)
    assert f"the store at line {marked_line(unfenced_kernel, 'GENERIC')}" in text and "fence_async_shared()" in text
    assert f":{marked_line(unfenced_kernel, 'STORE')}" in text
    launch_interpreted(unfenced_kernel, (1,), _desc(x, [64, 64]), REG, FENCE=True)
    np.testing.assert_array_equal(x, 3)


def test_returning_with_a_store_in_flight_is_reported():
    with pytest.raises(InterpreterError, match=r"store_wait\(0\) before the kernel ends") as err:
        launch_interpreted(no_store_wait_kernel, (1,), _desc(np.zeros((64, 64), np.float16), [64, 64]), REG)
    assert f":{marked_line(no_store_wait_kernel, 'STORE')}" in str(err.value)


# ------------------------------------------------------------------------- packing
def test_packer_places_the_tensor_map_then_shape_and_strides():
    x = _data((100, 72))
    d = _desc(x, [64, 32])
    d._encoded = bytes(range(128))  # what cuTensorMapEncodeTiled would return (no GPU here)
    ty = gluonkit.runtime.args.ir_type_of(d)
    packer = ArgPacker([ir.int32, ty, ir.PointerType(ir.float32)], ["n", "d", "p"])
    assert packer._offsets == [0, 64, 192, 196, 200, 208, 216]
    block = packer.pack([7, d, 0x1000])
    raw = bytes(block.buffer)[block.offset:block.offset + 224]
    assert raw[64:192] == bytes(range(128))
    assert struct.unpack_from("<iiqqQ", raw, 192) == (100, 72, 72, 1, 0x1000)
    import ctypes

    assert (ctypes.addressof(block.buffer) + block.offset) % 64 == 0
    with pytest.raises(TypeError, match="compiled for a descriptor of type"):
        packer.pack([7, _desc(x, [64, 64]), 0x1000])


# ------------------------------------------------------------------------- lowering
@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("block, boxes", [([64, 64], 1), ([64, 128], 2)])
def test_lowering_assembles_with_the_bulk_tensor_instructions(target, block, boxes):
    ty = ir.TensorDescType(block, ir.float16, nvmma(block))
    c = add_one_kernel.compile(ty, ty, layout=REG, target=target)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    assert ".param .align 64 .b8 add_one_kernel_param_0[128]" in ptx
    assert "cvta.param.u64" in ptx and "__local_depot" not in ptx  # the map stays a grid constant
    loads = ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes")
    stores = ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group")
    assert (loads, stores) == (boxes, boxes)
    assert "cp.async.bulk.commit_group;" in ptx and "cp.async.bulk.wait_group.read 0;" in ptx
    assert ptx.index("fence.proxy.async.shared::cta") < ptx.index("cp.async.bulk.tensor.2d.global")


@needs_ptxas
def test_lowering_of_a_multi_stage_ragged_loader_assembles():
    d = _desc(_data((80, 56)), [64, 64])
    c = tile_kernel.compile(d, "*fp16:16", "*i32:16", layout=REG, STAGES=3)
    assert c.asm["ptx"].count("cp.async.bulk.tensor.2d.shared::cluster") == 3
    assert "cubin" in c.asm


# ------------------------------------------------- fences across warp-specialize partitions
@gluonkit.jit
def _fill_partition(smem, ready, layout: gl.constexpr, FENCE: gl.constexpr):
    smem.store(gl.full(smem.shape, 5.0, smem.dtype, layout))  # GENERIC
    if FENCE:
        fence_async_shared()  # the writer fences, then hands the buffer over
    mbarrier.arrive(ready, count=1)


@gluonkit.jit
def _store_partition(desc, smem, ready):
    mbarrier.wait(ready, 0)
    tma.async_store(desc, [0, 0], smem)  # STORE
    tma.store_wait(0)


@gluonkit.jit
def handoff_kernel(desc, layout: gl.constexpr, FENCE: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(ready, count=1)
    fence_async_shared()
    gl.warp_specialize([(_fill_partition, (smem, ready, layout, FENCE)), (_store_partition, (desc, smem, ready))],
                       [1])


def test_a_fence_in_the_writing_partition_orders_its_writes_before_another_partitions_tma_store():
    x = np.zeros((64, 64), np.float16)
    launch_interpreted(handoff_kernel, (1,), _desc(x, [64, 64]), REG, FENCE=True)
    np.testing.assert_array_equal(x, 5)
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(handoff_kernel, (1,), _desc(x, [64, 64]), REG, FENCE=False)
    assert f"the store at line {marked_line(_fill_partition, 'GENERIC')}" in str(err.value)
    assert f":{marked_line(_store_partition, 'STORE')}" in str(err.value)
