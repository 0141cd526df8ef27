"""``gl.warp_specialize``: the frontend's checks, the IR op, partitions in the interpreter, the lowering.

Kernels with a planted mistake carry a ``CASE`` constexpr; the faulty line is marked with a
``# CASE:<name>`` comment and every error must be reported there (number and source text).
"""

from __future__ import annotations

import inspect
import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gluonkit
import gluonkit.language as gl
from gluonkit import ir
from gluonkit.interpret import InterpreterError, Memory, run_grid
from gluonkit.interpret import partitions as interpret_partitions
from gluonkit.interpret.schedules import Schedule, schedules_for
from gluonkit.ir.warp_specialize import WARPGROUP, plan_partitions
from gluonkit.lang import ArgumentError, CompilationError, TypeMismatchError, UnsupportedSyntaxError
from gluonkit.language.nvidia.hopper import mbarrier
from gluonkit.lower.compiler import compile_function
from gluonkit.lower.infer.solve import infer_layouts
from gluonkit.lower.memplan.smem import plan_shared_memory
from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import producer_consumer  # noqa: E402
from interpreting import launch_interpreted  # noqa: E402
from kernel_checks import line_containing, marked_line, needs_ptxas  # noqa: E402

F32P = gl.pointer_type(gl.float32)


def _line_text(fn, line: int) -> str:
    lines, first = inspect.getsourcelines(fn.fn)
    return lines[line - first].split("#")[0].strip()


# ------------------------------------------------------------------ partition functions
@gluonkit.jit
def _store_partition(out, value, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, N, layout)
    gl.store(out + offs, gl.full([N], value, gl.float32, layout))


@gluonkit.jit
def _returns_sum(x_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    x = gl.load(x_ptr + gl.arange(0, N, layout))
    return x + 1.0, x * 2.0


@gluonkit.jit
def _returns_value(out, value, N: gl.constexpr):
    return value


@gluonkit.jit
def _returns_buffer(out, value, N: gl.constexpr):
    return gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))


@gluonkit.jit
def _takes_tensor(out, x, N: gl.constexpr):
    pass


@gluonkit.aggregate
class _Target:
    """What a worker writes: a pointer (or, wrongly, a distributed tensor) and a value."""
    out: gl.tensor
    value: gl.constexpr


@gluonkit.jit
def _store_to_target(target, N: gl.constexpr):
    _store_partition(target.out, target.value, N)


@gluonkit.jit
def _nested(out, value, N: gl.constexpr):
    gl.warp_specialize([(_store_partition, (out, value, N)), (_store_partition, (out, value, N))], [1])  # CASE:nested


@gluonkit.jit
def _warps_probe(out, value, N: gl.constexpr):
    gl.static_assert(gl.num_warps() == value, "the partition's warp count")


@gluonkit.jit
def errors_kernel(out, CASE: gl.constexpr):
    N: gl.constexpr = 128
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    x = gl.arange(0, N, layout).to(gl.float32)
    if CASE == "pair":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), _store_partition], [1])  # CASE:pair
    if CASE == "args":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, out)], [1])  # CASE:args
    if CASE == "warp_count":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [1, 1])  # CASE:warp_count
    if CASE == "reg_count":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [1], [24, 24])  # CASE:reg_count
    if CASE == "tensor_arg":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_takes_tensor, (out, x, N))], [1])  # CASE:tensor_arg
    if CASE == "tensor_in_aggregate":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_to_target, (_Target(x, 2.0), N))], [1])  # CASE:tensor_in_aggregate
    if CASE == "reg_multiple":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [1], [30])  # CASE:reg_multiple
    if CASE == "reg_range":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [1], [16])  # CASE:reg_range
    if CASE == "register_file":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N)),  # CASE:register_file
                            (_store_partition, (out, 3.0, N))], [4, 4], [256, 248])
    if CASE == "nested":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_nested, (out, 2.0, N))], [1])  # CASE:nested_call
    if CASE == "worker_returns":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_returns_value, (out, 2.0, N))], [1])  # CASE:worker_returns
    if CASE == "returns_buffer":
        gl.warp_specialize([(_returns_buffer, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [1])  # CASE:returns_buffer
    if CASE == "warps_not_pow2":
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [3])  # CASE:warps_not_pow2
    if CASE == "in_loop":
        for i in range(3):
            gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N))], [1])  # CASE:in_loop
    if CASE == "num_warps":
        gl.warp_specialize([(_warps_probe, (out, 4, N)), (_warps_probe, (out, 2, N)), (_warps_probe, (out, 1, N))],
                           [2, 1])


