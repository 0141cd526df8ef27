"""``tcgen05_mma`` with A read from tensor memory (the ``[a_tmem]`` form, P V of attention, and every
other input kind: tf32, fp8): the interpreter against float64, a store into A under the MMA reported,
the frontend's errors at the user's line, and ptxas for sm_100a (the instruction descriptors and forms
are compared with Triton 3.9's in ``tests/test_triton39_crosscheck.py``, ``attention_block-*-p_tmem``
and ``tmem_a-*``)."""

import math
import re

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia import blackwell
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, fence_async_shared, mbarrier,
                                                tcgen05_mma)
from kernel_checks import needs_ptxas

import attention_kernels
from tcgen05_kernels import tensor_core_values, tmem_a_mma

attention_block = gluonkit.jit(attention_kernels.attention_block_source(gl, blackwell))
_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
       "float8e4nv": ml_dtypes.float8_e4m3fn, "float8e5": ml_dtypes.float8_e5m2}
_PTR = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float8e4nv": "fp8e4nv", "float8e5": "fp8e5"}

# (dtype, M, N, K, B K-major): tf32 reads B K-major only; fp8 both ways; several K steps each; M 128 and 64.
TMEM_A_CASES = [("float32", 128, 64, 32, True), ("float32", 128, 32, 64, True), ("float8e4nv", 128, 64, 64, True),
                ("float8e4nv", 128, 32, 128, False), ("float8e5", 128, 64, 128, True), ("bfloat16", 128, 16, 64, False),
                ("float16", 64, 64, 64, False), ("float8e5", 64, 32, 64, True), ("float32", 64, 32, 32, True)]


@pytest.mark.parametrize("dtype, M, N, K, b_kmajor", TMEM_A_CASES)
def test_a_from_tensor_memory_of_every_kind_matches_float64(monkeypatch, dtype, M, N, K, b_kmajor):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng(M + N + K)
    a = rng.standard_normal((M, K)).astype(_NP[dtype])
    b = rng.standard_normal((N, K) if b_kmajor else (K, N)).astype(_NP[dtype])
    c = np.full((M, N), np.nan, np.float32)
    tmem_a_mma[(1,)](a, b, c, M=M, N=N, K=K, B_KMAJOR=b_kmajor, num_warps=4)
    b_kn = tensor_core_values(b).T if b_kmajor else tensor_core_values(b)
    np.testing.assert_allclose(c, (tensor_core_values(a) @ b_kn).astype(np.float32), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype, D, BLOCK_N", [("float16", 64, 128), ("bfloat16", 128, 64), ("float16", 64, 32)])
def test_p_from_tensor_memory_in_the_interpreter(monkeypatch, dtype, D, BLOCK_N):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    q = rng.standard_normal((128, D)).astype(_NP[dtype])
    k, v = (rng.standard_normal((BLOCK_N, D)).astype(_NP[dtype]) for _ in range(2))
    o = np.full((128, D), np.nan, _NP[dtype])
    attention_block[(1,)](q, k, v, o, D=D, BLOCK_N=BLOCK_N, P_TMEM=True, num_warps=4)
    s = q.astype(np.float64) @ k.astype(np.float64).T * 0.18033688011112042 * math.log(2)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = p @ v.astype(np.float64) / p.sum(1, keepdims=True)
    tol = 3e-2 if dtype == "bfloat16" else 5e-3   # P rounded to 16 bits, as the tensor cores read it
    assert np.abs(o.astype(np.float64) - ref).max() < tol


@gluonkit.jit
def _overwrite_a(v_ptr, o_ptr, WAIT_FIRST: gl.constexpr):
    """O = P V with P (all ones) from tensor memory; then P is overwritten, after or before the wait."""
    blk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    v_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([32, 64], gl.float16)
    rows = gl.arange(0, 32, gl.SliceLayout(1, blk))
    cols = gl.arange(0, 64, gl.SliceLayout(0, blk))
    v_smem = gl.allocate_shared_memory(gl.float16, [32, 64], v_layout, gl.load(v_ptr + rows[:, None] * 64 + cols[None, :]))
    p_tmem = allocate_tensor_memory(gl.float16, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
    o_tmem = allocate_tensor_memory(gl.float32, [128, 64], TensorMemoryLayout([128, 64], col_stride=1))
    p_reg: gl.constexpr = p_tmem.get_reg_layout()
    p_tmem.store(gl.full([128, 32], 1.0, gl.float16, p_reg))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False, mbarriers=[bar])
    if WAIT_FIRST:
        mbarrier.wait(bar, 0)
        p_tmem.store(gl.full([128, 32], 2.0, gl.float16, p_reg))
    else:
        p_tmem.store(gl.full([128, 32], 2.0, gl.float16, p_reg))
        mbarrier.wait(bar, 0)
    o_reg: gl.constexpr = o_tmem.get_reg_layout()
    r = gl.arange(0, 128, gl.SliceLayout(1, o_reg))
    c = gl.arange(0, 64, gl.SliceLayout(0, o_reg))
    gl.store(o_ptr + r[:, None] * 64 + c[None, :], o_tmem.load(o_reg))
    mbarrier.invalidate(bar)


def test_a_store_under_the_mma_is_reported(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    v = np.random.default_rng().standard_normal((32, 64)).astype(np.float16)
    o = np.full((128, 64), np.nan, np.float32)
    _overwrite_a[(1,)](v, o, WAIT_FIRST=True, num_warps=4)
    np.testing.assert_allclose(o, np.broadcast_to(v.astype(np.float64).sum(0), (128, 64)), rtol=1e-6)
    with pytest.raises(InterpreterError, match=r"tmem_store writes tensor memory that the tcgen05_mma at line \d+ "
                                               r"may still be reading \(its A operand\)") as info:
        _overwrite_a[(1,)](v, o, WAIT_FIRST=False, num_warps=4)
    assert "test_tcgen05_tmem_operand.py" in str(info.value)


@gluonkit.jit
def _bad_operand(WHICH: gl.constexpr):
    v_smem = gl.allocate_shared_memory(gl.float16, [32, 64], gl.NVMMASharedLayout.get_default_for([32, 64], gl.float16))
    o_tmem = allocate_tensor_memory(gl.float32, [128, 64], TensorMemoryLayout([128, 64], col_stride=1))
    if WHICH == "unpacked":
        p_tmem = allocate_tensor_memory(gl.float16, [128, 32], TensorMemoryLayout([128, 32], col_stride=2))
        tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False)
    elif WHICH == "int8":
        p_tmem = allocate_tensor_memory(gl.int8, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
        tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False)
    elif WHICH == "fp8_unpacked":
        p_tmem = allocate_tensor_memory(gl.float8e4nv, [128, 32], TensorMemoryLayout([128, 32], col_stride=4))
        tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False)
    elif WHICH == "b":
        p_tmem = allocate_tensor_memory(gl.float16, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
        tcgen05_mma(v_smem, p_tmem, o_tmem, use_acc=False)
    else:
        p_tmem = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout([128, 32], col_stride=1))
        tcgen05_mma(p_tmem, v_smem, o_tmem, use_acc=False)


