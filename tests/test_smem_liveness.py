"""Shared-memory allocation planning with lifetimes (:mod:`gluonkit.lower.memplan.smem`).

Buffers that are never live together share bytes; buffers that are live together never do.
Kernels are compiled for sm_90a on the CPU with the plan captured as the lowering makes it,
and run in the interpreter to check they still compute the right answer.  A property test
plans random straight-line code with one loop level, buffers and layout conversions through
scratch memory, and checks every pair of overlapping lifetimes (from its own model of the
program) against the placement.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.ir.memdesc import alignment_of
from gluonkit.ir.types import TensorDescType
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.lower import context
from gluonkit.lower.memplan.liveness import buffer_lifetimes
from gluonkit.lower.memplan.smem import SCRATCH_ALIGNMENT, plan_shared_memory
from gluonkit.nvidia.hopper import TensorDescriptor
from smem_kernels import L, L_T, SMEM, tile_pointers  # noqa: E402
from interpreting import launch_interpreted  # noqa: E402
from kernel_checks import needs_ptxas

M, N = 32, 32
TILE_BYTES = M * N * 4


def _compile(monkeypatch, kernel, *args, **kwargs):
    """``(compiled kernel, plan, IR function)`` for sm_90a, the plan captured as lowering makes it."""
    captured = []
    plan_shared_memory_ = context.plan_shared_memory

    def capture(func):
        plan = plan_shared_memory_(func)
        captured.append((plan, func))
        return plan

    monkeypatch.setattr(context, "plan_shared_memory", capture)
    compiled = kernel.compile(*args, target="sm_90a", **kwargs)
    return (compiled, *captured[-1])


def _regions_by_line(plan, kernel, markers):
    """``{marker: region}`` for the allocations on the lines ending in ``# marker``."""
    lines, first = inspect.getsourcelines(kernel.fn)
    line_of = {m: first + next(i for i, t in enumerate(lines) if t.rstrip().endswith(f"# {m}")) for m in markers}
    return {m: next(r for r in plan.regions.values() if r.op.loc.line == line) for m, line in line_of.items()}


def _offsets_by_line(plan, kernel, markers):
    """``{marker: offset}`` for the allocations on the lines ending in ``# marker``."""
    return {m: r.offset for m, r in _regions_by_line(plan, kernel, markers).items()}


# ---------------------------------------------------------- (a) one buffer after another
@gluonkit.jit
def transpose_twice_kernel(x_ptr, y_ptr):
    """Two layout conversions through two buffers; the second is allocated after the first's last use."""
    first = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=gl.load(tile_pointers(x_ptr, L)))  # FIRST
    t = first.load(L_T)
    second = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=t * 2.0)  # SECOND
    gl.store(tile_pointers(y_ptr, L), second.load(L) + 1.0)


def test_buffers_used_one_after_the_other_share_space(monkeypatch):
    compiled, plan, _ = _compile(monkeypatch, transpose_twice_kernel, "*fp32", "*fp32")
    offsets = _offsets_by_line(plan, transpose_twice_kernel, ["FIRST", "SECOND"])
    assert offsets == {"FIRST": 0, "SECOND": 0}
    assert compiled.metadata["shared"] == TILE_BYTES  # the larger buffer, not the sum
    # Write, read, write, read: with separate buffers only the two reads wait; sharing
    # bytes makes the second buffer's first write wait for every thread's read of the first.
    assert compiled.asm["ptx"].count("bar.sync 0") == 3


@needs_ptxas
def test_shared_buffers_assemble_with_ptxas(monkeypatch):
    compiled, _, _ = _compile(monkeypatch, transpose_twice_kernel, "*fp32", "*fp32")
    assert "cubin" in compiled.asm


def test_shared_buffers_compute_the_right_answer_in_the_interpreter():
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    y = np.zeros_like(x)
    launch_interpreted(transpose_twice_kernel, (1,), x, y)
    np.testing.assert_array_equal(y, x * 2.0 + 1.0)


