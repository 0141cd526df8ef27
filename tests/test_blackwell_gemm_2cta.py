"""The 2-CTA warp-specialized Blackwell GEMM example (``cta_group::2``): the interpreter against
float64 numpy at ragged sizes, with the static tile loop and with the CLC scheduler; planted
protocol bugs; ptxas for sm_100a (512 TMEM columns per CTA, no spills)."""

import importlib.util
import os
import re
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit import ir
from gluonkit.interpret import InterpreterError
from gluonkit.ir.types import TensorDescType
from kernel_checks import needs_ptxas

_DIR = os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized")
sys.path[:0] = [_DIR, os.path.join(_DIR, "..", "persistent_gemm")]

import blackwell_ws_gemm_2cta  # noqa: E402

_EXAMPLE = os.path.join(_DIR, "blackwell_ws_gemm_2cta.py")


@pytest.mark.parametrize("M, N, K, BN, BK, split, programs, clc, inp, out", [
    # ragged: TMA zero fill, clipped stores, 3 tiles per pair
    (300, 136, 96, 64, 32, 2, 2, False, np.float16, np.float32),
    # ragged K; both accumulators reused by one pair
    (520, 64, 200, 64, 32, 1, 1, False, np.float16, np.float16),
    # CLC: the first pair takes every other cluster's tile
    (300, 136, 96, 64, 32, 2, None, True, np.float16, ml_dtypes.bfloat16),
    # fp8 e4m3 inputs (kind::f8f6f4), 32-byte K steps
    (300, 144, 128, 64, 64, 1, 2, False, ml_dtypes.float8_e4m3fn, np.float32),
])
def test_2cta_ws_gemm_in_the_interpreter(monkeypatch, M, N, K, BN, BK, split, programs, clc, inp, out):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(inp)
    b = rng.standard_normal((K, N)).astype(inp)
    c = np.full((M, N), np.nan, out)
    blackwell_ws_gemm_2cta.gemm(a, b, c, BN=BN, BK=BK, STAGES=3, EPILOGUE_SPLIT=split, num_programs=programs,
                                use_clc=clc)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tolerance = {np.float32: 1e-6, np.float16: 1e-3, ml_dtypes.bfloat16: 8e-3}[out]
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < tolerance


@pytest.mark.parametrize("line, replacement, message", [
    # the even CTA's MMA no longer waits for both CTAs' loads
    ("            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)\n", "", "while the TMA load issued at line"),
    # the epilogue reads its rows before the pair's commit arrived
    ("        mbarrier.wait(acc_ready.index(buf), (t // 2) & 1)\n", "", "tmem_load reads"),
    # a wrong arrival count: the pair barrier already counts both epilogues (init doubles it)
    ("        mbarrier.init(acc_empty.index(b), count=1)", "        mbarrier.init(acc_empty.index(b), count=2)",
     "deadlock"),
])
def test_the_2cta_example_with_a_planted_bug_is_reported(monkeypatch, tmp_path, line, replacement, message):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    with open(_EXAMPLE) as f:
        source = f.read()
    assert line in source
    shutil.copy(os.path.join(_DIR, "..", "persistent_gemm", "persistent_gemm.py"), tmp_path)
    path = tmp_path / "buggy_2cta.py"
    path.write_text(source.replace(line, replacement))
    spec = importlib.util.spec_from_file_location("buggy_2cta", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((64, 192)).astype(np.float16)  # 3 tiles: a buffer is reused
    with pytest.raises(InterpreterError, match=message) as info:
        module.gemm(a, b, np.zeros((256, 192), np.float32), BN=64, BK=32, STAGES=2, EPILOGUE_SPLIT=1,
                    num_programs=1)
    assert "buggy_2cta.py" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("clc, dtype", [(False, ir.float16), (True, ir.float16), (False, ir.float8e4nv)])
def test_2cta_ws_gemm_compiles_for_sm_100a(clc, dtype):
    BM, BN, split = 256, 256, 4
    BK = 128 // dtype.itemsize  # 128-byte rows
    nvmma = gl.NVMMASharedLayout.get_default_for
    c_block = (BM, BN // split)
    compiled = blackwell_ws_gemm_2cta.blackwell_ws_gemm_2cta_kernel.compile(
        TensorDescType((BM, BK), dtype, nvmma([BM, BK], dtype, cga_layout=[[1, 0]])),
        TensorDescType((BK, BN), dtype, nvmma([BK, BN], dtype, cga_layout=[[0, 1]])),
        TensorDescType(c_block, ir.float16, nvmma(list(c_block), ir.float16, cga_layout=[[1, 0]])),
        "i32", "i32", "i32", STAGES=4, GROUP_M=8, EPILOGUE_SPLIT=split, ACTIVATION=None, USE_CLC=clc,
        num_warps=4, num_ctas=2, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    kind = "f16" if dtype == ir.float16 else "f8f6f4"
    assert ptx.count(f"tcgen05.mma.cta_group::2.kind::{kind}") == BK * dtype.itemsize // 32
    assert re.search(r"tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], 512;", ptx)
    assert ".reqnctapercluster 2" in ptx
    assert ("clusterlaunchcontrol.try_cancel" in ptx) == clc