@pytest.mark.parametrize("case, error, fragment", [
    ("pair", ArgumentError, "partition 1 must be a (function, args) pair"),
    ("args", ArgumentError, "partition 1's arguments must be a tuple"),
    ("warp_count", ArgumentError, "1 worker partition(s) but 2 warp count(s)"),
    ("reg_count", ArgumentError, "1 worker partition(s) but 2 register budget(s)"),
    ("tensor_arg", TypeMismatchError, "gets a distributed tensor"),
    ("tensor_in_aggregate", TypeMismatchError, "as argument args[0].out"),
    ("reg_multiple", ArgumentError, "must be a multiple of 8 in [24, 256]"),
    ("reg_range", ArgumentError, "must be a multiple of 8 in [24, 256]"),
    ("register_file", ArgumentError, "do not fit in the CTA's 64512 registers"),
    ("worker_returns", TypeMismatchError, "workers return nothing"),
    ("warps_not_pow2", ArgumentError, "must be a power of two"),
    ("returns_buffer", TypeMismatchError, "returns a shared memory descriptor"),
    ("in_loop", CompilationError, "must be at the top level of the kernel"),
])
def test_mistakes_are_reported_at_the_users_line(case, error, fragment):
    with pytest.raises(error) as info:
        errors_kernel.build_ir([F32P], {"CASE": case}, 4, {})
    err = info.value
    line = marked_line(errors_kernel, f"CASE:{case}")
    assert err.loc.line == line, str(err)
    assert fragment in str(err)
    assert _line_text(errors_kernel, line) in str(err)


def test_nested_warp_specialize_is_reported_inside_the_partition():
    with pytest.raises(UnsupportedSyntaxError) as info:
        errors_kernel.build_ir([F32P], {"CASE": "nested"}, 4, {})
    err = info.value
    assert err.loc.line == marked_line(_nested, "CASE:nested")
    assert "cannot be nested" in str(err)
    assert err.loc.inlined_at.line == marked_line(errors_kernel, "CASE:nested_call")


def test_num_warps_inside_a_partition_is_the_partitions():
    func = errors_kernel.build_ir([F32P], {"CASE": "num_warps"}, 4, {})
    op = next(op for op in func.walk() if op.name == "warp_specialize")
    assert op.attrs["num_warps"] == (4, 2, 1)
    assert op.attrs["num_regs"] is None


# --------------------------------------------------------------------------- the IR op
@gluonkit.jit
def results_kernel(x_ptr, y_ptr, z_ptr, w_ptr, N: gl.constexpr):
    a, b = gl.warp_specialize([(_returns_sum, (x_ptr, N)), (_store_partition, (w_ptr, 3.0, N))], [1])
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, N, layout)
    gl.store(y_ptr + offs, a)
    gl.store(z_ptr + offs, b)