# ------------------------------------------------------------------------ (b) loops
@gluonkit.jit
def loop_kernel(x_ptr, y_ptr, n):
    x = gl.load(tile_pointers(x_ptr, L))
    before = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=x)  # BEFORE
    y = before.load(L)
    looped = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=y)  # LOOPED
    kept = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=y)  # KEPT
    acc = gl.zeros([32, 32], gl.float32, layout=L)
    for i in range(n):
        v = looped.load(L)
        inner = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=v)  # INNER
        acc += inner.load(L)
    after = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=acc)  # AFTER
    gl.store(tile_pointers(y_ptr, L), after.load(L) + kept.load(L))


def test_a_buffer_read_in_a_loop_lives_through_the_whole_loop(monkeypatch):
    compiled, plan, func = _compile(monkeypatch, loop_kernel, "*fp32", "*fp32", "i32")
    offsets = _offsets_by_line(plan, loop_kernel, ["BEFORE", "LOOPED", "KEPT", "INNER", "AFTER"])
    # BEFORE is dead once LOOPED is allocated; INNER, allocated after LOOPED's last read in
    # program order, must not take its bytes: the next iteration reads LOOPED again.  KEPT
    # is live across the loop and shares with nothing; AFTER reuses LOOPED's bytes.
    assert offsets == {"BEFORE": 0, "LOOPED": 0, "KEPT": TILE_BYTES, "INNER": 2 * TILE_BYTES, "AFTER": 0}
    assert compiled.metadata["shared"] == 3 * TILE_BYTES
    order = list(func.walk())
    loop = next(op for op in order if op.name == "for")
    looped = _regions_by_line(plan, loop_kernel, ["LOOPED"])["LOOPED"]
    assert buffer_lifetimes(func)[looped.op.results[0].uid].end == order.index(loop.regions[0].terminator)


def test_loop_kernel_computes_the_right_answer_in_the_interpreter():
    x = np.random.default_rng(1).standard_normal((M, N)).astype(np.float32)
    y = np.zeros_like(x)
    launch_interpreted(loop_kernel, (1,), x, y, 3)
    np.testing.assert_allclose(y, 4 * x, rtol=1e-6)


@needs_ptxas
def test_loop_kernel_assembles_with_ptxas(monkeypatch):
    compiled, _, _ = _compile(monkeypatch, loop_kernel, "*fp32", "*fp32", "i32")
    assert "cubin" in compiled.asm


# --------------------------------------------------------------- (e) asynchronous uses
@gluonkit.jit
def tma_store_kernel(desc, y_ptr, EARLY_WAIT: gl.constexpr):
    src = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)  # SRC
    src.store(gl.full([32, 32], 1.0, gl.float16, layout=L))
    fence_async_shared()
    tma.async_store(desc, [0, 0], src)
    if EARLY_WAIT >= 0:
        tma.store_wait(EARLY_WAIT)
    later = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)  # LATER
    later.store(gl.full([32, 32], 2.0, gl.float16, layout=L))
    gl.store(tile_pointers(y_ptr, L), later.load(L))
    tma.store_wait(0)


def _tma_desc_type():
    return TensorDescType((32, 32), ir.float16, gl.NVMMASharedLayout.get_default_for([32, 32], gl.float16))


@pytest.mark.parametrize("early_wait, shared", [(-1, False), (1, False), (0, True)])
def test_a_tma_store_source_is_not_reused_until_the_store_retires(monkeypatch, early_wait, shared):
    compiled, plan, _ = _compile(monkeypatch, tma_store_kernel, _tma_desc_type(), "*fp16", EARLY_WAIT=early_wait)
    offsets = _offsets_by_line(plan, tma_store_kernel, ["SRC", "LATER"])
    assert (offsets["SRC"] == offsets["LATER"]) == shared
    assert compiled.metadata["shared"] == (1 if shared else 2) * 32 * 32 * 2


def test_an_unretired_async_use_lives_to_the_end_of_the_function():
    func = tma_store_kernel.build_ir([_tma_desc_type(), gl.pointer_type(gl.float16)], dict(EARLY_WAIT=1))
    src = next(op for op in func.walk() if op.name == "local_alloc")
    assert buffer_lifetimes(func)[src.results[0].uid].end >= [op.name for op in func.walk()].index("return") - 1


