"""Hopper warpgroup MMA: frontend and verifier errors, interpreter GEMMs and hazards, sm_90a lowering.

The GEMM kernel stages A and B through NVMMA shared memory (or keeps A in registers) and
multiplies one tile; ``tests/test_gpu_wgmma.py`` runs the same kernel on the GPU.
"""

from __future__ import annotations

import importlib.util
import re

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluonkit.ir.memdesc import view_to_offset
from gluonkit.lower.nvidia.wgmma_descriptor import describe_operand
from gluonkit.nvidia.hopper import TensorDescriptor
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

DTYPES = {"float16": (gl.float16, np.float16), "bfloat16": (gl.bfloat16, ml_dtypes.bfloat16)}
#: Inputs that wgmma reads K-major only (tf32 from float32, fp8): A [M, K], B as a permuted [N, K] buffer.
K_MAJOR_DTYPES = {"float32": (gl.float32, np.float32), "float8e4nv": (gl.float8e4nv, ml_dtypes.float8_e4m3fn),
                  "float8e5": (gl.float8e5, ml_dtypes.float8_e5m2)}
ALL_DTYPES = {**DTYPES, **K_MAJOR_DTYPES}
SIGNATURE = {"float16": "*fp16:16", "bfloat16": "*bf16:16", "float32": "*fp32:16", "float8e4nv": "*fp8e4nv:16",
             "float8e5": "*fp8e5:16"}


def bits(dtype: str) -> int:
    return np.dtype(ALL_DTYPES[dtype][1]).itemsize * 8


