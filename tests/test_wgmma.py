"""Hopper warpgroup MMA: frontend and verifier errors, interpreter GEMMs and hazards, sm_90a lowering.

The GEMM kernel stages A and B through NVMMA shared memory (or keeps A in registers) and
multiplies one tile; ``tests/test_gpu_wgmma.py`` runs the same kernel on the GPU.
"""

from __future__ import annotations

import importlib.util
import os
import re

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.lang as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.lang.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait
from gluonkit.lower.ptxas import find_ptxas
from gluonkit.lower.wgmma_descriptor import describe_operand

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
DTYPES = {"float16": (gl.float16, np.float16), "bfloat16": (gl.bfloat16, ml_dtypes.bfloat16)}


def acc_layout(num_warps: int, n: int, instr_n: int = None):
    return gl.NVMMADistributedLayout([3, 0], [num_warps, 1], [16, instr_n or n, 16])


def io_layout(num_warps: int):
    return gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])


# --------------------------------------------------------------------------- kernels
@gluonkit.jit
def _load_tile(ptr, ROWS: gl.constexpr, COLS: gl.constexpr, row_stride, col_stride, layout: gl.constexpr):
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    return gl.load(ptr + rows[:, None] * row_stride + cols[None, :] * col_stride)


@gluonkit.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, use_acc, M: gl.constexpr, N: gl.constexpr, K: gl.constexpr,
                DTYPE: gl.constexpr, io: gl.constexpr, acc_layout: gl.constexpr, a_smem_layout: gl.constexpr,
                b_smem_layout: gl.constexpr, A_MODE: gl.constexpr, B_KMAJOR: gl.constexpr, IS_ASYNC: gl.constexpr):
    """C = A @ B (+ C where use_acc != 0) for one [M, K] x [K, N] tile, all row-major in memory.

    A_MODE: "k" (A in shared memory, K contiguous), "m" (A^T stored, M contiguous, permuted
    back) or "regs" (A in registers); B_KMAJOR stores B^T (K contiguous) and permutes it.
    """
    if A_MODE == "regs":
        a_op = gl.convert_layout(_load_tile(a_ptr, M, K, K, 1, io), gl.DotOperandLayout(0, acc_layout, 2))
    elif A_MODE == "k":
        a_op = gl.allocate_shared_memory(DTYPE, [M, K], a_smem_layout, _load_tile(a_ptr, M, K, K, 1, io))
    else:
        a_op = gl.allocate_shared_memory(DTYPE, [K, M], a_smem_layout, _load_tile(a_ptr, K, M, 1, K, io)).permute((1, 0))
    if B_KMAJOR:
        b_op = gl.allocate_shared_memory(DTYPE, [N, K], b_smem_layout, _load_tile(b_ptr, N, K, 1, N, io)).permute((1, 0))
    else:
        b_op = gl.allocate_shared_memory(DTYPE, [K, N], b_smem_layout, _load_tile(b_ptr, K, N, N, 1, io))
    fence_async_shared()
    acc = gl.convert_layout(_load_tile(c_ptr, M, N, N, 1, io), acc_layout)
    if IS_ASYNC:
        token = warpgroup_mma(a_op, b_op, acc, use_acc=use_acc != 0, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[token])
    else:
        acc = warpgroup_mma(a_op, b_op, acc, use_acc=use_acc != 0)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, io))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, io))
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], gl.convert_layout(acc, io))


def gemm_args(m, n, k, dtype="float16", swizzle_a=128, swizzle_b=128, a_mode="k", b_kmajor=False,
              is_async=False, num_warps=4, instr_n=None):
    """Keyword arguments of ``gemm_kernel`` for one configuration."""
    gl_dtype = DTYPES[dtype][0]
    return dict(M=m, N=n, K=k, DTYPE=gl_dtype, io=io_layout(num_warps), acc_layout=acc_layout(num_warps, n, instr_n),
                a_smem_layout=gl.NVMMASharedLayout(swizzle_a, 16), b_smem_layout=gl.NVMMASharedLayout(swizzle_b, 16),
                A_MODE=a_mode, B_KMAJOR=b_kmajor, IS_ASYNC=is_async, num_warps=num_warps)