@needs_ptxas
@pytest.mark.parametrize("early_wait", [-1, 0])
def test_tma_store_kernel_assembles_and_runs_in_the_interpreter(monkeypatch, early_wait):
    compiled, _, _ = _compile(monkeypatch, tma_store_kernel, _tma_desc_type(), "*fp16", EARLY_WAIT=early_wait)
    assert "cubin" in compiled.asm
    out = np.zeros((M, N), np.float16)
    y = np.zeros((M, N), np.float16)
    desc = TensorDescriptor.from_tensor(out, [32, 32], gl.NVMMASharedLayout.get_default_for([32, 32], gl.float16))
    launch_interpreted(tma_store_kernel, (1,), desc, y, EARLY_WAIT=early_wait)
    assert (out == 1.0).all() and (y == 2.0).all()


# -------------------------------------------------------------- mbarriers
@gluonkit.jit
def barrier_kernel(y_ptr, INVALIDATE: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # BAR
    mbarrier.init(bar, count=1)
    mbarrier.arrive(bar)
    mbarrier.wait(bar, 0)
    if INVALIDATE:
        mbarrier.invalidate(bar)
    three = gl.full([32, 32], 3.0, gl.float32, layout=L)
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=three)  # BUF
    gl.store(tile_pointers(y_ptr, L), buf.load(L))


@pytest.mark.parametrize("invalidate", [False, True])
def test_an_mbarrier_memory_is_reused_only_after_invalidation(monkeypatch, invalidate):
    _, plan, _ = _compile(monkeypatch, barrier_kernel, "*fp32", INVALIDATE=invalidate)
    offsets = _offsets_by_line(plan, barrier_kernel, ["BAR", "BUF"])
    assert (offsets["BUF"] == offsets["BAR"]) == invalidate


# -------------------------------------------------------------- (d) the device limit
@gluonkit.jit
def too_big_kernel(y_ptr, ROWS: gl.constexpr):
    first = gl.allocate_shared_memory(gl.float32, [ROWS, 256], SMEM)
    second = gl.allocate_shared_memory(gl.float32, [ROWS, 256], SMEM)
    third = gl.allocate_shared_memory(gl.float32, [ROWS, 256], SMEM)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.wait(bar, 0, deps=[first, second, third])  # all live here (compiled, never run)
    gl.store(y_ptr, 1.0)


def test_the_limit_error_lists_every_live_buffer_with_its_offset_and_line():
    with pytest.raises(CompilationError) as err:
        too_big_kernel.compile("*fp32", ROWS=128, target="sm_90a")
    text = str(err.value)
    size = 128 * 256 * 4
    assert f"out of resource: shared memory, Required: {3 * size + 8}, Hardware limit: 232448 (sm_90a)" in text
    for i, name in enumerate(["first", "second", "third"]):
        assert f"{size} bytes at offset {i * size}: a [128, 256] x float32 buffer" in text
        assert f"{name} = gl.allocate_shared_memory" in text
    assert f"8 bytes at offset {3 * size}: a [1] x int64 buffer" in text
    assert "buffers whose lifetimes do not overlap share space" in text
    too_big_kernel.compile("*fp32", ROWS=64, target="sm_90a")


# ------------------------------------- (c) property: live buffers and scratch never share
LAYOUTS = [gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), gl.NVMMASharedLayout.get_default_for([8, 64], gl.float16),
           gl.SwizzledSharedLayout(8, 2, 4, [1, 0])]
CONVERT_SIZES = [16, 32, 64]  # f32 tiles of 1, 4 and 16 KiB


@st.composite
def programs(draw):
    """Events ``("alloc", layout index, stages, in_loop)`` / ``("use", buffer, view, in_loop)`` /
    ``("convert", tile size, None, in_loop)``.

    Straight-line code where a run of events may sit inside one ``for`` loop; a use refers
    to an earlier allocation that is visible there (not one made inside an earlier loop); a
    conversion moves a tile between warps through scratch memory.
    """
    events, allocated, loop_state = [], [], 0  # loop_state: 0 before, 1 inside, 2 after the loop
    for _ in range(draw(st.integers(1, 14))):
        if loop_state < 2 and draw(st.integers(0, 5)) == 0:
            loop_state += 1
        in_loop = loop_state == 1
        visible = [i for i, (_, _, _, inner) in enumerate(allocated) if in_loop or not inner]
        if draw(st.integers(0, 3)) == 0:
            events.append(("convert", draw(st.sampled_from(CONVERT_SIZES)), None, in_loop))
        elif visible and draw(st.booleans()):
            events.append(("use", draw(st.sampled_from(visible)), draw(st.booleans()), in_loop))
        else:
            alloc = ("alloc", draw(st.integers(0, len(LAYOUTS) - 1)), draw(st.integers(1, 3)), in_loop)
            allocated.append(alloc)
            events.append(alloc)
    return events