def acc_layout(num_warps: int, n: int, instr_n: int = None, dtype: str = "float16"):
    """The wgmma accumulator layout; its instruction K is 32 bytes of ``dtype`` elements."""
    return gl.NVMMADistributedLayout([3, 0], [num_warps, 1], [16, instr_n or n, 256 // bits(dtype)])


def tf32(x: np.ndarray) -> np.ndarray:
    """float32 values as the tensor cores read them for tf32: the low 13 mantissa bits dropped."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


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
                b_smem_layout: gl.constexpr, A_MODE: gl.constexpr, B_KMAJOR: gl.constexpr, IS_ASYNC: gl.constexpr,
                K_WIDTH: gl.constexpr = 2):
    """C = A @ B (+ C where use_acc != 0) for one [M, K] x [K, N] tile, all row-major in memory.

    A_MODE: "k" (A in shared memory, K contiguous), "m" (A^T stored, M contiguous, permuted
    back) or "regs" (A in registers, K_WIDTH = 32 // bits elements per register); B_KMAJOR
    stores B^T (K contiguous) and permutes it.
    """
    if A_MODE == "regs":
        a_op = gl.convert_layout(_load_tile(a_ptr, M, K, K, 1, io), gl.DotOperandLayout(0, acc_layout, K_WIDTH))
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


@gluonkit.jit
def tma_gemm_kernel(a_desc, bt_desc, c_ptr, acc_layout: gl.constexpr, io: gl.constexpr):
    """C = A @ B for one tile: A [M, K] and B^T [N, K] brought in by TMA, B read as the permuted view.

    The form tf32 and fp8 wgmma need (both operands K-major), as a TMA pipeline stages them.
    """
    M: gl.constexpr = a_desc.block_type.shape[0]
    K: gl.constexpr = a_desc.block_type.shape[1]
    N: gl.constexpr = bt_desc.block_type.shape[0]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, [M, K], a_desc.layout)
    bt_smem = gl.allocate_shared_memory(bt_desc.dtype, [N, K], bt_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, a_desc.block_type.nbytes + bt_desc.block_type.nbytes)
    tma.async_load(a_desc, [0, 0], bar, a_smem)
    tma.async_load(bt_desc, [0, 0], bar, bt_smem)
    mbarrier.wait(bar, 0)
    acc = warpgroup_mma(a_smem, bt_smem.permute((1, 0)), gl.zeros([M, N], gl.float32, acc_layout))
    mbarrier.invalidate(bar)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, io))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, io))
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], gl.convert_layout(acc, io))


def tma_descriptors(a, bt, dtype: str):
    """TMA descriptors of A [M, K] and B^T [N, K] (numpy arrays or torch tensors), whole-tile blocks."""
    gl_dtype = ALL_DTYPES[dtype][0]
    return [TensorDescriptor.from_tensor(x, list(x.shape), gl.NVMMASharedLayout.get_default_for(list(x.shape), gl_dtype))
            for x in (a, bt)]


def gemm_args(m, n, k, dtype="float16", swizzle_a=128, swizzle_b=128, a_mode="k", b_kmajor=False,
              is_async=False, num_warps=4, instr_n=None):
    """Keyword arguments of ``gemm_kernel`` for one configuration."""
    gl_dtype, width = ALL_DTYPES[dtype][0], bits(dtype)
    return dict(M=m, N=n, K=k, DTYPE=gl_dtype, io=io_layout(num_warps),
                acc_layout=acc_layout(num_warps, n, instr_n, dtype),
                a_smem_layout=gl.NVMMASharedLayout(swizzle_a, width), b_smem_layout=gl.NVMMASharedLayout(swizzle_b, width),
                A_MODE=a_mode, B_KMAJOR=b_kmajor, IS_ASYNC=is_async, K_WIDTH=32 // width, num_warps=num_warps)


def random_inputs(m, n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    np_dtype = ALL_DTYPES[dtype][1]
    a = rng.standard_normal((m, k)).astype(np_dtype)
    b = rng.standard_normal((k, n)).astype(np_dtype)
    c = rng.standard_normal((m, n)).astype(np.float32)
    return a, b, c


def reference(a, b, c, use_acc):
    """float64 A @ B (+ C) of the values the tensor cores multiply (float32 inputs as tf32)."""
    if a.dtype == np.float32:
        a, b = tf32(a), tf32(b)
    out = a.astype(np.float64) @ b.astype(np.float64)
    return out + c if use_acc else out


def interpret(kernel, *args, **kw):
    with interpreter_on():
        kernel[(1,)](*args, **kw)


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


#: tf32 and fp8 tiles (K-major A in shared memory or registers, B a permuted [N, K] buffer) over
#: the swizzles (a swizzled row must fit in K: 32 float32 or 128 fp8 elements for 128 bytes) and N sizes.
K_MAJOR_CONFIGS = [
    dict(dtype="float32", m=64, n=64, k=64),
    dict(dtype="float32", m=64, n=32, k=32, swizzle_a=64, swizzle_b=64, a_mode="regs", instr_n=32),
    dict(dtype="float32", m=64, n=128, k=16, swizzle_a=32, swizzle_b=32, is_async=True),
    dict(dtype="float32", m=128, n=128, k=32, num_warps=8, instr_n=64, swizzle_b=64, a_mode="regs", is_async=True),
    dict(dtype="float8e4nv", m=64, n=64, k=128),
    dict(dtype="float8e4nv", m=64, n=128, k=64, swizzle_a=64, swizzle_b=32, a_mode="regs"),
    dict(dtype="float8e5", m=64, n=32, k=64, swizzle_a=64, swizzle_b=64, instr_n=32, is_async=True),
    dict(dtype="float8e5", m=128, n=128, k=128, num_warps=8, instr_n=64, swizzle_b=32, a_mode="regs"),
]


def config_id(config):
    return "-".join(f"{k}{v}" for k, v in config.items())


@pytest.mark.parametrize("config", K_MAJOR_CONFIGS, ids=config_id)
@pytest.mark.parametrize("use_acc", [1, 0])
def test_interpreter_multiplies_tf32_and_fp8(config, use_acc):
    config = dict(config)
    m, n, k = config.pop("m"), config.pop("n"), config.pop("k")
    out, expected = run_gemm(m, n, k, use_acc=use_acc, seed=m + n + k, b_kmajor=True, **config)
    # Products of the (tf32-truncated or fp8) inputs are exact and summed in float64 on both sides.
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("dtype, m, n, k", [("float32", 64, 64, 32), ("float32", 64, 128, 64),
                                           ("float8e4nv", 64, 64, 128), ("float8e5", 64, 32, 64)])
def test_interpreter_tma_staged_k_major_gemm(dtype, m, n, k):
    a, b, _ = random_inputs(m, n, k, dtype, seed=k)
    bt = np.ascontiguousarray(b.T)
    out = np.full((m, n), np.nan, np.float32)
    interpret(tma_gemm_kernel, *tma_descriptors(a, bt, dtype), out, acc_layout(4, n, dtype=dtype), io_layout(4),
              num_warps=4)
    np.testing.assert_allclose(out, reference(a, b, 0, False), rtol=1e-6, atol=1e-5)


def test_interpreter_truncates_float32_inputs_to_tf32():
    """1 + 3 * 2**-12 is 0.75 tf32 ulp above 1: truncation reads 1 (rounding would read 1 + 2**-10)."""
    m = n = 64
    k = 32
    a = np.full((m, k), 1 + 3 * 2.0 ** -12, np.float32)
    b = np.zeros((k, n), np.float32)
    b[0] = 1 + 2.0 ** -13  # also truncated to 1
    out = np.zeros((m, n), np.float32)
    interpret(gemm_kernel, a, b, out, 0, **gemm_args(m, n, k, dtype="float32", b_kmajor=True))
    np.testing.assert_array_equal(out, 1.0)


def test_interpreter_tf32_differs_from_float32_products():
    """The tf32 model matters: the float32 (untruncated) product is farther off than the tolerance."""
    out, expected = run_gemm(64, 64, 64, dtype="float32", b_kmajor=True)
    a, b, c = random_inputs(64, 64, 64, "float32")
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    assert np.abs(out - exact).max() > 100 * np.abs(out - expected).max() + 1e-3


# --------------------------------------------------------------------- async hazards
HAZARD_SOURCE = '''import gluonkit, gluonkit.lang as gl
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
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
    ("warpgroup_mma(a, bf, gl.zeros([64, 64], gl.float32, ACC))", "must have the same type"),
    ("warpgroup_mma(a, b, gl.zeros([64, 64], gl.float32, ACC), precision='fast')", "precision must be one of"),
    ("warpgroup_mma_wait(0)", "deps must be given"),
])
def test_frontend_errors_name_the_line(tmp_path, call, fragment):
    source = ("import gluonkit, gluonkit.lang as gl\n"
              "from gluonkit.language.nvidia.hopper import warpgroup_mma, warpgroup_mma_wait\n"
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


@pytest.mark.parametrize("dtype, bits", [("float32", 32), ("float8e4nv", 8), ("float8e5", 8)])
@pytest.mark.parametrize("call, fragments", [
    ("warpgroup_mma(a, b, acc)", ["b must be K-major", "store B as an [N, K] buffer",
                                  "b_smem.permute((1, 0))"]),
    ("warpgroup_mma(at.permute((1, 0)), bt.permute((1, 0)), acc)", ["a must be K-major", "store A as an [M, K]"]),
    ("warpgroup_mma(a, bt.permute((1, 0)), acc, precision='ieee')", ["precision='ieee' is not supported"]),
    ("warpgroup_mma(a, bt.permute((1, 0)), acc, precision='tf32x3')", ["precision='tf32x3' is not supported"]),
    ("warpgroup_mma(a, h.permute((1, 0)), acc)", ["must have the same type"]),
])
def test_k_major_only_inputs_explain_the_fix(tmp_path, dtype, bits, call, fragments):
    """tf32 and fp8 wgmma take K-major operands only; float32 takes precision None/'tf32' only."""
    if "precision" in call and dtype != "float32":
        fragments = None  # precision only matters for float32 inputs: fp8 compiles
    if "h.permute" in call and dtype != "float32":
        fragments = ["must have the same type"]  # fp8 mixes with fp8 only
    k = max(16, 256 // bits)  # a whole instruction K, and 32 bytes of float16 for h
    source = ("import gluonkit, gluonkit.lang as gl\n"
              "from gluonkit.language.nvidia.hopper import warpgroup_mma\n"
              f"ACC: gl.constexpr = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, {256 // bits}])\n"
              f"L: gl.constexpr = gl.NVMMASharedLayout(32, {bits})\n"
              "@gluonkit.jit\ndef bad(x_ptr):\n"
              f"    a = gl.allocate_shared_memory(gl.{dtype}, [64, {k}], L)\n"
              f"    at = gl.allocate_shared_memory(gl.{dtype}, [{k}, 64], L)\n"
              f"    b = gl.allocate_shared_memory(gl.{dtype}, [{k}, 64], L)\n"
              f"    bt = gl.allocate_shared_memory(gl.{dtype}, [64, {k}], L)\n"
              f"    h = gl.allocate_shared_memory(gl.float16, [64, {k}], gl.NVMMASharedLayout(32, 16))\n"
              "    acc = gl.zeros([64, 64], gl.float32, ACC)\n"
              f"    {call}\n")
    module = load_source(tmp_path, f"bad_{dtype}", source)
    if fragments is None:
        module.bad.build_ir([gl.pointer_type(gl.float32)])
        return
    with pytest.raises(CompilationError) as err:
        module.bad.build_ir([gl.pointer_type(gl.float32)])
    for fragment in fragments:
        assert fragment in str(err.value)
    assert f"bad_{dtype}.py:13" in str(err.value)


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


def _hardware_address(plan, start: int, mn: int, k: int) -> int:
    """The byte a swizzled K-major wgmma reads for element (mn, k) of the tile at ``start``.

    The PTX ISA's canonical K-major layout with a swizzle of ``S`` bytes: 8 rows of ``S``
    bytes (K contiguous inside a row), groups of 8 rows ``SBO`` apart; then the swizzle
    XORs address bits 4.. with bits 7.. (the buffer starts on a ``8 S``-byte boundary).
    """
    e, s = plan.view.element.itemsize, plan.swizzle
    address = start + (mn % 8) * s + (mn // 8) * plan.sbo + k * e
    mask = s // 16 - 1
    return address ^ (((address >> 7) & mask) << 4)


@pytest.mark.parametrize("dtype", [ir.float32, ir.float8e4nv, ir.float8e5, ir.float16])
@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("operand", [0, 1])
def test_k_major_descriptors_read_every_element_where_the_layout_put_it(dtype, swizzle, operand):
    """Every instruction's descriptor, read by the hardware's rule, finds each element at its layout offset.

    A is an [M, K] buffer; B the [K, N] view of an [N, K] buffer (K contiguous) — the only
    forms tf32 and fp8 take.  K spans two swizzled rows, so K steps cross atoms.
    """
    e = dtype.primitive_bitwidth // 8
    k = 2 * swizzle // e
    mn, mn_inst, k_inst = 64, (64 if operand == 0 else 32), 32 // e
    layout = gl.NVMMASharedLayout(swizzle, 8 * e, transposed=operand == 1)
    shape = (mn, k) if operand == 0 else (k, mn)
    view = ir.SharedMemoryDescType(dtype, shape, layout, shape)
    plan = describe_operand(view, operand, 0, 1024, mn_inst, k_inst, ir.UNKNOWN_LOCATION)
    assert plan.k_major and plan.swizzle == swizzle and plan.base >> 62 == {128: 1, 64: 2, 32: 3}[swizzle]
    assert plan.sbo == 8 * swizzle  # 8 rows of one swizzle width
    to_offset = view_to_offset(view)
    for mn0 in range(0, mn, mn_inst):
        for k0 in range(0, k, k_inst):
            start = plan.offset_of(mn0, k0)
            for i in range(mn_inst):
                for j in range(k_inst):
                    coords = {"dim0": mn0 + i, "dim1": k0 + j} if operand == 0 else {"dim0": k0 + j, "dim1": mn0 + i}
                    assert _hardware_address(plan, start, i, j) == to_offset.apply(coords)["offset"] * e


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
    pointer = SIGNATURE[config.get("dtype", "float16")]
    return gemm_kernel.compile(pointer, pointer, "*fp32:16", "i32", target=target, num_warps=num_warps, **args)


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
@pytest.mark.parametrize("config", K_MAJOR_CONFIGS, ids=config_id)
def test_tf32_and_fp8_lower_to_their_wgmma(config):
    """ptxas accepts the tf32 (k8) and fp8 (k32) instructions, which take no transpose immediates."""
    config = dict(config)
    n = config.pop("n")
    c = _compile(m=config.pop("m"), n=n, k=config.pop("k"), b_kmajor=True, **config)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    n_inst = config.get("instr_n") or n
    ptx_type = {"float32": "tf32", "float8e4nv": "e4m3", "float8e5": "e5m2"}[config["dtype"]]
    k_inst = 256 // bits(config["dtype"])
    instruction = f"wgmma.mma_async.sync.aligned.m64n{n_inst}k{k_inst}.f32.{ptx_type}.{ptx_type} "
    lines = [line for line in ptx.splitlines() if "wgmma.mma_async" in line]
    assert lines and all(instruction in line for line in lines), lines[:1]
    assert all(re.search(r"scale_d, 1, 1; }$", line.rstrip()) for line in lines), lines[:1]  # no imm-trans
    assert not re.search(r"\.local|ld\.local|st\.local", ptx), "local memory (spills) in the PTX"


@needs_ptxas
def test_sm100a_has_no_wgmma():
    with pytest.raises(CompilationError) as err:
        _compile(m=64, n=64, k=64, target="sm_100a")
    assert "sm_100a has no wgmma" in str(err.value) and "warpgroup_mma(a_op, b_op, acc" in str(err.value)


_EXIT_BLOCK = """\
exit:
  %acc.lcssa = phi float [ 0.000000e+00, %entry ], [ %acc.next, %loop ]
  %row = shl i32 %tid, 1
  %scaled = fmul float %acc.lcssa, 2.000000e+00
  %col = and i32 %row, 6
  %waited = call float asm sideeffect "wgmma.wait_group.sync.aligned 0;", "=f,0"(float %scaled)
  %sum = add i32 %row, %col
"""


def test_a_block_opening_wgmma_wait_moves_ahead_of_the_pure_code_it_does_not_use():
    from gluonkit.lower.backend.wgmma_wait import wait_first

    lines = wait_first(_EXIT_BLOCK).split("\n")
    # the wait's own input stays before it; the index math O3 sank there goes after it, in order
    assert [line.split(" = ")[0].strip() for line in lines[1:7]] == [
        "%acc.lcssa", "%scaled", "%waited", "%row", "%col", "%sum"]
    behind_a_store = _EXIT_BLOCK.replace("  %col", "  store i32 0, ptr %p\n  %col")
    assert wait_first(behind_a_store) == behind_a_store  # only a wait that opens its block moves