def random_inputs(m, n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    np_dtype = DTYPES[dtype][1]
    a = rng.standard_normal((m, k)).astype(np_dtype)
    b = rng.standard_normal((k, n)).astype(np_dtype)
    c = rng.standard_normal((m, n)).astype(np.float32)
    return a, b, c


def reference(a, b, c, use_acc):
    out = a.astype(np.float64) @ b.astype(np.float64)
    return out + c if use_acc else out


def interpret(kernel, *args, **kw):
    saved = os.environ.get("GLUONKIT_INTERPRET")
    os.environ["GLUONKIT_INTERPRET"] = "1"
    try:
        kernel[(1,)](*args, **kw)
    finally:
        if saved is None:
            del os.environ["GLUONKIT_INTERPRET"]
        else:
            os.environ["GLUONKIT_INTERPRET"] = saved


def run_gemm(m, n, k, use_acc=1, seed=0, **config):
    a, b, c = random_inputs(m, n, k, config.get("dtype", "float16"), seed)
    out = c.copy()
    interpret(gemm_kernel, a, b, out, use_acc, **gemm_args(m, n, k, **config))
    return out, reference(a, b, c, use_acc)


def load_source(tmp_path, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------- interpreter
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("a_mode", ["k", "m", "regs"])
@pytest.mark.parametrize("b_kmajor", [False, True])
def test_interpreter_multiplies_one_tile(dtype, a_mode, b_kmajor):
    out, expected = run_gemm(64, 64, 64, dtype=dtype, a_mode=a_mode, b_kmajor=b_kmajor)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
def test_interpreter_multiplies_with_every_swizzle(swizzle):
    out, expected = run_gemm(64, 64, 64, swizzle_a=swizzle, swizzle_b=swizzle, b_kmajor=swizzle == 64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_interpreter_two_warpgroups_128x128(dtype):
    out, expected = run_gemm(128, 128, 64, dtype=dtype, num_warps=8, instr_n=64, is_async=True, a_mode="regs")
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_interpreter_use_acc_false_ignores_the_accumulator():
    out, expected = run_gemm(64, 32, 64, use_acc=0, is_async=True, instr_n=32, swizzle_b=64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


# --------------------------------------------------------------------- async hazards
HAZARD_SOURCE = '''import gluonkit, gluonkit.lang as gl
from gluonkit.lang.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait
ACC: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])
IO: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
SMEM: gl.constexpr = gl.NVMMASharedLayout(128, 16)
@gluonkit.jit
def kernel(out_ptr, MODE: gl.constexpr):
    x = gl.full([64, 64], 1.0, gl.float16, IO)
    a = gl.allocate_shared_memory(gl.float16, [64, 64], SMEM, x)
    b = gl.allocate_shared_memory(gl.float16, [64, 64], SMEM, x)
    fence_async_shared()
    acc = gl.zeros([64, 64], gl.float32, ACC)
    tok = warpgroup_mma(a, b, acc, is_async=True)
    if MODE == "overwrite":
        b.store(x)
    tok2 = warpgroup_mma(a, b, tok, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=1, deps=[tok2])
    if MODE == "early_read":
        acc = acc + 1.0
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, IO))
    cols = gl.arange(0, 64, layout=gl.SliceLayout(0, IO))
    gl.store(out_ptr + rows[:, None] * 64 + cols[None, :], gl.convert_layout(acc, IO))
'''


def test_chained_async_mmas_complete_at_the_wait(tmp_path):
    module = load_source(tmp_path, "hazard_ok", HAZARD_SOURCE)
    out = np.zeros((64, 64), np.float32)
    interpret(module.kernel, out, MODE="ok")
    np.testing.assert_array_equal(out, 128.0)


def test_overwriting_a_buffer_an_async_mma_reads_names_both_lines(tmp_path):
    module = load_source(tmp_path, "hazard_overwrite", HAZARD_SOURCE)
    with pytest.raises(InterpreterError) as err:
        interpret(module.kernel, np.zeros((64, 64), np.float32), MODE="overwrite")
    text = str(err.value)
    assert "local_store overwrites the shared buffer" in text
    assert "the asynchronous warpgroup_mma at line 13" in text and "hazard_overwrite.py:15" in text
    assert "warpgroup_mma_wait" in text


def test_reading_an_in_flight_result_names_both_lines(tmp_path):
    module = load_source(tmp_path, "hazard_read", HAZARD_SOURCE)
    with pytest.raises(InterpreterError) as err:
        interpret(module.kernel, np.zeros((64, 64), np.float32), MODE="early_read")
    text = str(err.value)
    assert "reads the result of the asynchronous warpgroup_mma at line 16" in text
    assert "hazard_read.py:19" in text and "acc = acc + 1.0" in text


# ------------------------------------------------------------------- frontend errors
@pytest.mark.parametrize("call, fragment", [
    ("warpgroup_mma(a, b, gl.zeros([64, 64], gl.float32, IO))", "NVMMADistributedLayout of version [3, 0]"),
    ("warpgroup_mma(a, b, gl.zeros([64, 64], gl.float16, ACC))", "acc must be float32"),
    ("warpgroup_mma(a, a32, gl.zeros([64, 32], gl.float32, ACC32))", "instr_shape N (64)"),
    ("warpgroup_mma(a.slice(0, 32, 0), b, gl.zeros([32, 64], gl.float32, ACC))", "M = 32 must be a multiple of 64"),
    ("warpgroup_mma(a, b.slice(0, 32, 0), gl.zeros([64, 64], gl.float32, ACC))", "shapes do not chain"),
    ("warpgroup_mma(gl.full([64, 64], 1.0, gl.float16, IO), b, gl.zeros([64, 64], gl.float32, ACC))",
     "a in registers must have the layout DotOperandLayout(operand_index=0"),
    ("warpgroup_mma(a, gl.full([64, 64], 1.0, gl.float16, IO), gl.zeros([64, 64], gl.float32, ACC))",
     "b must be a shared memory descriptor"),
    ("warpgroup_mma(a, bf, gl.zeros([64, 64], gl.float32, ACC))", "same 16-bit type"),
    ("warpgroup_mma(a, b, gl.zeros([64, 64], gl.float32, ACC), precision='fast')", "precision must be one of"),
    ("warpgroup_mma_wait(0)", "deps must be given"),
])
def test_frontend_errors_name_the_line(tmp_path, call, fragment):
    source = ("import gluonkit, gluonkit.lang as gl\n"
              "from gluonkit.lang.hopper import warpgroup_mma, warpgroup_mma_wait\n"
              "ACC: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])\n"
              "ACC32: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16])\n"
              "IO: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])\n"
              "@gluonkit.jit\ndef bad(x_ptr):\n"
              "    a = gl.allocate_shared_memory(gl.float16, [64, 64], gl.NVMMASharedLayout(128, 16))\n"
              "    b = gl.allocate_shared_memory(gl.float16, [64, 64], gl.NVMMASharedLayout(128, 16))\n"
              "    bf = gl.allocate_shared_memory(gl.bfloat16, [64, 64], gl.NVMMASharedLayout(128, 16))\n"
              "    a32 = gl.allocate_shared_memory(gl.float16, [64, 32], gl.NVMMASharedLayout(64, 16))\n"
              f"    {call}\n")
    module = load_source(tmp_path, "bad_wgmma", source)
    with pytest.raises(CompilationError) as err:
        module.bad.build_ir([gl.pointer_type(gl.float32)])
    assert fragment in str(err.value)
    assert "bad_wgmma.py:12" in str(err.value)


def test_async_token_is_not_a_tensor(tmp_path):
    source = HAZARD_SOURCE.replace("    tok2 = warpgroup_mma(a, b, tok, is_async=True)\n",
                                   "    tok2 = warpgroup_mma(a, b, tok, is_async=True)\n    y = tok2 + 1.0\n")
    module = load_source(tmp_path, "token_math", source)
    with pytest.raises(CompilationError, match="warpgroup_mma_accumulator"):
        module.kernel.build_ir([gl.pointer_type(gl.float32)], dict(MODE="ok"))


# ------------------------------------------------------------------------ verifier
def test_verifier_rejects_fp8_b_that_is_not_k_major():
    from ir_helpers import KernelBuilder

    k = KernelBuilder()
    smem = gl.NVMMASharedLayout(128, 8)
    layout = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 128, 32])
    a = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.float8e4nv, (64, 128), smem, (64, 128)))
    b = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.float8e4nv, (128, 128), smem, (128, 128)))
    acc = k.value("constant", [], ir.TensorType(ir.float32, (64, 128), layout), {"value": 0.0})
    flag = k.value("constant", [], ir.int1, {"value": True})
    k.value("warpgroup_mma", [a, b, acc, flag], acc.type,
            {"precision": None, "max_num_imprecise_acc": None, "is_async": False}, src="warpgroup_mma(a, b, acc)")
    with pytest.raises(CompilationError) as err:
        ir.verify(k.finish())
    assert "fp8 b must be K-major" in str(err.value) and "warpgroup_mma(a, b, acc)" in str(err.value)