def _build(events):
    """The IR of ``events``, each allocation's expected ``(start, end)`` in walk order, and each
    conversion with its position."""
    func = ir.Function("random", [], [])
    builder = ir.Builder(func.body)
    zero = builder.create("constant", [], [ir.int32], {"value": 0}).result
    positions = [1]  # the next op's position in walk order (the constant is 0)
    allocs, spans, loop, converts = [], [], None, []

    def emit(name, operands, types, attrs=None):
        positions[0] += 1
        return builder.create(name, operands, types, attrs or {})

    for kind, a, b, in_loop in events:
        if in_loop and loop is None:
            body = ir.Block([ir.int32], ["i"])
            positions[0] += 1
            loop = builder.create("for", [zero, zero, zero], [], {}, [body])
            builder.block = body
        if not in_loop and loop is not None and builder.block is not func.body:
            positions[0] += 1  # the yield
            builder.create("yield")
            loop_end = positions[0] - 1
            for i, (start, end, inside, used_inside) in enumerate(spans):
                if used_inside and not inside:
                    spans[i] = (start, max(end, loop_end), inside, False)
            builder.block = func.body
        if kind == "convert":
            tile = emit("constant", [], [ir.TensorType(ir.float32, (a, a), L)], {"value": 1.0}).result
            converts.append((emit("convert_layout", [tile], [ir.TensorType(ir.float32, (a, a), L_T)]), positions[0] - 1))
        elif kind == "alloc":
            ty = ir.SharedMemoryDescType(ir.float16, (b, 8, 64), LAYOUTS[a], (b, 8, 64))
            op = emit("local_alloc", [], [ty])
            allocs.append(op)
            spans.append((positions[0] - 1, positions[0] - 1, in_loop, False))
        else:
            value = allocs[a].results[0]
            if b:  # through a view of stage 0
                stage = ir.SharedMemoryDescType(ir.float16, (8, 64), value.type.layout, (8, 64))
                value = emit("memdesc_index", [value, zero], [stage]).result
            emit("local_load", [value], [ir.TensorType(ir.float16, tuple(value.type.shape), L)])
            start, _, inside, used_inside = spans[a]
            spans[a] = (start, positions[0] - 1, inside, used_inside or (in_loop and not inside))
    if builder.block is not func.body:
        positions[0] += 1
        builder.create("yield")
        loop_end = positions[0] - 1
        spans = [(s, max(e, loop_end) if used and not inside else e, inside, False) for s, e, inside, used in spans]
        builder.block = func.body
    builder.create("return")
    return func, allocs, [(s, e) for s, e, _, _ in spans], converts


@given(programs())
def test_buffers_and_scratch_whose_lifetimes_overlap_never_share_bytes(events):
    func, allocs, spans, converts = _build(events)
    plan = plan_shared_memory(func)
    lifetimes = buffer_lifetimes(func)
    regions = [plan.regions[op.results[0].uid] for op in allocs]
    for op, region, (start, end) in zip(allocs, regions, spans):
        assert (lifetimes[op.results[0].uid].start, lifetimes[op.results[0].uid].end) == (start, end)
        assert region.offset % alignment_of(op.results[0].type.layout) == 0
        assert region.nbytes == op.results[0].type.alloc_shape[0] * 8 * 64 * 2
    assert set(plan.scratch) == {id(op) for op, _ in converts}
    for op, _ in converts:  # a transpose of warps: the whole f32 tile goes through scratch
        region = plan.scratch_of(op)
        assert region.offset % SCRATCH_ALIGNMENT == 0 and region.nbytes == op.results[0].type.numel * 4
    regions += [plan.scratch_of(op) for op, _ in converts]
    spans += [(pos, pos) for _, pos in converts]  # scratch is live at its op alone, in a loop too
    assert plan.size == max(r.offset + r.nbytes for r in regions) if regions else plan.size == 0
    for i in range(len(regions)):
        for j in range(i):
            live_together = spans[i][0] <= spans[j][1] and spans[j][0] <= spans[i][1]
            apart = (regions[i].offset + regions[i].nbytes <= regions[j].offset
                     or regions[j].offset + regions[j].nbytes <= regions[i].offset)
            if live_together:
                assert apart, (events, i, j)


