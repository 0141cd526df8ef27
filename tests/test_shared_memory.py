"""Shared memory descriptors and mbarriers: frontend, verifier, interpreter and lowering.

The kernels here stage a tile through a user-allocated buffer (stored in one distributed
layout, loaded in another: a layout conversion the user controls) and drive mbarrier
phases.  ``tests/test_gpu_shared.py`` runs the same kernels on the GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier
from ir_helpers import KernelBuilder
from interpreting import interpreter_on  # noqa: E402
from kernel_checks import needs_ptxas

M, N = 32, 64
SRC = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
DST = gl.BlockedLayout([4, 1], [8, 4], [1, 4], [0, 1])
SMEM_LAYOUTS = {
    "nvmma128": gl.NVMMASharedLayout.get_default_for([M, N], gl.float16),
    "nvmma_transposed": gl.NVMMASharedLayout(64, 16, transposed=True),
    "swizzled": gl.SwizzledSharedLayout(8, 2, 4, [1, 0]),
    "swizzled_col_major": gl.SwizzledSharedLayout(4, 1, 8, [0, 1]),
}


# --------------------------------------------------------------------------- kernels
@gluonkit.jit
def stage_kernel(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr, dst: gl.constexpr,
                 smem_layout: gl.constexpr, STAGE: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, src))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, src))
    x = gl.load(x_ptr + rows[:, None] * N + cols[None, :])
    smem = gl.allocate_shared_memory(gl.float16, [2, M, N], smem_layout)
    smem.index(STAGE).store(x)
    y = smem.index(STAGE).load(dst)
    rows2 = gl.arange(0, M, layout=gl.SliceLayout(1, dst))
    cols2 = gl.arange(0, N, layout=gl.SliceLayout(0, dst))
    gl.store(y_ptr + rows2[:, None] * N + cols2[None, :], y)


@gluonkit.jit
def quadrant_kernel(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr,
                    smem_layout: gl.constexpr):
    """Stores the tile whole, reads the bottom-right quadrant through slices, transposed."""
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    x = gl.load(x_ptr + rows[:, None] * N + cols[None, :])
    smem = gl.allocate_shared_memory(gl.float16, [M, N], smem_layout, value=x)
    quad = smem.slice(M // 2, M // 2, dim=0).slice(N // 2, N // 2, dim=1).permute((1, 0))
    q = quad.load(gl.BlockedLayout([1, 1], [8, 4], [2, 2], [1, 0]))
    gl.store(y_ptr + gl.arange(0, N // 2)[:, None] * (M // 2) + gl.arange(0, M // 2)[None, :],
             gl.convert_layout(q, gl.BlockedLayout([1, 1], [8, 4], [2, 2], [1, 0])))


@gluonkit.jit
def phases_kernel(out_ptr, ROUNDS: gl.constexpr):
    """Two barriers in a ring: each round arrives on one and waits for its phase flip."""
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=2)
    fence_async_shared()
    phase = 0
    for r in range(ROUNDS):
        bar = bars.index(r % 2)
        mbarrier.arrive(bar)
        mbarrier.arrive(bar, pred=r >= 0)
        mbarrier.wait(bar, phase)
        phase = phase ^ (r % 2)
    for i in gl.static_range(2):
        mbarrier.invalidate(bars.index(i))
    gl.thread_barrier()
    gl.store(out_ptr + gl.arange(0, 2, layout=gl.BlockedLayout([1], [32], [4], [0])),
             gl.full([2], 1, gl.int32, layout=gl.BlockedLayout([1], [32], [4], [0])) * phase)


@gluonkit.jit
def deadlock_kernel(out_ptr):
    bars = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.expect(bars.index(0), 128)
    mbarrier.wait(bars.index(0), 0)
    gl.store(out_ptr, 1)


@gluonkit.jit
def too_much_kernel(x_ptr, STAGES: gl.constexpr):
    a = gl.allocate_shared_memory(gl.bfloat16, [STAGES, 128, 64], gl.NVMMASharedLayout.get_default_for([128, 64], gl.bfloat16))
    b = gl.allocate_shared_memory(gl.bfloat16, [STAGES, 64, 256], gl.NVMMASharedLayout.get_default_for([64, 256], gl.bfloat16))
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.wait(bars.index(0), 0, deps=[a, b])  # a and b live together (compiled, never run)
    gl.store(x_ptr, 1.0)


@gluonkit.jit
def scratch_in_a_gap_kernel(x_ptr, out_ptr, STAGES: gl.constexpr):
    """16 bytes at 0, then a 1024-aligned buffer that ends exactly at sm_90a's limit when STAGES=113: the
    cross-warp sum's scratch fits only where a buffer dead by then was."""
    small = gl.allocate_shared_memory(gl.float32, [4], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    big = gl.allocate_shared_memory(gl.float16, [STAGES, 16, 64], gl.NVMMASharedLayout.get_default_for([16, 64],
                                                                                                      gl.float16))
    bars = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.wait(bars.index(0), 0, deps=[small, big])  # both live (compiled, never run)
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    gl.store(out_ptr, gl.sum(gl.load(x_ptr + gl.arange(0, 128, L)), axis=0))  # the sum


ROWS_L = gl.BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0])
COLS_L = gl.BlockedLayout([4, 1], [32, 1], [1, 4], [0, 1])