# ---------------------------------------------------------------- descriptors (algebra)
@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("transposed", [False, True])
def test_descriptor_strides_come_from_the_layout(swizzle, transposed):
    """B = [64, 64] fp16: K-major when the layout is transposed; LBO/SBO as the PTX ISA's canonical layouts."""
    layout = gl.NVMMASharedLayout(swizzle, 16, transposed=transposed)
    view = ir.SharedMemoryDescType(ir.float16, (64, 64), layout, (64, 64))
    plan = describe_operand(view, 1, 0, 1024, 64, 16, ir.UNKNOWN_LOCATION)
    assert plan.k_major == transposed
    if transposed:  # K-major: SBO = 8 rows of one swizzle width; LBO unused (1)
        assert (plan.sbo, plan.lbo) == (8 * swizzle, 16)
    else:  # MN-major: SBO = 8 K rows; LBO = the next swizzle-width block of N (unused within one)
        assert (plan.sbo, plan.lbo) == (8 * swizzle, 64 * swizzle if swizzle < 128 else 0)
    assert plan.base >> 62 == {128: 1, 64: 2, 32: 3}[swizzle]


def core_matrix_layout(k_major: bool) -> gl.SharedLinearLayout:
    """A [64, 64] fp16 A operand in wgmma's unswizzled core-matrix layout (8 x 16-byte blocks)."""
    inner, outer = ([0, 1], [1, 0]) if k_major else ([1, 0], [0, 1])
    scale = lambda v, s: [c * s for c in v]  # noqa: E731
    bases = [scale(inner, 1 << i) for i in range(3)] + [scale(outer, 1 << i) for i in range(3)]
    bases += [scale(inner, 8 << i) for i in range(3)] + [scale(outer, 8 << i) for i in range(3)]
    return gl.SharedLinearLayout(bases)