@pytest.mark.parametrize("which, message", [
    ("unpacked", "a in tensor memory must be packed"),
    ("b", "b must be in shared memory"),
    ("fp8_unpacked", r"a in tensor memory must be packed \(TensorMemoryLayout col_stride=1: 4 float8e4nv per 32-bit column\), got col_stride=4"),
    ("int8", "a in tensor memory must be an MMA input type"),
    ("fp32", "a and b must both be float16, both bfloat16, both float32"),
])
def test_bad_tensor_memory_operands_are_errors_at_the_call(which, message):
    with pytest.raises(gluonkit.CompilationError, match=message) as info:
        _bad_operand.compile(WHICH=which, num_warps=4, target="sm_100a")
    assert "tcgen05_mma(" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("D, BLOCK_N", [(64, 128), (128, 64)])
def test_a_from_tensor_memory_compiles_for_sm_100a(D, BLOCK_N):
    compiled = attention_block.compile("*fp16:16", "*fp16:16", "*fp16:16", "*fp16:16", D=D, BLOCK_N=BLOCK_N,
                                       P_TMEM=True, num_warps=4, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    ts = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+, %p\d+;", ptx)
    assert len(ts) == BLOCK_N // 16   # P V: one per 16 keys, A's address 8 columns further each time
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == len(ts) + D // 16


@needs_ptxas
@pytest.mark.parametrize("dtype, M, N, K, b_kmajor", TMEM_A_CASES)
def test_a_from_tensor_memory_of_every_kind_compiles_for_sm_100a(dtype, M, N, K, b_kmajor):
    ptr = _PTR[dtype]
    compiled = tmem_a_mma.compile(f"*{ptr}:16", f"*{ptr}:16", "*fp32:16", M=M, N=N, K=K, B_KMAJOR=b_kmajor,
                                  num_warps=4, target="sm_100a")
    assert compiled.asm["cubin"]
    kind = {"float32": "tf32", "bfloat16": "f16", "float16": "f16"}.get(dtype, "f8f6f4")
    ts = re.findall(rf"tcgen05\.mma\.cta_group::1\.kind::{kind} \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+, %p\d+;",
                    compiled.asm["ptx"])
    assert len(ts) == K * np.dtype(_NP[dtype]).itemsize // 32   # one per 32 bytes of K, A 8 columns further each
