"""Ampere cp.async (``gluonkit.language.nvidia.ampere.async_copy``): Gluon 3.9's names and
signatures, a multi-stage pipeline in the interpreter against numpy under several schedules,
zero-filled masks, mbarrier completion, the hazards the interpreter reports with both lines,
frontend errors, and the PTX for sm_90a / sm_100a (``cp.async``, ``commit_group``,
``wait_group``, the ``bar.sync`` the barrier planner places after a wait).
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret import InterpreterError
from gluonkit.lang import ArgumentError, CompilationError, ShapeMismatchError, TypeMismatchError
from gluonkit.language.nvidia.ampere import async_copy, mbarrier
from interpreting import launch_interpreted
from kernel_checks import marked_line, needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]
TILE = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
PLAIN = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])


# ---------------------------------------------------------------------------- kernels
@gluonkit.jit
def row_sum_kernel(x_ptr, out_ptr, M, K, BM: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                   layout: gl.constexpr):
    rows = gl.program_id(0) * BM + gl.arange(0, BM, gl.SliceLayout(1, layout))[:, None]
    cols = gl.arange(0, BK, gl.SliceLayout(0, layout))[None, :]
    bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BM, BK], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    for s in gl.static_range(STAGES - 1):
        async_copy.async_load(bufs.index(s), x_ptr + rows * K + s * BK + cols, mask=(rows < M) & (s * BK + cols < K))
        async_copy.commit_group()
    acc = gl.zeros([BM], gl.float32, gl.SliceLayout(1, layout))
    for i in range(gl.cdiv(K, BK)):
        nxt = i + STAGES - 1
        async_copy.async_load(bufs.index(nxt % STAGES), x_ptr + rows * K + nxt * BK + cols,
                              mask=(rows < M) & (nxt * BK + cols < K), cache_modifier="cg")
        async_copy.commit_group()
        async_copy.wait_group(STAGES - 1)
        acc += gl.sum(bufs.index(i % STAGES).load(layout), axis=1)
    async_copy.wait_group(0)
    out_rows = gl.program_id(0) * BM + gl.arange(0, BM, gl.SliceLayout(1, layout))
    gl.store(out_ptr + out_rows, acc, mask=out_rows < M)


@gluonkit.jit
def barrier_copy_kernel(x_ptr, out_ptr, n, INCREMENT: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, 32, gl.SliceLayout(1, layout))[:, None]
    cols = gl.arange(0, 64, gl.SliceLayout(0, layout))[None, :]
    smem = gl.allocate_shared_memory(gl.float32, [32, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    if INCREMENT:
        mbarrier.init(bar, count=1)
    else:
        mbarrier.init(bar, count=128)  # one arrival per thread
    async_copy.async_load(smem, x_ptr + rows * 64 + cols, mask=rows < n)
    async_copy.mbarrier_arrive(bar, increment_count=INCREMENT)
    if INCREMENT:
        mbarrier.arrive(bar)  # the one counted arrival; the phase still waits for the copies
    mbarrier.wait(bar, 0)
    gl.store(out_ptr + rows * 64 + cols, smem.load(layout))


@gluonkit.jit
def hazard_kernel(x_ptr, out_ptr, CASE: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, 32, gl.SliceLayout(1, layout))[:, None]
    cols = gl.arange(0, 64, gl.SliceLayout(0, layout))[None, :]
    smem = gl.allocate_shared_memory(gl.float32, [32, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    async_copy.async_load(smem, x_ptr + rows * 64 + cols)  # COPY
    if CASE == "no_commit":
        async_copy.wait_group(0)
        gl.store(out_ptr + rows * 64 + cols, smem.load(layout))  # READ_UNCOMMITTED
    elif CASE == "wait_one":
        async_copy.commit_group()
        async_copy.wait_group(1)
        gl.store(out_ptr + rows * 64 + cols, smem.load(layout))  # READ_EARLY
    elif CASE == "overwrite":
        async_copy.commit_group()
        smem.store(gl.zeros([32, 64], gl.float32, layout))  # OVERWRITE
    elif CASE == "barrier_early":
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=128)
        async_copy.mbarrier_arrive(bar, increment_count=False)
        gl.store(out_ptr + rows * 64 + cols, smem.load(layout))  # READ_BEFORE_BARRIER
        mbarrier.wait(bar, 0)
    elif CASE == "noinc_count":
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        async_copy.mbarrier_arrive(bar, increment_count=False)  # NOINC
    else:
        async_copy.commit_group()  # the kernel ends with the copy in flight


# ------------------------------------------------------------------ interpreter vs numpy
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("M, K, stages", [(64, 1000, 3), (45, 256, 2), (32, 70, 4)])
def test_pipelined_row_sums_match_numpy(M, K, stages, seed):
    x = np.random.default_rng(seed).standard_normal((M, K)).astype(np.float32)
    out = np.full(M, np.nan, np.float32)
    launch_interpreted(row_sum_kernel, (-(-M // 32),), x, out, M, K, seed=seed, BM=32, BK=64, STAGES=stages,
                       layout=TILE)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("increment", [False, True])
def test_copies_completed_through_an_mbarrier_are_readable_after_its_wait(increment):
    x = np.random.default_rng(4).standard_normal((32, 64)).astype(np.float32)
    out = np.full_like(x, np.nan)
    launch_interpreted(barrier_copy_kernel, (1,), x, out, 20, INCREMENT=increment, layout=TILE)
    np.testing.assert_array_equal(out[:20], x[:20])
    np.testing.assert_array_equal(out[20:], 0)  # masked-off elements are zero-filled


# ----------------------------------------------------------------------------- hazards
@pytest.mark.parametrize("case, marker, fragment", [
    ("wait_one", "READ_EARLY", "reads"),
    ("no_commit", "READ_UNCOMMITTED", "reads"),
    ("overwrite", "OVERWRITE", "overwrites"),
    ("barrier_early", "READ_BEFORE_BARRIER", "reads"),
])
def test_touching_the_destination_before_its_wait_names_both_lines(case, marker, fragment):
    x = np.random.default_rng(5).standard_normal((32, 64)).astype(np.float32)
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(hazard_kernel, (1,), x, np.zeros_like(x), CASE=case, layout=TILE)
    text = str(err.value)
    assert f"{fragment} the shared buffer [32, 64] x float32" in text
    assert f"the cp.async copy issued at line {marked_line(hazard_kernel, 'COPY')}" in text
    assert f":{marked_line(hazard_kernel, marker)}" in text and "wait_group" in text


def test_returning_with_a_copy_in_flight_is_reported():
    x = np.zeros((32, 64), np.float32)
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(hazard_kernel, (1,), x, x.copy(), CASE="exit", layout=TILE)
    assert "returns while the cp.async copy issued at line" in str(err.value)
    assert f":{marked_line(hazard_kernel, 'COPY')}" in str(err.value)


def test_noinc_arrivals_must_fit_the_barrier_count():
    x = np.zeros((32, 64), np.float32)
    with pytest.raises(InterpreterError) as err:
        launch_interpreted(hazard_kernel, (1,), x, x.copy(), CASE="noinc_count", layout=TILE)
    text = str(err.value)
    assert "every thread arrives (128 arrivals with 4 warps)" in text and "count=128" in text
    assert f":{marked_line(hazard_kernel, 'NOINC')}" in text


# ------------------------------------------------------------------------- frontend
def test_names_and_signatures_match_gluon():
    from gluonkit.language.nvidia import ampere, hopper

    assert hopper.async_copy.async_load is ampere.async_copy.async_load is async_copy.async_load
    assert set(async_copy.__all__) == {"async_copy_global_to_shared", "async_load", "mbarrier_arrive",
                                       "commit_group", "wait_group"}
    params = inspect.signature(async_copy.async_load).parameters
    assert [(k, p.default) for k, p in params.items()][:7] == [
        ("smem", inspect.Parameter.empty), ("pointer", inspect.Parameter.empty), ("mask", None),
        ("cache_modifier", None), ("eviction_policy", None), ("volatile", False), ("cache_policy", None)]
    assert inspect.signature(async_copy.wait_group).parameters["num_outstanding"].default == 0
    assert inspect.signature(async_copy.mbarrier_arrive).parameters["increment_count"].default is True


@gluonkit.jit
def bad_kernel(x_ptr, h_ptr, CASE: gl.constexpr):
    rows = gl.arange(0, 32, gl.SliceLayout(1, TILE))[:, None]
    cols = gl.arange(0, 64, gl.SliceLayout(0, TILE))[None, :]
    smem = gl.allocate_shared_memory(gl.float32, [32, 64], PLAIN)
    if CASE == "removed":
        async_copy.async_copy_global_to_shared(smem, x_ptr + rows * 64 + cols)  # REMOVED
    elif CASE == "shape":
        async_copy.async_load(smem, x_ptr + cols)  # SHAPE
    elif CASE == "dtype":
        async_copy.async_load(smem, h_ptr + rows * 64 + cols)  # DTYPE
    elif CASE == "cache":
        async_copy.async_load(smem, x_ptr + rows * 64 + cols, cache_modifier="cs")  # CACHE
    else:
        async_copy.wait_group(-1)  # WAIT


@pytest.mark.parametrize("case, marker, error, fragment", [
    ("removed", "REMOVED", CompilationError, "async_copy_global_to_shared has been removed"),
    ("shape", "SHAPE", ShapeMismatchError, "must match the shared view's shape [32, 64]"),
    ("dtype", "DTYPE", TypeMismatchError, "point to float16 but the shared view holds float32"),
    ("cache", "CACHE", ArgumentError, "cache_modifier must be 'ca' or 'cg'"),
    ("wait", "WAIT", ArgumentError, "num_outstanding must be non-negative"),
])
def test_bad_calls_name_the_line_and_the_fix(case, marker, error, fragment):
    with pytest.raises(error) as err:
        bad_kernel.build_ir([gl.pointer_type(gl.float32), gl.pointer_type(gl.float16)], {"CASE": case})
    assert fragment in str(err.value)
    assert f"test_async_copy.py:{marked_line(bad_kernel, marker)}" in str(err.value)


@gluonkit.jit
def narrow_kernel(x_ptr):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    smem = gl.allocate_shared_memory(gl.float16, [128], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    async_copy.async_load(smem, x_ptr + offs)  # NARROW
    async_copy.commit_group()
    async_copy.wait_group(0)


def test_runs_shorter_than_four_bytes_are_refused_with_the_fix():
    with pytest.raises(CompilationError) as err:
        narrow_kernel.compile("*fp16:16", target="sm_90a", num_warps=4)
    assert "cp.async copies 4, 8 or 16 bytes" in str(err.value) and "2 byte(s)" in str(err.value)
    assert f"test_async_copy.py:{marked_line(narrow_kernel, 'NARROW')}" in str(err.value)


# ------------------------------------------------------------------------------- PTX
@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_pipeline_ptx_copies_16_bytes_commits_waits_then_synchronizes(target):
    ptx = row_sum_kernel.compile("*fp32:16", "*fp32:16", "i32", "i32:16", target=target, num_warps=4, BM=32, BK=64,
                                 STAGES=3, layout=TILE).asm["ptx"]
    assert re.search(r"cp\.async\.ca\.shared\.global \[ %r\d+ \+ 0 \], \[ %rd\d+ \+ 0 \], 16, %r\d+;", ptx)  # prologue
    assert re.search(r"cp\.async\.cg\.shared\.global \[ %r\d+ \+ 0 \], \[ %rd\d+ \+ 0 \], 16, %r\d+;", ptx)  # loop
    assert re.search(r"selp\.b32\s+%r\d+, 16, 0, %p\d+;", ptx)  # masked-off copies read 0 bytes: zero fill
    assert "cp.async.commit_group;" in ptx and "cp.async.wait_group 2;" in ptx and "cp.async.wait_group 0;" in ptx
    loop = ptx[ptx.index("cp.async.wait_group 2;"):]
    assert loop.index("bar.sync 0") < loop.index("ld.shared")  # other threads' copies are visible
    # the stage a copy refills was read by other threads in the previous iteration: wait for them first
    head = ptx[:ptx.index("cp.async.cg")]
    assert head.rindex("bar.sync 0") > head.rindex("cp.async.commit_group")


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("increment", [False, True])
def test_mbarrier_arrive_ptx(target, increment):
    ptx = barrier_copy_kernel.compile("*fp32:16", "*fp32:16", "i32", target=target, num_warps=4, INCREMENT=increment,
                                      layout=TILE).asm["ptx"]
    suffix = "" if increment else ".noinc"
    assert re.search(rf"\n\s*cp\.async\.mbarrier\.arrive{re.escape(suffix)}\.shared::cta\.b64 \[%r\d+\];", ptx)
    assert len(re.findall(r"cp\.async\.ca\.shared\.global", ptx)) == 4
