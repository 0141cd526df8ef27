"""Planted bugs in a Hopper GEMM pipeline, each caught by the CPU interpreter (or the compiler).

:func:`gemm_kernel` is a correct persistent GEMM in the style of
``examples/persistent_gemm/pipelined_gemm.py``: a TMA ring of ``STAGES`` buffers with one
``ready`` mbarrier each, an asynchronous ``warpgroup_mma`` that overlaps the next stage's
wait, the stage consumed one step ago refilled ``STAGES - 1`` steps ahead, and an epilogue
through shared memory and a TMA store that overlaps the next tile's main loop.  Each program
walks several output tiles, so barrier phases and the C buffer are reused.

The ``BUG`` constexpr plants one mistake at a line marked ``# BUG:<name>``.  Each test checks
that the report says what went wrong and points at the user's faulty line (its number and
its source text), and — where the detection could depend on when the interpreter lets copies
land — that it is the same report under several scheduler seeds and under the two extreme
schedules (every copy lands at once, or only when a wait needs it).
"""

from __future__ import annotations

import contextlib
import inspect

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.interpret.nvidia import tma as interpret_tma
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.ir.types import TensorDescType
from gluonkit.nvidia.hopper import TensorDescriptor
from interpreting import interpreter_on
from kernel_checks import marked_line, needs_ptxas

BM = BN = 64
BK = 32
NUM_WARPS = 4
SEEDS = (0, 1, 2)


@gluonkit.jit
def gemm_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, acc_layout: gl.constexpr,
                BUG: gl.constexpr):
    """``C = A @ B`` over the tiles ``pid, pid + num_programs, …``; ``BUG`` (None: none) plants one bug."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, [BM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    if BUG != "no_init":
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
    if BUG == "double_init":
        mbarrier.init(ready.index(0), count=1)  # BUG:double_init
    fence_async_shared()
    tile_bytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    if BUG == "expect_bytes":
        tile_bytes: gl.constexpr = a_desc.block_type.nbytes  # forgot B's bytes
    if BUG == "expect_too_many":
        tile_bytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    my_tiles = gl.cdiv(gl.cdiv(M, BM) * num_pid_n - gl.program_id(0), gl.num_programs(0))
    step0 = 0  # K-steps done by earlier tiles: picks the stage and the barrier phase
    for t in range(my_tiles):
        tile = gl.program_id(0) + t * gl.num_programs(0)
        off_m = (tile // num_pid_n) * BM
        off_n = (tile % num_pid_n) * BN
        # Prologue: start the loads of the first STAGES - 1 K-slices.
        for p in gl.static_range(STAGES - 1):
            issue = p < k_tiles
            stage = (step0 + p) % STAGES
            bar_p = ready.index(stage)
            mbarrier.expect(bar_p, tile_bytes, pred=issue)  # BUG:no_init BUG:expect_bytes
            tma.async_load(a_desc, [off_m, p * BK], bar_p, a_smem.index(stage), pred=issue)  # A_LOAD
            tma.async_load(b_desc, [p * BK, off_n], bar_p, b_smem.index(stage), pred=issue)  # B_LOAD
        acc = gl.zeros([BM, BN], gl.float32, acc_layout)
        for k in range(k_tiles):
            step = step0 + k
            stage = step % STAGES
            phase = (step // STAGES) & 1
            if BUG == "phase":
                phase = 0
            if BUG != "no_wait":
                mbarrier.wait(ready.index(stage), phase)  # BUG:phase BUG:expect_too_many
            acc = warpgroup_mma(a_smem.index(stage), b_smem.index(stage), acc, is_async=True)  # BUG:no_wait
            if BUG == "token":
                acc = acc.to(gl.float16)  # BUG:token
            acc = warpgroup_mma_wait(num_outstanding=1, deps=[acc])
            # At most this step's MMA is in flight: the stage of the previous step is free.
            ahead = k + STAGES - 1
            refill = (step + STAGES - 1) % STAGES
            if BUG == "refill_in_use":
                refill = stage
            issue = ahead < k_tiles
            if BUG == "prefetch_past_end":
                issue = True
            bar = ready.index(refill)
            mbarrier.expect(bar, tile_bytes, pred=issue)
            tma.async_load(a_desc, [off_m, ahead * BK], bar, a_smem.index(refill), pred=issue)  # BUG:refill_in_use BUG:prefetch_past_end
            tma.async_load(b_desc, [ahead * BK, off_n], bar, b_smem.index(refill), pred=issue)
        if BUG != "no_mma_wait":
            acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
        step0 += k_tiles
        # Epilogue: the previous tile's TMA store must be done with c_smem before it is rewritten.
        if BUG != "no_store_wait":
            tma.store_wait(0)
        c_smem.store(acc.to(c_desc.dtype))  # BUG:no_mma_wait BUG:no_store_wait
        if BUG != "no_fence":
            fence_async_shared()
        tma.async_store(c_desc, [off_m, off_n], c_smem)  # BUG:no_fence
    tma.store_wait(0)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))


# --------------------------------------------------------------------------- helpers
def _line(marker: str) -> int:
    """The line of ``gemm_kernel`` whose comment holds ``marker``."""
    return marked_line(gemm_kernel, marker)


def _bug_line(bug: str) -> int:
    """The line of ``gemm_kernel`` marked ``# BUG:<bug>``: where planting ``bug`` must be reported."""
    return _line(f"BUG:{bug}")


