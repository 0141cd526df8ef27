"""Barrier placement for shared-memory buffers (:mod:`gluonkit.lower.memplan.barriers`).

Each kernel is compiled for sm_90a on the CPU; the plan is captured as the lowering makes
it, and listed as the ops it puts a ``bar.sync 0`` before, each named by the region ops
around it (``"for/local_store"``).  Straight-line kernels also count ``bar.sync`` in the
PTX (LLVM may unroll loops, so loop kernels are checked on the plan).
"""

from __future__ import annotations

import os
import sys

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import ir
from gluonkit.ir.types import TensorDescType
from gluonkit.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.lower import context
from gluonkit.lower.memplan.barriers import ASYNC_WRITE, READ, WRITE, conflicts

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))

import pipelined_gemm  # noqa: E402
from smem_kernels import L, L_T, SMEM, tile_pointers  # noqa: E402



def _compile(monkeypatch, kernel, *args, **kwargs):
    """(barrier op paths, PTX) of ``kernel`` compiled for sm_90a."""
    captured = []
    plan_barriers = context.plan_barriers

    def capture(func, shared):
        plan = plan_barriers(func, shared)
        captured.append((func, plan))
        return plan

    monkeypatch.setattr(context, "plan_barriers", capture)
    ptx = kernel.compile(*args, target="sm_90a", **kwargs).asm["ptx"]
    func, plan = captured[-1]
    paths = []

    def visit(block, prefix):
        for op in block.ops:
            if plan.needs_barrier(op):
                paths.append(prefix + op.name)
            for region in op.regions:
                visit(region, prefix + op.name + "/")

    visit(func.body, "")
    return paths, ptx


# ------------------------------------------------------------------ straight-line code
@gluonkit.jit
def store_then_load(x_ptr, y_ptr, SAME: gl.constexpr):
    a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    b = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    a.store(gl.load(tile_pointers(x_ptr, L)))
    if SAME:
        y = a.load(L)
    else:
        y = b.load(L)
    gl.store(tile_pointers(y_ptr, L), y)


def test_load_after_a_store_to_the_same_buffer_waits(monkeypatch):
    paths, ptx = _compile(monkeypatch, store_then_load, "*fp32", "*fp32", SAME=True)
    assert paths == ["local_load"] and ptx.count("bar.sync") == 1


def test_load_of_another_buffer_does_not_wait(monkeypatch):
    paths, ptx = _compile(monkeypatch, store_then_load, "*fp32", "*fp32", SAME=False)
    assert paths == [] and ptx.count("bar.sync") == 0


@gluonkit.jit
def stage_ring(x_ptr, y_ptr):
    ring = gl.allocate_shared_memory(gl.float32, [2, 32, 32], SMEM)
    ring.index(0).store(gl.load(tile_pointers(x_ptr, L)))
    y = ring.index(1).load(L)  # another stage: no overlap
    z = ring.index(0).load(L)  # the stage just written
    gl.store(tile_pointers(y_ptr, L), y + z)


def test_constant_stages_of_one_allocation_are_separate_ranges(monkeypatch):
    paths, _ = _compile(monkeypatch, stage_ring, "*fp32", "*fp32")
    assert paths == ["local_load"]


# ------------------------------------------------------------------------------ loops
@gluonkit.jit
def store_load_loop(x_ptr, y_ptr, n, LOOP: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    acc = gl.zeros([32, 32], gl.float32, L)
    if LOOP:
        for i in range(n):
            buf.store(gl.load(tile_pointers(x_ptr, L)) + i)
            acc += buf.load(L)
    else:
        buf.store(gl.load(tile_pointers(x_ptr, L)))
        acc += buf.load(L)
    gl.store(tile_pointers(y_ptr, L), acc)


def test_write_after_the_previous_iterations_read_waits(monkeypatch):
    straight, _ = _compile(monkeypatch, store_load_loop, "*fp32", "*fp32", "i32", LOOP=False)
    assert straight == ["local_load"]
    # In a loop the store also waits for the previous iteration's load (WAR across iterations).
    looped, _ = _compile(monkeypatch, store_load_loop, "*fp32", "*fp32", "i32", LOOP=True)
    assert looped == ["for/local_store", "for/local_load"]


@gluonkit.jit
def read_only_loop(x_ptr, y_ptr, n):
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM, value=gl.load(tile_pointers(x_ptr, L)))
    acc = gl.zeros([32, 32], gl.float32, L)
    for i in range(n):
        acc += buf.load(L)
    gl.store(tile_pointers(y_ptr, L), acc)