@gluonkit.jit
def dead_buffer_scratch_kernel(x_ptr, out_ptr, STAGES: gl.constexpr, ITERS: gl.constexpr):
    """Each iteration stages a 128 x 64 tile in the first of STAGES such buffers (nearly all of sm_90a's
    shared memory when STAGES=7), reads it back and converts it between warps: the conversion's 32 KiB of
    scratch fit only in the buffer's bytes, dead by then; the next iteration's store waits for its reads."""
    rows_l: gl.constexpr = ROWS_L
    cols_l: gl.constexpr = COLS_L
    r = gl.arange(0, 128, gl.SliceLayout(1, rows_l))
    c = gl.arange(0, 64, gl.SliceLayout(0, rows_l))
    acc = gl.zeros([128, 64], gl.float32, cols_l)
    for i in range(ITERS):
        staged = gl.allocate_shared_memory(gl.float32, [STAGES, 128, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        staged.index(0).store(gl.load(x_ptr + i * 128 * 64 + r[:, None] * 64 + c[None, :]))
        top = staged.index(0).load(rows_l)
        acc += gl.convert_layout(top, cols_l) * (i + 1.0)  # the conversion
    tr = gl.arange(0, 128, gl.SliceLayout(1, cols_l))
    tc = gl.arange(0, 64, gl.SliceLayout(0, cols_l))
    gl.store(out_ptr + tr[:, None] * 64 + tc[None, :], acc)


@gluonkit.jit
def live_buffer_scratch_kernel(x_ptr, out_ptr):
    """As :func:`dead_buffer_scratch_kernel`, but the staging buffer is read again after the conversion: live
    across it, so its 229376 bytes and the conversion's 32768 pass sm_90a's limit."""
    rows_l: gl.constexpr = ROWS_L
    cols_l: gl.constexpr = COLS_L
    r = gl.arange(0, 128, gl.SliceLayout(1, rows_l))
    c = gl.arange(0, 64, gl.SliceLayout(0, rows_l))
    staged = gl.allocate_shared_memory(gl.float32, [7, 128, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    staged.index(0).store(gl.load(x_ptr + r[:, None] * 64 + c[None, :]))
    t = gl.convert_layout(staged.index(0).load(rows_l), cols_l)  # the conversion
    gl.store(out_ptr + r[:, None] * 64 + c[None, :], staged.index(0).load(rows_l) + gl.convert_layout(t, rows_l))


def dead_buffer_scratch_expected(x):
    """The float64 reference of :func:`dead_buffer_scratch_kernel`."""
    return sum(x[i].astype(np.float64) * (i + 1) for i in range(len(x)))


def _interpret(kernel, *args, **kw):
    with interpreter_on():
        kernel[(1,)](*args, **kw)


def expected_phases(rounds: int) -> int:
    phase = 0
    for r in range(rounds):
        phase ^= r % 2
    return phase


# ----------------------------------------------------------------- frontend and IR
def test_descriptor_views_print_readably():
    func = stage_kernel.build_ir([gl.pointer_type(gl.float16)] * 2, dict(
        M=M, N=N, src=SRC, dst=DST, smem_layout=SMEM_LAYOUTS["swizzled"], STAGE=1))
    text = ir.print_function(func)
    assert "local_alloc  : !smem<2x32x64xfloat16, #L3, alloc 2x32x64>" in text
    assert "memdesc_index %15, %16 : !smem<32x64xfloat16, #L3, alloc 32x64>" in text
    assert "local_load %19 : tensor<32x64xfloat16, #L4>" in text
    assert "#L3 = SwizzledSharedLayout(vec=8" in text


def test_permute_keeps_the_named_layout_and_slices_keep_the_buffer():
    func = quadrant_kernel.build_ir([gl.pointer_type(gl.float16)] * 2, dict(
        M=M, N=N, layout=SRC, smem_layout=SMEM_LAYOUTS["nvmma128"]))
    ops = {op.name: op for op in func.walk()}
    sliced = ops["memdesc_slice"].results[0].type
    assert sliced.shape == (16, 32) and sliced.alloc_shape == (32, 64)
    permuted = ops["memdesc_permute"].results[0].type
    assert permuted.layout == gl.NVMMASharedLayout(128, 16, transposed=True)
    assert permuted.shape == (32, 16) and permuted.alloc_shape == (64, 32)


def test_hopper_namespace_matches_gluon():
    from gluonkit import sync

    assert fence_async_shared is sync.fence_async_shared
    assert all(getattr(mbarrier, name) is getattr(sync.mbarrier, name) for name in sync.mbarrier.__all__)
    assert repr(mbarrier.MBarrierLayout()) == "MBarrierLayout()"


@pytest.mark.parametrize("body, fragment", [
    ("gl.allocate_shared_memory(gl.float16, [32, 64], gl.BlockedLayout([1], [32], [4], [0]))",
     "must be a shared layout"),
    ("gl.allocate_shared_memory(gl.float16, [32, 48], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))",
     "powers of two"),
    ("gl.allocate_shared_memory(gl.float16, [32, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0])).index(0)",
     "covers every dimension"),
    ("gl.allocate_shared_memory(gl.float16, [2, 32, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0])).index(2)",
     "index 2 is out of range for 2 stages"),
    ("gl.allocate_shared_memory(gl.float16, [32, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0])).slice(8, 16)",
     "start a multiple of it"),
    ("gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout()).store(gl.zeros([2, 1], gl.int32))",
     "has type int32 but the shared memory holds int64"),
    ("mbarrier.init(gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout()), 1)",
     "pick one with bars.index(i)"),
    ("mbarrier.wait(gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout()).index(0), 2)",
     "phase is a parity"),
])
def test_frontend_errors_name_the_line_and_the_fix(tmp_path, body, fragment):
    source = ("import gluonkit, gluonkit.lang as gl\nfrom gluonkit.language.nvidia.hopper import mbarrier\n"
              f"@gluonkit.jit\ndef bad(x_ptr):\n    {body}\n")
    path = tmp_path / "bad_kernel.py"
    path.write_text(source)
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError) as err:
        module.bad.build_ir([gl.pointer_type(gl.float32)])
    assert fragment in str(err.value)
    assert "bad_kernel.py:5" in str(err.value)


def test_descriptor_reassigned_in_a_runtime_loop_is_refused(tmp_path):
    source = ("import gluonkit, gluonkit.lang as gl\n@gluonkit.jit\ndef bad(n):\n"
              "    bufs = gl.allocate_shared_memory(gl.float32, [2, 64], gl.SwizzledSharedLayout(1, 1, 1, [0]))\n"
              "    b = bufs.index(0)\n    for i in range(n):\n"
              "        b.store(gl.zeros([64], gl.float32, gl.BlockedLayout([1], [32], [4], [0])))\n"
              "        b = bufs.index(1)\n")  # b's value flows into the next iteration: it would be carried
    path = tmp_path / "bad_loop.py"
    path.write_text(source)
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_loop", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(CompilationError, match="cannot be carried through loops"):
        module.bad.build_ir([gl.int32])


# ------------------------------------------------------------------------ verifier
def _barrier_kernel():
    k = KernelBuilder()
    layout = gl.SwizzledSharedLayout(1, 1, 1, [0])
    bad = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.int64, (2, 1), layout, (2, 1)))
    k.op("mbarrier_init", [bad], [], {"count": 1}, src="mbarrier.init(bars, 1)")
    return k.finish()


def test_verifier_rejects_a_barrier_that_is_not_one():
    with pytest.raises(CompilationError) as err:
        ir.verify(_barrier_kernel())
    assert "mbarrier_init: the barrier must be one mbarrier" in str(err.value)
    assert "mbarrier.init(bars, 1)" in str(err.value)


def test_verifier_rejects_a_slice_of_a_stage_dimension():
    k = KernelBuilder()
    layout = gl.SwizzledSharedLayout(1, 1, 1, [0])
    buf = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.float32, (4, 64), layout, (4, 64)))
    k.value("memdesc_slice", [buf], ir.SharedMemoryDescType(ir.float32, (2, 64), layout, (4, 64)),
            {"start": 0, "length": 2, "dim": 0}, src="bufs.slice(0, 2)")
    with pytest.raises(CompilationError, match="dim must be a tile dimension"):
        ir.verify(k.finish())