def test_the_plan_shares_when_nothing_overlaps():
    """Three buffers each used right after its allocation all start at byte 0."""
    events = [("alloc", 0, 1, False), ("use", 0, False, False), ("alloc", 1, 2, False),
              ("use", 1, True, False), ("alloc", 2, 1, False), ("use", 2, False, False)]
    func, allocs, _, _ = _build(events)
    plan = plan_shared_memory(func)
    assert [plan.regions[op.results[0].uid].offset for op in allocs] == [0, 0, 0]
    assert plan.size == 2 * 8 * 64 * 2


# ------------------------------------------------ hand-built IR: wgmma and control flow
def _smem(stages=1):
    return ir.SharedMemoryDescType(ir.float16, (stages, 8, 64), LAYOUTS[0], (stages, 8, 64))


@pytest.mark.parametrize("outstanding, retired", [(0, True), (1, False)])
def test_an_async_wgmma_operand_lives_until_a_wait_retires_every_group(outstanding, retired):
    """``a`` feeds an async wgmma inside a loop; the wait after the loop ends its life only if it waits for all."""
    func = ir.Function("wgmma", [], [])
    b = ir.Builder(func.body)
    zero = b.create("constant", [], [ir.int32], {"value": 0}).result
    a = b.create("local_alloc", [], [_smem()]).result
    body = ir.Block([ir.int32], ["k"])
    b.create("for", [zero, zero, zero], [], {}, [body])
    with b.at_end_of(body):
        b.create("warpgroup_mma", [a, a, zero, zero], [ir.float32], {"is_async": True})
        b.create("yield")
    wait = b.create("warpgroup_mma_wait", [], [], {"num_outstanding": outstanding})
    later = b.create("local_alloc", [], [_smem()]).result
    b.create("local_load", [later], [ir.float16])
    b.create("return")
    order = list(func.walk())
    lifetime = buffer_lifetimes(func)[a.uid]
    assert lifetime.end == (order.index(wait) if retired else len(order))
    assert lifetime.end > order.index(body.ops[-1])
    plan = plan_shared_memory(func)
    assert (plan.regions[a.uid].offset == plan.regions[later.uid].offset) == retired


def test_descriptors_passed_through_control_flow_keep_their_buffer_live():
    """A view carried around a loop and a view chosen by an ``if`` both derive from their buffers."""
    func = ir.Function("flow", [], [])
    b = ir.Builder(func.body)
    zero = b.create("constant", [], [ir.int32], {"value": 0}).result
    cond = b.create("constant", [], [ir.int1], {"value": 1}).result
    x = b.create("local_alloc", [], [_smem()]).result
    y = b.create("local_alloc", [], [_smem()]).result
    then, other = ir.Block(), ir.Block()
    chosen = b.create("if", [cond], [_smem()], {}, [then, other]).result
    with b.at_end_of(then):
        b.create("yield", [x])
    with b.at_end_of(other):
        b.create("yield", [y])
    body = ir.Block([ir.int32, _smem()], ["k", "view"])
    loop = b.create("for", [zero, zero, zero, chosen], [_smem()], {}, [body])
    with b.at_end_of(body):
        inner = b.create("local_alloc", [], [_smem()]).result  # its view is carried to the next iteration
        b.create("local_load", [body.args[1]], [ir.float16])
        b.create("yield", [inner])
    after = b.create("local_alloc", [], [_smem()]).result
    b.create("local_load", [loop.results[0]], [ir.float16])
    b.create("local_load", [after], [ir.float16])
    b.create("return")
    order = list(func.walk())
    lifetimes = buffer_lifetimes(func)
    last_load = order.index(func.body.ops[-2])
    assert lifetimes[x.uid].end == lifetimes[y.uid].end == lifetimes[inner.uid].end == last_load - 1
    assert lifetimes[inner.uid].start == order.index(loop)  # live over the whole loop
    plan = plan_shared_memory(func)
    offsets = {plan.regions[v.uid].offset for v in (x, y, inner, after)}
    assert len(offsets) == 4  # all four live together after the loop