def test_the_default_partition_returns_its_values_and_the_op_prints():
    func = results_kernel.build_ir([F32P] * 4, {"N": 128}, 4, {})
    op = next(op for op in func.walk() if op.name == "warp_specialize")
    assert len(op.regions) == 2 and len(op.results) == 2
    text = ir.print_function(func)
    assert "warp_specialize" in text and "num_warps" in text
    x = np.random.default_rng().standard_normal(128).astype(np.float32)
    y, z, w = (np.full(128, np.nan, np.float32) for _ in range(3))
    memory = Memory()
    run_grid(func, (1,), [memory.register(v) for v in (x, y, z, w)], memory)
    np.testing.assert_array_equal(y, (x.astype(np.float64) + 1).astype(np.float32))
    np.testing.assert_array_equal(z, (x.astype(np.float64) * 2).astype(np.float32))
    np.testing.assert_array_equal(w, np.full(128, 3.0, np.float32))


@gluonkit.jit
def aggregate_args_kernel(y_ptr, w_ptr, N: gl.constexpr):
    gl.warp_specialize([(_store_to_target, (_Target(y_ptr, 5.0), N)), (_store_to_target, (_Target(w_ptr, 7.0), N))],
                       [1])


def test_partitions_take_aggregates():
    y, w = np.full(128, np.nan, np.float32), np.full(128, np.nan, np.float32)
    launch_interpreted(aggregate_args_kernel, (1,), y, w, N=128)
    np.testing.assert_array_equal(y, np.full(128, 5.0, np.float32))
    np.testing.assert_array_equal(w, np.full(128, 7.0, np.float32))


def test_the_verifier_rejects_a_worker_using_a_distributed_tensor():
    func = results_kernel._build([F32P] * 4, {"N": 128}, 4, {})  # a private copy to tamper with
    op = next(op for op in func.body.ops if op.name == "warp_specialize")
    store = next(o for o in op.regions[1].walk() if o.name == "store")
    outside = ir.Operation("constant", [], [store.operands[1].type], {"value": 0.0}, loc=op.loc)
    outside.parent = func.body
    func.body.ops.insert(func.body.ops.index(op), outside)
    store.operands[1] = outside.results[0]
    with pytest.raises(CompilationError) as info:
        ir.verify(func)
    assert "worker partition 0 uses a tensor" in str(info.value)
    assert info.value.loc.line == store.loc.line


def test_worker_layouts_are_inferred_with_the_workers_warps():
    @gluonkit.jit
    def auto_worker(out, N: gl.constexpr):
        gl.store(out + gl.arange(0, N), gl.full([N], 5.0, gl.float32))

    @gluonkit.jit
    def kernel(out, out2, N: gl.constexpr):
        gl.warp_specialize([(auto_worker, (out, N)), (auto_worker, (out2, N))], [2])

    func = kernel._build([F32P, F32P], {"N": 256}, 4, {})
    infer_layouts(func)
    ir.verify(func, concrete=True)
    op = next(op for op in func.walk() if op.name == "warp_specialize")
    for region, warps in zip(op.regions, (4, 2)):
        arange = next(o for o in region.walk() if o.name == "arange")
        ll = arange.results[0].type.layout.to_linear_layout([256])
        assert ll.in_dim_size("warp") == warps
    a, b = np.full(256, np.nan, np.float32), np.full(256, np.nan, np.float32)
    memory = Memory()
    run_grid(func, (1,), [memory.register(a), memory.register(b)], memory)
    assert (a == 5).all() and (b == 5).all()


def test_the_partition_plan():
    plan = plan_partitions(4, [1, 4], [24, 240])
    assert plan.starts == (0, 4, 8) and plan.total_warps == 12 and plan.num_threads == 384
    assert plan.group_regs == (None, 24, 240)
    assert plan.initial_regs == 168  # 65536 / 384 threads, down to a multiple of 8
    assert plan.default_regs == 240  # (384 threads * 168 - 128 * (24 + 240)) / 128: the CTA's pool, not the 64K file
    two_small = plan_partitions(4, [1, 1], [24, 48])
    assert two_small.starts == (0, 4, 5) and two_small.group_regs == (None, 48)  # one warpgroup: the larger
    assert plan_partitions(8, [2], None).starts == (0, 8)
    with pytest.raises(ValueError, match="whole warpgroups"):
        plan_partitions(2, [1], [24])