# --------------------------------------------------------------------- interpreter
@pytest.mark.parametrize("name", sorted(SMEM_LAYOUTS))
@pytest.mark.parametrize("stage", [0, 1])
def test_interpreter_stages_a_tile_through_shared_memory(name, stage):
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float16)
    y = np.zeros_like(x)
    _interpret(stage_kernel, x, y, M=M, N=N, src=SRC, dst=DST, smem_layout=SMEM_LAYOUTS[name], STAGE=stage)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("name", ["nvmma128", "swizzled"])
def test_interpreter_slices_and_permutes_views(name):
    x = np.random.default_rng(1).standard_normal((M, N)).astype(np.float16)
    y = np.zeros((N // 2, M // 2), np.float16)
    _interpret(quadrant_kernel, x, y, M=M, N=N, layout=SRC, smem_layout=SMEM_LAYOUTS[name])
    np.testing.assert_array_equal(y, x[M // 2:, N // 2:].T)


@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_interpreter_tracks_mbarrier_phases(rounds):
    out = np.full(2, -1, np.int32)
    _interpret(phases_kernel, out, ROUNDS=rounds)
    np.testing.assert_array_equal(out, expected_phases(rounds))


def test_interpreter_reports_a_deadlock_at_the_wait():
    with pytest.raises(InterpreterError) as err:
        _interpret(deadlock_kernel, np.zeros(1, np.int32))
    text = str(err.value)
    assert "deadlock" in text and "mbarrier.wait(bars.index(0), 0)" in text
    assert "128 transaction byte(s)" in text


def test_interpreter_reports_reads_of_unwritten_shared_memory(tmp_path):
    source = ("import gluonkit, gluonkit.lang as gl\n@gluonkit.jit\ndef bad(y_ptr):\n"
              "    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])\n"
              "    s = gl.allocate_shared_memory(gl.float32, [128], gl.SwizzledSharedLayout(1, 1, 1, [0]))\n"
              "    gl.store(y_ptr + gl.arange(0, 128, layout=L), s.load(L))\n")
    path = tmp_path / "unwritten.py"
    path.write_text(source)
    import importlib.util

    spec = importlib.util.spec_from_file_location("unwritten", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(InterpreterError, match="nothing has written yet"):
        _interpret(module.bad, np.zeros(128, np.float32))


# ------------------------------------------------------------------------ lowering
@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", sorted(SMEM_LAYOUTS))
def test_staging_lowers_with_vector_shared_accesses(target, name):
    c = stage_kernel.compile("*fp16:16", "*fp16:16", M=M, N=N, src=SRC, dst=DST, smem_layout=SMEM_LAYOUTS[name],
                             STAGE=1, target=target)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    assert "st.shared" in ptx and "ld.shared" in ptx and "bar.sync 0" in ptx
    assert c.metadata["shared"] == 2 * M * N * 2


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_mbarriers_lower_to_ptx(target):
    c = phases_kernel.compile("*i32", ROUNDS=4, target=target)
    ptx = c.asm["ptx"]
    for instruction in ("mbarrier.init.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
                        "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.inval.shared::cta.b64",
                        "fence.proxy.async.shared::cta", "bar.sync 0"):
        assert instruction in ptx, instruction
    assert "cubin" in c.asm
    c = deadlock_kernel.compile("*i32", target=target)
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in c.asm["ptx"]


@needs_ptxas
def test_slices_and_permutes_lower():
    c = quadrant_kernel.compile("*fp16:16", "*fp16:16", M=M, N=N, layout=SRC, smem_layout=SMEM_LAYOUTS["nvmma128"])
    assert "ld.shared" in c.asm["ptx"] and "cubin" in c.asm


def test_the_shared_size_counts_the_buffers():
    c = quadrant_kernel.compile("*fp16:16", "*fp16:16", M=M, N=N, layout=SRC, smem_layout=SMEM_LAYOUTS["nvmma128"])
    assert c.metadata["shared"] >= M * N * 2


@needs_ptxas
def test_scratch_reuses_the_bytes_of_a_buffer_dead_at_its_op():
    """With the buffers ending at the limit, the reduction's scratch goes where ``small`` was (dead after the
    wait), not past the limit; the budget error lists it with the reduction's line."""
    func = scratch_in_a_gap_kernel._build([ir.PointerType(ir.float32)] * 2, {"STAGES": 113}, 4, {})
    from gluonkit.lower.memplan.smem import plan_shared_memory
    plan = plan_shared_memory(func)
    assert sorted((r.offset, r.nbytes) for r in plan.regions.values()) == [(0, 16), (16, 8), (1024, 231424)]
    assert [(r.op.name, r.offset, r.nbytes) for r in plan.scratch.values()] == [("reduce", 0, 16)]
    c = scratch_in_a_gap_kernel.compile("*fp32:16", "*fp32:16", STAGES=113, target="sm_90a")
    assert c.metadata["shared"] == 232448 and "cubin" in c.asm
    with pytest.raises(CompilationError, match=r"Required: 234496(.|\n)*16 bytes of scratch at offset 0: a reduction "
                                               r"across warps(.|\n)*# the sum"):  # one more stage: too much
        scratch_in_a_gap_kernel.compile("*fp32:16", "*fp32:16", STAGES=114, target="sm_90a")


def _dead_buffer_scratch_ir(stages=7, iters=2):
    return dead_buffer_scratch_kernel._build([ir.PointerType(ir.float32)] * 2, {"STAGES": stages, "ITERS": iters}, 4, {})


def test_a_conversion_fits_only_by_reusing_a_dead_buffer():
    """7 x 128 x 64 floats (229376 bytes) plus the conversion's 32768 bytes pass sm_90a's 232448: the scratch
    takes the dead buffer's first bytes, and the next iteration's store and the conversion wait for each
    other's readers at a barrier."""
    from gluonkit.lower.infer.solve import infer_layouts
    from gluonkit.lower.memplan.barriers import plan_barriers
    from gluonkit.lower.memplan.smem import plan_shared_memory
    func = _dead_buffer_scratch_ir()
    infer_layouts(func)
    plan = plan_shared_memory(func)
    (buffer,), (scratch,) = plan.regions.values(), plan.scratch.values()
    assert (buffer.offset, buffer.nbytes, scratch.op.name, scratch.offset, scratch.nbytes) == \
        (0, 229376, "convert_layout", 0, 32768)
    assert plan.size == 229376
    barriers = plan_barriers(func, plan)
    store = next(op for op in func.walk() if op.name == "local_store")
    assert barriers.needs_barrier(scratch.op) and barriers.needs_barrier(store)


def test_a_conversion_through_a_dead_buffer_computes_the_right_answer():
    x = np.random.default_rng(7).standard_normal((3, 128, 64)).astype(np.float32)
    out = np.full((128, 64), np.nan, np.float32)
    _interpret(dead_buffer_scratch_kernel, x, out, STAGES=7, ITERS=3)
    np.testing.assert_allclose(out, dead_buffer_scratch_expected(x), rtol=1e-6, atol=1e-6)


def test_the_interpreter_counts_scratch_in_the_budget():
    """The interpreter refuses what compiling refuses, with the same plan: the conversion's scratch is listed."""
    x = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float32)
    with pytest.raises(CompilationError, match=r"Required: 262144, Hardware limit: 232448(.|\n)*32768 bytes of scratch "
                                               r"at offset 229376: a layout conversion between warps(.|\n)*# the conversion"):
        _interpret(live_buffer_scratch_kernel, x, np.zeros_like(x))
    with pytest.raises(CompilationError, match="Required: 262144"):
        live_buffer_scratch_kernel.compile("*fp32:16", "*fp32:16", target="sm_90a")


@needs_ptxas
def test_a_conversion_through_a_dead_buffer_compiles_within_the_limit():
    c = dead_buffer_scratch_kernel.compile("*fp32:16", "*fp32:16", STAGES=7, ITERS=2, target="sm_90a")
    assert c.metadata["shared"] == 229376 and "cubin" in c.asm


def test_shared_memory_limit_lists_every_buffer():
    with pytest.raises(CompilationError) as err:
        too_much_kernel.compile("*fp32", STAGES=6)
    text = str(err.value)
    assert "out of resource: shared memory, Required: 294960, Hardware limit: 232448" in text
    assert "98304 bytes at offset 0: a [6, 128, 64] x bfloat16 buffer" in text
    assert "196608 bytes at offset 98304: a [6, 64, 256] x bfloat16 buffer" in text
    assert text.count("too_much_kernel") >= 1 and "gl.allocate_shared_memory(gl.int64" in text
    too_much_kernel.compile("*fp32", STAGES=4)  # 4 stages fit