def _problem(M=128, N=128, K=80, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    return a, b, c


def _run(bug=None, seed=0, programs=2, M=128, N=128, K=80, stages=3):
    """Run ``gemm_kernel`` with ``BUG=bug`` in the interpreter; return (a, b, c)."""
    a, b, c = _problem(M, N, K)
    nvmma = gl.NVMMASharedLayout.get_default_for
    a_desc = TensorDescriptor.from_tensor(a, [BM, BK], nvmma([BM, BK], gl.float16))
    b_desc = TensorDescriptor.from_tensor(b, [BK, BN], nvmma([BK, BN], gl.float16))
    c_desc = TensorDescriptor.from_tensor(c, [BM, BN], nvmma([BM, BN], gl.float16))
    acc_layout = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16])
    with interpreter_on(seed):
        gemm_kernel[(programs,)](a_desc, b_desc, c_desc, M, N, K, STAGES=stages, acc_layout=acc_layout,
                                 BUG=bug, num_warps=NUM_WARPS)
    return a, b, c


def _report(bug, **kw) -> CompilationError:
    """The error the planted ``bug`` raises, checked to be at its marked line (number and text)."""
    with pytest.raises(CompilationError) as info:
        _run(bug, **kw)
    err = info.value
    line = _bug_line(bug)
    assert err.loc.line == line, f"reported at line {err.loc.line}, not the faulty line {line}:\n{err}"
    source = inspect.getsourcelines(gemm_kernel.fn)
    text = source[0][line - source[1]].split("#")[0].strip()
    assert text in str(err)
    return err


@contextlib.contextmanager
def _landing(probability):
    """Let TMA copies land before each op with ``probability`` (1: at once, 0: only when a wait needs them)."""
    saved = interpret_tma._COMPLETE_PROBABILITY
    interpret_tma._COMPLETE_PROBABILITY = probability
    try:
        yield
    finally:
        interpret_tma._COMPLETE_PROBABILITY = saved


def _same_report_under_seeds(bug, **kw) -> str:
    """The message of ``bug``'s report, which must not depend on when copies land: the same under
    several seeds and under the two extreme schedules (copies land at once, or as late as possible)."""
    messages = {str(_report(bug, seed=seed, **kw)) for seed in SEEDS}
    for probability in (0.0, 1.0):
        with _landing(probability):
            messages.add(str(_report(bug, **kw)))
    assert len(messages) == 1, "the report depends on the schedule:\n" + "\n---\n".join(messages)
    return messages.pop()


# ------------------------------------------------------------------- the correct kernel
@pytest.mark.parametrize("programs, M, N, K, stages", [
    (2, 128, 128, 80, 3),   # two tiles per program, ragged K: phases and c_smem reused across tiles
    (3, 128, 192, 64, 2),   # tiles shared unevenly between programs
    (4, 64, 64, 32, 3),     # fewer K-steps than stages
])
@pytest.mark.parametrize("seed, probability", [(0, None), (1, None), (0, 0.0), (0, 1.0)])
def test_the_correct_kernel_matches_float64(programs, M, N, K, stages, seed, probability):
    with _landing(interpret_tma._COMPLETE_PROBABILITY if probability is None else probability):
        a, b, c = _run(None, seed=seed, programs=programs, M=M, N=N, K=K, stages=stages)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # One rounding to float32 (the accumulator), one to float16: within one float16 step of the exact result.
    step = np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(c.astype(np.float64) - ref) <= step), np.abs(c - ref).max()


@needs_ptxas
def test_the_correct_kernel_compiles_for_hopper():
    """The reference is a real sm_90a kernel, not only an interpreter exercise."""
    nvmma = gl.NVMMASharedLayout.get_default_for
    acc_layout = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[NUM_WARPS, 1], instr_shape=[16, BN, 16])
    descs = [TensorDescType(tuple(block), ir.float16, nvmma(block, gl.float16))
             for block in ([BM, BK], [BK, BN], [BM, BN])]
    compiled = gemm_kernel.compile(*descs, "i32", "i32", "i32", STAGES=3, acc_layout=acc_layout, BUG=None,
                                   target="sm_90a", num_warps=NUM_WARPS)
    ptx = compiled.asm["ptx"]
    for instruction in ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "mbarrier.try_wait.parity",
                        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
                        "fence.proxy.async.shared::cta", "cp.async.bulk.tensor.2d.global.shared::cta"):
        assert instruction in ptx, instruction
    assert compiled.metadata["spill_stores"] == 0