# ------------------------------------------------------------------------ interpreter
def _producer_consumer(M=200, N=32, BM=32, STAGES=2, programs=2):
    x = np.random.default_rng().standard_normal((M, N)).astype(np.float16)
    y = np.full((M, N), np.nan, np.float32)
    producer_consumer.square_plus_one(x, y, BM=BM, STAGES=STAGES, programs=programs)
    return x, y


@pytest.mark.parametrize("M, BM, STAGES, programs", [(200, 32, 2, 2), (64, 16, 3, 1), (96, 32, 2, 4)])
def test_producer_consumer_example_matches_numpy(monkeypatch, M, BM, STAGES, programs):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    x, y = _producer_consumer(M=M, BM=BM, STAGES=STAGES, programs=programs)
    assert np.abs(y - producer_consumer.reference(x)).max() < 1e-6


def test_schedules_are_explored_within_the_budget(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    seen = []
    original = interpret_partitions.Scheduler.run

    def recording(self):
        seen.append(self.schedule)
        return original(self)

    monkeypatch.setattr(interpret_partitions.Scheduler, "run", recording)
    x, y = _producer_consumer(programs=1)
    assert seen == [Schedule("forward"), Schedule("reverse"), Schedule("random", 0)]
    assert np.abs(y - producer_consumer.reference(x)).max() < 1e-6
    seen.clear()
    monkeypatch.setenv("GLUONKIT_INTERPRET_SCHEDULES", "5")
    _producer_consumer(programs=1)
    assert seen == [Schedule("forward"), Schedule("reverse")] + [Schedule("random", s) for s in range(3)]
    func = results_kernel.build_ir([F32P] * 4, {"N": 128}, 4, {})
    assert len(schedules_for(func, 1)) == 1
    assert schedules_for(func, 7)[-1] == Schedule("random", 4)


@gluonkit.jit
def _waiter(bar, PARITY: gl.constexpr):
    mbarrier.wait(bar, PARITY)  # CASE:waiter


@gluonkit.jit
def _arriver(bar, other, PARITY: gl.constexpr):
    mbarrier.wait(other, PARITY)  # CASE:arriver
    mbarrier.arrive(bar)


@gluonkit.jit
def deadlock_kernel(PARITY: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    other = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.init(other, count=1)
    gl.warp_specialize([(_waiter, (bar, 0)), (_arriver, (bar, other, PARITY))], [1])


def test_a_deadlock_lists_what_every_partition_waits_on():
    ok = deadlock_kernel.build_ir([], {"PARITY": 1}, 4, {})  # parity 1 of a fresh barrier: passes at once
    run_grid(ok, (1,), [], Memory())
    func = deadlock_kernel.build_ir([], {"PARITY": 0}, 4, {})  # waits for a phase no one completes
    with pytest.raises(InterpreterError) as info:
        run_grid(func, (1,), [], Memory())
    err = info.value
    text = str(err)
    assert "deadlock" in text
    assert err.loc.line in (marked_line(_waiter, "CASE:waiter"), marked_line(_arriver, "CASE:arriver"))
    for fn, marker in ((_waiter, "CASE:waiter"), (_arriver, "CASE:arriver")):
        assert f"line {marked_line(fn, marker)} for parity 0" in text
    assert "the default partition" in text and "worker partition 0" in text
    assert "forward schedule" in text


# --------------------------------------------------------------------------- lowering
def _producer_consumer_ir(num_warps=4):
    BM, N = 64, 128
    x_desc, y_desc = producer_consumer.descriptors(np.zeros((256, N), np.float16), np.zeros((256, N), np.float32), BM)
    types = [ir.TensorDescType((BM, N), ir.float16, x_desc.layout), ir.TensorDescType((BM, N), ir.float32,
                                                                                      y_desc.layout), ir.int32]
    return producer_consumer.producer_consumer_kernel._build(types, {"STAGES": 3}, num_warps, {})


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_producer_consumer_lowers_and_ptxas_accepts_it(target):
    compiled = compile_function(_producer_consumer_ir(), target)
    ptx = compiled.asm["ptx"]
    assert compiled.metadata["num_threads"] == 256  # 4 compute warps + 1 load warp, a whole warpgroup
    assert ".maxntid 256" in ptx and ".maxnreg 256" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx
    assert "shfl.sync.idx.b32" in ptx
    assert ptx.count("barrier.sync 1, 256;") == 4  # fork and join, on both sides (not aligned: two call sites)
    assert "bar.sync 0, 128;" in ptx  # thread_barrier in the compute partition: its 128 threads only
    assert "bar.sync 0;" not in ptx  # no CTA-wide barrier: the worker warps would never reach it
    assert "cubin" in compiled.asm and compiled.metadata["spill_stores"] == 0


@needs_ptxas
def test_register_budgets_become_setmaxnreg_per_warpgroup():
    @gluonkit.jit
    def kernel(out, N: gl.constexpr):
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N)),
                            (_store_partition, (out, 3.0, N))], [1, 4], [24, 240])

    compiled = compile_function(kernel._build([F32P], {"N": 128}, 4, {}), "sm_90a")
    ptx = compiled.asm["ptx"]
    assert ".maxntid 384" in ptx and ".maxnreg 168" in ptx
    report = compiled.metadata["partitions"]
    assert [(p["first_warp"], p["num_warps"], p["registers"]) for p in report] == [(0, 4, 240), (4, 1, 24), (8, 4, 240)]
    for text in ("setmaxnreg.dec.sync.aligned.u32 24;",
                 "setmaxnreg.inc.sync.aligned.u32 240;"):
        assert text in ptx