def test_reads_in_a_loop_wait_only_for_the_write_before_it(monkeypatch):
    paths, _ = _compile(monkeypatch, read_only_loop, "*fp32", "*fp32", "i32")
    assert paths == ["for/local_load"]


@gluonkit.jit
def while_loop(x_ptr, y_ptr, n):
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    acc = gl.zeros([32, 32], gl.float32, L)
    i = 0
    while i < n:
        acc += buf.load(L)
        buf.store(acc)
        i += 1
    gl.store(tile_pointers(y_ptr, L), acc)


def test_while_loops_carry_accesses_to_the_next_iteration(monkeypatch):
    paths, _ = _compile(monkeypatch, while_loop, "*fp32", "*fp32", "i32")
    assert paths == ["while/local_load", "while/local_store"]


# ------------------------------------------------------------------- explicit barriers
@gluonkit.jit
def barrier_between(x_ptr, y_ptr, flag, MODE: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    buf.store(gl.load(tile_pointers(x_ptr, L)))
    if MODE == "always":
        gl.thread_barrier()
    elif MODE == "one_branch":
        if flag > 0:
            gl.thread_barrier()
    elif MODE == "both_branches":
        if flag > 0:
            gl.thread_barrier()
        else:
            gl.thread_barrier()
    gl.store(tile_pointers(y_ptr, L), buf.load(L))


@pytest.mark.parametrize("mode, expected", [("always", []), ("one_branch", ["local_load"]),
                                            ("both_branches", [])])
def test_thread_barrier_clears_pending_accesses_only_on_every_path(monkeypatch, mode, expected):
    paths, _ = _compile(monkeypatch, barrier_between, "*fp32", "*fp32", "i32", MODE=mode)
    assert paths == expected


@gluonkit.jit
def through_scratch(x_ptr, y_ptr):
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    x = gl.load(tile_pointers(x_ptr, L))
    buf.store(x)
    t = gl.convert_layout(x, L_T)  # across warps: scratch memory and a bar.sync in every thread
    gl.store(tile_pointers(y_ptr, L_T), t + buf.load(L_T))


def test_a_conversion_through_scratch_memory_separates_buffer_accesses(monkeypatch):
    paths, ptx = _compile(monkeypatch, through_scratch, "*fp32", "*fp32")
    assert paths == [] and ptx.count("bar.sync") == 1  # the conversion's own


@gluonkit.jit
def reduce_between(x_ptr, y_ptr, AXIS: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
    x = gl.load(tile_pointers(x_ptr, L))
    buf.store(x)
    total = gl.sum(x, axis=AXIS)  # L puts its 4 warps along rows: axis 0 crosses warps
    gl.store(tile_pointers(y_ptr, L), buf.load(L) + gl.expand_dims(total, AXIS))


@pytest.mark.parametrize("axis, expected", [(0, []), (1, ["local_load"])])
def test_a_reduction_across_warps_separates_buffer_accesses(monkeypatch, axis, expected):
    paths, ptx = _compile(monkeypatch, reduce_between, "*fp32", "*fp32", AXIS=axis)
    assert paths == expected
    assert ptx.count("bar.sync") == 1  # the reduction's own, or the planned one


# ------------------------------------------------------------------ TMA, mbarrier, wgmma
BM, BN, BK = 64, 64, 64
A_LAYOUT = gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)
B_LAYOUT = gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16)
ACC = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])