# ----------------------------------------------------------------------- planted bugs
def test_waiting_on_a_phase_that_never_flips_is_a_wrong_phase_wait():
    text = _same_report_under_seeds("phase")
    assert "mbarrier.wait on the wrong phase: it waits for parity 0" in text
    assert "returns at once without waiting for the TMA load issued at line" in text
    assert "(step // STAGES) & 1" in text


def test_expecting_too_few_bytes_is_a_mismatch_at_the_expect():
    text = _same_report_under_seeds("expect_bytes")
    assert "transaction bytes mismatch" in text
    assert "expects 4096 byte(s)" in text and "bring 8192, 4096 byte(s) more" in text
    # The prologue's second copy is the one that overshoots the expected bytes.
    assert f"note: the load that brings more bytes than expected (at {__file__}:{_line('B_LOAD')}:" in text


def test_expecting_too_many_bytes_deadlocks_at_the_wait_and_names_the_expect():
    text = _same_report_under_seeds("expect_too_many")
    assert "deadlock: mbarrier.wait for the phase of parity 0" in text and "4096 transaction byte(s)" in text
    assert f"mbarrier.expect at line {_bug_line('expect_bytes')} announced 12288 byte(s)" in text
    assert "bring 8192" in text


def test_no_wait_before_the_mma_reads_a_buffer_a_copy_is_writing():
    text = _same_report_under_seeds("no_wait")
    assert "warpgroup_mma reads the shared buffer [3, 64, 32] x float16" in text
    assert f"while the TMA load issued at line {_line('A_LOAD')} may still be writing it" in text
    assert "wait on its mbarrier" in text


def test_refilling_the_stage_the_inflight_mma_reads_is_reported():
    text = _same_report_under_seeds("refill_in_use")
    assert "overwrites the shared buffer [3, 64, 32] x float16" in text
    assert f"while the asynchronous warpgroup_mma at line {_bug_line('no_wait')} is still reading it" in text
    assert "warpgroup_mma_wait" in text


def test_tma_store_without_fence_after_the_generic_store_is_reported():
    text = _same_report_under_seeds("no_fence")
    assert f"which the store at line {_bug_line('no_store_wait')} wrote through the generic proxy" in text
    assert "call fence_async_shared() between the store and the TMA copy" in text


def test_rewriting_c_smem_under_an_inflight_tma_store_is_reported():
    text = _same_report_under_seeds("no_store_wait")
    assert "local_store overwrites the shared buffer [64, 64] x float16" in text
    assert f"while the TMA store issued at line {_bug_line('no_fence')} is still reading it" in text
    assert "tma.store_wait" in text


def test_using_the_async_accumulator_token_as_a_tensor_is_a_compile_error():
    err = _report("token")
    assert not isinstance(err, InterpreterError)  # refused while building the IR, before anything runs
    assert "warpgroup_mma_accumulator" in str(err) and "has no attribute 'to'" in str(err)
    assert "warpgroup_mma_wait(deps=[acc]) gives the tensor" in str(err)


def test_reading_the_accumulator_while_its_mma_is_in_flight_is_reported():
    text = _same_report_under_seeds("no_mma_wait")
    assert "cast reads the result of the asynchronous warpgroup_mma" in text
    assert f"at line {_bug_line('no_wait')}" in text and "while it is still in flight" in text


def test_returning_with_prefetched_loads_in_flight_is_reported():
    # One tile per program: the loads issued past the last K-step are still in flight at the end.
    text = _same_report_under_seeds("prefetch_past_end", programs=4)
    assert "the kernel returns while the TMA load issued at line" in text
    assert "no mbarrier.wait observed its completion" in text


def test_prefetching_past_the_end_into_the_next_tile_is_reported_at_the_rearm():
    # Two tiles per program: the next tile's prologue arms a barrier whose stray loads no wait observed.
    messages = set()
    for seed, probability in [(0, None), (1, None), (0, 0.0), (0, 1.0)]:
        with _landing(interpret_tma._COMPLETE_PROBABILITY if probability is None else probability):
            with pytest.raises(InterpreterError) as info:
                _run("prefetch_past_end", seed=seed)
        assert info.value.loc.line == _bug_line("expect_bytes")
        messages.add(str(info.value))
    text, = messages
    assert "arrives on the next phase" in text
    assert f"the TMA load issued at line {_bug_line('prefetch_past_end')} completes" in text


def test_mbarrier_use_before_init_is_reported():
    text = _same_report_under_seeds("no_init")
    assert "mbarrier_expect: the mbarrier is used before mbarrier.init" in text


def test_second_mbarrier_init_is_reported():
    text = _same_report_under_seeds("double_init")
    assert "the mbarrier was already initialized at line" in text and "invalidate it before" in text