@needs_ptxas
def test_a_launch_maxnreg_is_the_pool_the_budgets_share():
    """As in Gluon, ``maxnreg`` is what every thread starts with: the default partition gets
    what the workers' budgets leave of ``maxnreg x threads`` (384 x 128 - 128 x (24 + 240) =
    128 x 120 here); a cap the register file cannot hold, or one that leaves the default
    partition under 24, is an error at the call."""
    @gluonkit.jit
    def kernel(out, N: gl.constexpr):
        gl.warp_specialize([(_store_partition, (out, 1.0, N)), (_store_partition, (out, 2.0, N)),  # op
                            (_store_partition, (out, 3.0, N))], [1, 4], [24, 240])

    compiled = compile_function(kernel._build([F32P], {"N": 128}, 4, {}, maxnreg=128), "sm_90a")
    ptx = compiled.asm["ptx"]
    assert ".maxnreg 128" in ptx and "setmaxnreg.dec.sync.aligned.u32 120;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 240;" in ptx and "setmaxnreg.dec.sync.aligned.u32 24;" in ptx
    assert [p["registers"] for p in compiled.metadata["partitions"]] == [120, 24, 240]
    for maxnreg, message in ((200, r"maxnreg=200 registers for each of the CTA's 384 threads is more than the "
                                   r"65536-register file holds \(168 at most\); launch with maxnreg <= 168"),
                             (64, r"the register budgets do not fit in the CTA's 24576 registers")):
        with pytest.raises(ArgumentError, match=message) as info:
            kernel._build([F32P], {"N": 128}, 4, {}, maxnreg=maxnreg)
        assert info.value.loc.line == line_containing(kernel.fn, "# op")