@pytest.mark.parametrize("k_major", [True, False])
def test_unswizzled_core_matrices_give_interleave_descriptors(k_major):
    view = ir.SharedMemoryDescType(ir.float16, (64, 64), core_matrix_layout(k_major), (64, 64))
    plan = describe_operand(view, 0, 0, 1024, 64, 16, ir.UNKNOWN_LOCATION)
    assert plan.k_major == k_major and plan.swizzle == 0 and plan.base >> 62 == 0
    # 8 core matrices (1024 bytes) along the inner dimension, then the outer one
    assert (plan.lbo, plan.sbo) == ((128, 1024) if k_major else (1024, 128))


def test_row_major_unswizzled_tiles_are_refused_with_the_reason():
    view = ir.SharedMemoryDescType(ir.float16, (64, 64), gl.NVMMASharedLayout(0, 16), (64, 64))
    with pytest.raises(CompilationError, match="bit 0 of M/N is 128 bytes from the start where the K-major canonical layout has 16"):
        describe_operand(view, 0, 0, 1024, 64, 16, ir.UNKNOWN_LOCATION)


# ------------------------------------------------------------------------- lowering
def _compile(target="sm_90a", **config):
    args = gemm_args(**config)
    num_warps = args.pop("num_warps")
    return gemm_kernel.compile("*fp16:16" if config.get("dtype", "float16") == "float16" else "*bf16:16",
                               "*fp16:16" if config.get("dtype", "float16") == "float16" else "*bf16:16",
                               "*fp32:16", "i32", target=target, num_warps=num_warps, **args)


@needs_ptxas
@pytest.mark.parametrize("config", [
    dict(m=64, n=64, k=64),
    dict(m=64, n=64, k=64, dtype="bfloat16", a_mode="regs", b_kmajor=True, is_async=True),
    dict(m=64, n=128, k=32, a_mode="m", swizzle_a=64, swizzle_b=32),
    dict(m=128, n=128, k=64, num_warps=8, instr_n=64, swizzle_a=64, swizzle_b=32, b_kmajor=True),
], ids=["ss", "rs_bf16_async", "m_major_a", "two_warpgroups"])
def test_lowers_to_wgmma_for_sm90a(config):
    c = _compile(m=config.pop("m"), n=config.pop("n"), k=config.pop("k"), **config)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    for instruction in ("wgmma.fence.sync.aligned", "wgmma.mma_async.sync.aligned.m64n",
                        "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 0"):
        assert instruction in ptx, instruction
    assert not re.search(r"\.local|ld\.local|st\.local", ptx), "local memory (spills) in the PTX"


@needs_ptxas
def test_sm100a_has_no_wgmma():
    with pytest.raises(CompilationError) as err:
        _compile(m=64, n=64, k=64, target="sm_100a")
    assert "sm_100a has no wgmma" in str(err.value) and "warpgroup_mma(a_op, b_op, acc" in str(err.value)