@gluonkit.jit
def refill(a_desc, b_desc, out_ptr, acc_layout: gl.constexpr, BARRIER_IN_FLIGHT: gl.constexpr):
    a = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, nbytes)
    tma.async_load(a_desc, [0, 0], bar, a)
    tma.async_load(b_desc, [0, 0], bar, b)
    mbarrier.wait(bar, 0)
    acc = warpgroup_mma(a, b, gl.zeros([64, 64], gl.float32, acc_layout), is_async=True)
    if BARRIER_IN_FLIGHT:
        gl.thread_barrier()  # the MMA still reads a and b: this barrier does not end that
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    mbarrier.expect(bar, nbytes)
    tma.async_load(a_desc, [0, 64], bar, a)
    tma.async_load(b_desc, [64, 0], bar, b)
    mbarrier.wait(bar, 1)
    acc = warpgroup_mma(a, b, acc)
    mbarrier.invalidate(bar)
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, acc_layout))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, acc_layout))
    gl.store(out_ptr + rows[:, None] * 64 + cols[None, :], acc)


@pytest.mark.parametrize("barrier_in_flight", [False, True])
def test_tma_refill_waits_for_the_mma_reads_and_the_mma_for_nothing(monkeypatch, barrier_in_flight):
    a_desc = TensorDescType((BM, BK), ir.float16, A_LAYOUT)
    b_desc = TensorDescType((BK, BN), ir.float16, B_LAYOUT)
    paths, _ = _compile(monkeypatch, refill, a_desc, b_desc, "*fp32", acc_layout=ACC,
                        BARRIER_IN_FLIGHT=barrier_in_flight)
    # expect after init (RAW on the mbarrier); the refill of a after the MMA read it (WAR);
    # the refill of b is covered by that barrier; the MMAs follow mbarrier waits, not barriers;
    # invalidate after the waits (WAR).
    assert paths == ["mbarrier_expect", "async_tma_copy_global_to_shared", "mbarrier_invalidate"]


def test_pipelined_gemm_has_one_barrier_per_k_step(monkeypatch):
    a_desc = TensorDescType((128, 64), ir.float16, gl.NVMMASharedLayout.get_default_for([128, 64], gl.float16))
    b_desc = TensorDescType((64, 256), ir.float16, gl.NVMMASharedLayout.get_default_for([64, 256], gl.float16))
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], instr_shape=[16, 256, 16])
    paths, ptx = _compile(monkeypatch, pipelined_gemm.pipelined_gemm_kernel, a_desc, b_desc,
                          "*fp32:16", "i32:16", "i32:16", "i32:16", "i32:16", STAGES=3, acc_layout=acc,
                          num_warps=8)
    assert [p for p in paths if p.startswith("for/")] == ["for/async_tma_copy_global_to_shared"]
    assert ptx.count("bar.sync") == len(paths)


# ------------------------------------------------------------------------ the rule itself
@pytest.mark.parametrize("new, old, expected", [
    (READ, READ, False), (READ, WRITE, True), (WRITE, READ, True), (WRITE, WRITE, True),
    (ASYNC_WRITE, READ, True), (ASYNC_WRITE, WRITE, True)])
def test_conflicts_need_overlap_and_a_write(new, old, expected):
    assert conflicts(new, (0, 64), old, (32, 96)) == expected
    assert not conflicts(new, (0, 64), old, (64, 128))


# --------------------------------------------------------------------- warp_specialize
@gluonkit.jit
def _ws_waiter(bars, x_ptr, n):
    for i in range(n):
        mbarrier.wait(bars.index(0), i & 1)
        mbarrier.arrive(bars.index(1))


@gluonkit.jit
def _ws_arriver(bars, n):
    for i in range(n):
        mbarrier.wait(bars.index(1), (i & 1) ^ 1)
        mbarrier.arrive(bars.index(0))


@gluonkit.jit
def ws_after_init(x_ptr, n):
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_ws_waiter, (bars, x_ptr, n)), (_ws_arriver, (bars, n))], [1])
    mbarrier.invalidate(bars.index(0))


def test_warp_specialize_fork_and_join_are_barriers(monkeypatch):
    """The init writes before the fork need no ``bar.sync`` inside the partitions' loops (the
    fork is ``barrier.sync 1`` over every thread), and the invalidate after the join none either."""
    paths, ptx = _compile(monkeypatch, ws_after_init, gl.pointer_type(gl.float32), "i32", num_warps=4)
    assert paths == []
    assert "bar.sync 0" not in ptx and "bar.sync 2" not in ptx and ptx.count("barrier.sync 1,") == 4