def test_buffers_of_different_partitions_never_share_bytes():
    @gluonkit.jit
    def scratchpad(out, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
        buf = gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        buf.store(gl.full([N], 1.0, gl.float32, layout))
        gl.store(out + gl.arange(0, N, layout), buf.load(layout))

    @gluonkit.jit
    def kernel(out, out2, N: gl.constexpr):
        gl.warp_specialize([(scratchpad, (out, N)), (scratchpad, (out2, N))], [1])

    func = kernel._build([F32P, F32P], {"N": 128}, 4, {})
    infer_layouts(func)
    regions = plan_shared_memory(func).ordered()
    assert len(regions) == 2
    assert regions[0].offset + regions[0].nbytes <= regions[1].offset


# --------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("M, N, programs", [(8192, 128, 132), (1000, 64, 7)])
def test_producer_consumer_on_the_gpu_matches_numpy(M, N, programs):
    torch = pytest.importorskip("torch")
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    y = torch.full((M, N), float("nan"), device="cuda")
    producer_consumer.square_plus_one(x, y, BM=64, STAGES=3, programs=programs)
    torch.cuda.synchronize()
    ref = producer_consumer.reference(x.cpu().numpy())
    assert np.abs(y.cpu().numpy() - ref).max() < 1e-5


@gluonkit.jit
def _row_sums(x_ptr, out_ptr, N: gl.constexpr):
    """Sums of the rows of an N x N tile: a reduction across warps and a layout conversion (scratch memory)."""
    layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, gl.num_warps()], [1, 0])
    out_layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    rows = gl.arange(0, N, gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, gl.SliceLayout(0, layout))
    x = gl.load(x_ptr + rows[:, None] * N + cols[None, :])
    sums = gl.convert_layout(gl.sum(x, axis=1), out_layout)
    gl.store(out_ptr + gl.arange(0, N, out_layout), sums)


@gluonkit.jit
def scratch_kernel(x_ptr, y_ptr, out_ptr, out2_ptr, N: gl.constexpr):
    gl.warp_specialize([(_row_sums, (x_ptr, out_ptr, N)), (_row_sums, (y_ptr, out2_ptr, N))], [4])


def _scratch_kernel_ir():
    return scratch_kernel._build([F32P] * 4, {"N": 64}, 4, {})


def test_partitions_reduce_across_their_own_warps_in_the_interpreter():
    rng = np.random.default_rng()
    x, y = rng.standard_normal((2, 64, 64)).astype(np.float32)
    out, out2 = np.full(64, np.nan, np.float32), np.full(64, np.nan, np.float32)
    func = _scratch_kernel_ir()
    infer_layouts(func)
    memory = Memory()
    run_grid(func, (1,), [memory.register(a) for a in (x, y, out, out2)], memory)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out2, y.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_partitions_get_their_own_scratch_and_named_barriers(target):
    compiled = compile_function(_scratch_kernel_ir(), target)
    ptx = compiled.asm["ptx"]
    assert compiled.metadata["num_threads"] == 256
    assert "bar.sync 0, 128;" in ptx and "bar.sync 2, 128;" in ptx and "bar.sync 0;" not in ptx
    alone = compile_function(single_row_sums._build([F32P] * 2, {"N": 64}, 4, {}), target).metadata["shared"]
    assert alone > 0 and compiled.metadata["shared"] == 2 * alone  # each partition's scratch after the other's


@gluonkit.jit
def single_row_sums(x_ptr, out_ptr, N: gl.constexpr):
    _row_sums(x_ptr, out_ptr, N)


