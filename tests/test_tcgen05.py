"""Blackwell tcgen05 MMAs: the interpreter against float64, planted protocol bugs, frontend errors, ptxas sm_100a.

``tests/test_triton39_crosscheck.py`` compares the PTX (instructions, instruction and matrix
descriptors) with Triton 3.9's for the same kernels.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, fence_async_shared,
                                                mbarrier, tcgen05_commit, tcgen05_mma, tcgen05_mma_barrier_count)
from interpreting import launch_interpreted
from kernel_checks import line_containing, needs_ptxas
from tcgen05_kernels import mma, sync_mma, tensor_core_values as _exact

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "fp8e4nv": ml_dtypes.float8_e4m3fn}


def _inputs(name, m, n, k, rng):
    dtype = DTYPES[name]
    return (rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype),
            rng.standard_normal((m, n)).astype(np.float32))


@pytest.mark.parametrize("name,m,n,k,b_kmajor,acc", [
    ("fp16", 128, 64, 64, False, False), ("fp16", 128, 32, 32, True, True), ("bf16", 64, 32, 32, True, True),
    ("fp32", 128, 32, 16, True, False), ("fp8e4nv", 128, 32, 64, True, True),
])
def test_mma_matches_float64(name, m, n, k, b_kmajor, acc):
    a, b, c0 = _inputs(name, m, n, k, np.random.default_rng(m + n + k))
    c = c0.copy()
    launch_interpreted(mma, (1,), a, np.ascontiguousarray(b.T) if b_kmajor else b, c, m, n, k, b_kmajor, acc,
                       num_warps=4)
    ref = (_exact(a) @ _exact(b) + (c0 if acc else 0)).astype(np.float32)
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=1e-5)


def test_synchronous_mmas_complete_before_returning():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 32)).astype(np.float16)
    b = (rng.standard_normal((32, 32)) / 4).astype(np.float16)
    c = np.zeros((128, 32), np.float32)
    launch_interpreted(sync_mma, (1,), a, b, c, 128, 32, num_warps=4)
    ab = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(np.float16)
    np.testing.assert_allclose(c, ab.astype(np.float64) @ b.astype(np.float64), rtol=1e-6, atol=1e-5)


@needs_ptxas
def test_ptxas_accepts_synchronous_mmas():
    ptx = sync_mma.compile("*fp16:16", "*fp16:16", "*fp32:16", target="sm_100a", num_warps=4, M=128,
                           K=32).asm["ptx"]
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") == 2
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx


def test_float16_accumulator_is_rounded_once():
    a, b, c0 = _inputs("fp16", 128, 64, 64, np.random.default_rng(11))
    c0 = c0.astype(np.float16)
    c = c0.copy()
    launch_interpreted(mma, (1,), a, b, c, 128, 64, 64, False, True, num_warps=4)
    ref = (_exact(a) @ _exact(b) + c0.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(c, ref)


# ------------------------------------------------------------------ planted bugs
@gluonkit.jit
def planted(a_ptr, b_ptr, c_ptr, CASE: gl.constexpr):
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, 128, gl.SliceLayout(1, blk))
    rk = gl.arange(0, 32, gl.SliceLayout(1, blk))
    ck = gl.arange(0, 32, gl.SliceLayout(0, blk))
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 32], gl.float16)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([32, 32], gl.float16)
    a_smem = gl.allocate_shared_memory(gl.float16, [128, 32], a_layout, gl.load(a_ptr + r[:, None] * 32 + ck[None, :]))
    b_tile = gl.load(b_ptr + rk[:, None] * 32 + ck[None, :])
    b_smem = gl.allocate_shared_memory(gl.float16, [32, 32], b_layout, b_tile)
    acc = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    if CASE != "no_fence":
        fence_async_shared()
    tcgen05_mma(a_smem, b_smem, acc, use_acc=False, mbarriers=[])
    tcgen05_mma(a_smem, b_smem, acc, mbarriers=[])
    if CASE == "no_commit":
        mbarrier.wait(bar, 0)  # nothing commits to bar: deadlock
    else:
        tcgen05_commit(bar)
    reg: gl.constexpr = acc.get_reg_layout()
    if CASE == "early_read":
        early = acc.load(reg)  # the commit's barrier is not waited on yet
    if CASE == "refill":
        b_smem.store(b_tile)  # the stage is refilled while the MMAs may still read it
    if CASE != "no_commit":
        mbarrier.wait(bar, 0)
    out = acc.load(reg)
    rr = gl.arange(0, 128, gl.SliceLayout(1, reg))
    cc = gl.arange(0, 32, gl.SliceLayout(0, reg))
    gl.store(c_ptr + rr[:, None] * 32 + cc[None, :], out)


def _planted(case):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((128, 32), np.float32)
    launch_interpreted(planted, (1,), a, b, c, case, num_warps=4)
    return a, b, c


def test_the_planted_kernel_is_right_without_bugs():
    a, b, c = _planted("ok")
    np.testing.assert_allclose(c, 2 * (a.astype(np.float64) @ b.astype(np.float64)), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("case,line,words", [
    ("early_read", "early = acc.load", ["tmem_load reads tensor memory", "tcgen05_mma at line", "mbarrier.wait"]),
    ("refill", "b_smem.store(b_tile)", ["the tcgen05_mma at line", "still reading"]),
    ("no_commit", "mbarrier.wait(bar, 0)  # nothing", ["deadlock", "never complete"]),
    ("no_fence", "use_acc=False, mbarriers=[])", ["fence_async_shared()", "generic proxy"]),
])
def test_planted_bugs_are_reported_at_their_lines(case, line, words):
    with pytest.raises(InterpreterError) as info:
        _planted(case)
    message = str(info.value)
    assert f":{line_containing(planted.fn, line)}:" in message, message
    for word in words:
        assert word in message, message


@gluonkit.jit
def never_committed(a_ptr, b_ptr):
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r = gl.arange(0, 128, gl.SliceLayout(1, blk))
    ck = gl.arange(0, 32, gl.SliceLayout(0, blk))
    rk = gl.arange(0, 32, gl.SliceLayout(1, blk))
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 32], gl.float16)
    a_smem = gl.allocate_shared_memory(gl.float16, [128, 32], a_layout, gl.load(a_ptr + r[:, None] * 32 + ck[None, :]))
    b_smem = gl.allocate_shared_memory(gl.float16, [32, 32], a_layout, gl.load(b_ptr + rk[:, None] * 32 + ck[None, :]))
    acc = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
    fence_async_shared()
    tcgen05_mma(a_smem, b_smem, acc, use_acc=False, mbarriers=[])


def test_an_mma_never_committed_is_reported_at_the_end():
    a = np.ones((128, 32), np.float16)
    with pytest.raises(InterpreterError, match="never committed") as info:
        launch_interpreted(never_committed, (1,), a, a[:32].copy(), num_warps=4)
    assert f":{line_containing(never_committed.fn, 'mbarriers=[]')}:" in str(info.value)


# -------------------------------------------------------------- frontend errors
@gluonkit.jit
def bad_call(CASE: gl.constexpr):
    layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 32], gl.float16)
    a_smem = gl.allocate_shared_memory(gl.float16, [128, 32], layout)
    b_smem = gl.allocate_shared_memory(gl.float16, [32, 64], gl.NVMMASharedLayout.get_default_for([32, 64], gl.float16))
    acc = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
    if CASE == "shapes":
        tcgen05_mma(a_smem, b_smem, acc)
    b32 = b_smem.slice(0, 32, 1)
    if CASE == "multicast":
        tcgen05_mma(a_smem, b32, acc, multicast=3)
    if CASE == "acc_type":
        acc16 = allocate_tensor_memory(gl.int32, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
        tcgen05_mma(a_smem, b32, acc16)
    if CASE == "a_in_tmem":
        tcgen05_mma(acc, b32, acc)
    if CASE == "acc_in_registers":
        tcgen05_mma(a_smem, b32, gl.zeros([128, 32], gl.float32, gl.BlockedLayout([1, 32], [32, 1], [4, 1], [1, 0])))
    if CASE == "preds":
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        tcgen05_mma(a_smem, b32, acc, mbarriers=[bar], mbarrier_preds=[True, True])


@pytest.mark.parametrize("case,message", [
    ("shapes", "shapes do not chain"), ("multicast", "multicast must be True or False"), ("acc_type", "acc must be float32"),
    ("a_in_tmem", "a and b must both be float16, both bfloat16, both float32"), ("acc_in_registers", "acc must be a"),
    ("preds", "1 mbarriers but 2 mbarrier_preds"),
])
def test_frontend_errors_name_the_line(case, message):
    with pytest.raises(CompilationError, match=message) as info:
        bad_call.compile(target="sm_100a", num_warps=4, CASE=case)
    lines = [i for i, text in enumerate(open(bad_call.fn.__code__.co_filename).read().splitlines(), 1)
             if "tcgen05_mma(" in text and i >= line_containing(bad_call.fn, f'CASE == "{case}"')]
    assert f":{lines[0]}:" in str(info.value), str(info.value)


def test_barrier_count_of_one_cta_is_one():
    assert tcgen05_mma_barrier_count([], False, False) == 1


# ------------------------------------------------------------------------ ptxas
@needs_ptxas
@pytest.mark.parametrize("ptr,b_kmajor", [("*fp16", False), ("*bf16", True), ("*fp32", True), ("*fp8e4nv", True)])
def test_ptxas_accepts_sm_100a(ptr, b_kmajor):
    k = 32 if ptr == "*fp32" else 64
    kernel = mma.compile(f"{ptr}:16", f"{ptr}:16", "*fp32:16", target="sm_100a", num_warps=4, M=128, N=64, K=k,
                         B_KMAJOR=b_kmajor, ACC=True)
    assert kernel.asm["cubin"]
    ptx = kernel.asm["ptx"]
    bits = {"*fp32": 32, "*fp8e4nv": 8}.get(ptr, 16)
    assert ptx.count("tcgen05.mma.cta_group::1.kind::") == k * bits // 256  # one MMA per 32 bytes of K
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64" in ptx


def test_mma_on_sm_90a_is_an_error_at_the_users_line():
    with pytest.raises(CompilationError, match="sm_100a"):
        mma.compile("*fp16:16", "*fp16:16", "*fp32:16", target="sm_90a", num_warps=4, M=128, N=64, K=64,
                    B_KMAJOR=False, ACC=False)