@gluonkit.jit
def _overwrite(buf, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    buf.store(gl.full([N], 2.0, gl.float32, layout))  # CASE:race_write


@gluonkit.jit
def _read_back(buf, out, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    gl.store(out + gl.arange(0, N, layout), buf.load(layout))  # CASE:race_read


@gluonkit.jit
def race_kernel(out, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    buf = gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    buf.store(gl.full([N], 1.0, gl.float32, layout))
    gl.warp_specialize([(_read_back, (buf, out, N)), (_overwrite, (buf, N))], [1])


@pytest.mark.parametrize("policy", ["forward", "reverse"])
def test_an_unsynchronized_write_and_read_in_two_partitions_is_a_race(monkeypatch, policy):
    """Forward order reads first (the write is reported); reverse order writes first (the read is)."""
    func = race_kernel.build_ir([F32P], {"N": 128}, 4, {})
    out = np.zeros(128, np.float32)
    memory = Memory()
    monkeypatch.setattr("gluonkit.interpret.engine.schedules_for", lambda f: [Schedule(policy)])
    with pytest.raises(InterpreterError) as info:
        run_grid(func, (1,), [memory.register(out)], memory)
    err, text = info.value, str(info.value)
    write, read = marked_line(_overwrite, "CASE:race_write"), marked_line(_read_back, "CASE:race_read")
    assert "race" in text and "nothing orders the two" in text
    first, second = (read, write) if policy == "forward" else (write, read)
    assert err.loc.line == second and f"at line {first}" in text


@gluonkit.jit
def _synced_store(out, value, N: gl.constexpr):
    _store_partition(out, value, N)
    gl.thread_barrier()


@gluonkit.jit
def configurable_kernel(out, WORKERS: gl.constexpr, REGS: gl.constexpr):
    N: gl.constexpr = 128
    if len(WORKERS) == 1:
        gl.warp_specialize([(_synced_store, (out, 0.0, N)), (_synced_store, (out + N, 1.0, N))], WORKERS, REGS)
    if len(WORKERS) == 3:
        gl.warp_specialize([(_synced_store, (out, 0.0, N)), (_synced_store, (out + N, 1.0, N)),
                            (_synced_store, (out + 2 * N, 2.0, N)), (_synced_store, (out + 3 * N, 3.0, N))],
                           WORKERS, REGS)


@needs_ptxas
@pytest.mark.parametrize("num_warps, workers, regs", [
    (4, [2], None),                # a 2-warp worker, no budgets
    (8, [4], [40]),                # a whole-warpgroup worker beside 8 default warps
    (4, [1, 1, 2], [24, 32, 24]),  # three workers sharing one warpgroup (its budget: the largest)
    (1, [1], None),                # a one-warp kernel with a one-warp worker
])
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_partition_configurations_assemble_and_run(num_warps, workers, regs, target):
    constexprs = {"WORKERS": tuple(workers), "REGS": None if regs is None else tuple(regs)}
    compiled = compile_function(configurable_kernel._build([F32P], constexprs, num_warps, {}), target)
    plan = plan_partitions(num_warps, workers, regs)
    assert compiled.metadata["num_threads"] == plan.num_threads
    assert "cubin" in compiled.asm and compiled.metadata["spill_stores"] == 0
    ptx = compiled.asm["ptx"]
    for i, count in enumerate(workers):
        assert f"bar.sync {2 + i}, {32 * count};" in ptx  # each worker's own named barrier
    out = np.full(128 * (len(workers) + 1), np.nan, np.float32)
    memory = Memory()
    func = configurable_kernel._build([F32P], constexprs, num_warps, {})
    infer_layouts(func)
    run_grid(func, (1,), [memory.register(out)], memory)
    np.testing.assert_array_equal(out, np.repeat(np.arange(len(workers) + 1, dtype=np.float32), 128))


@settings(max_examples=200)
@given(st.sampled_from([4, 8]), st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3),
       st.data())
def test_register_budgets_never_exceed_what_the_cta_is_launched_with(default_warps, worker_warps, data):
    """setmaxnreg.inc waits for registers other warpgroups released: asking for more than the
    CTA holds hangs the GPU (seen on the H100), so every accepted plan fits in its pool."""
    regs = data.draw(st.lists(st.integers(3, 32).map(lambda r: 8 * r), min_size=len(worker_warps),
                              max_size=len(worker_warps)))
    maxnreg = data.draw(st.one_of(st.none(), st.integers(24, 256)))
    try:
        plan = plan_partitions(default_warps, worker_warps, regs, maxnreg)
    except ValueError:
        return
    budgets = [plan.default_regs if r is None else r for r in plan.group_regs]
    assert 32 * WARPGROUP * sum(budgets) <= plan.num_threads * plan.initial_regs <= 65536
    assert maxnreg is None or plan.initial_regs == maxnreg
