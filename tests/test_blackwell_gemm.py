"""The persistent Blackwell GEMM example: the interpreter against float64 numpy at ragged sizes
(protocol checked: stages, accumulator, commits), its planted protocol bugs, and ptxas for sm_100a."""

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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))

import blackwell_gemm  # noqa: E402
import persistent_gemm  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import blackwell_ws_gemm  # noqa: E402

_OUT = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


@pytest.mark.parametrize("M, N, K, BN, out, split, activation, programs", [
    (200, 136, 96, 64, "float32", 1, None, 4),     # ragged M and N: TMA zero fill and clipped stores
    (130, 72, 200, 64, "float16", 2, "relu", 3),   # split epilogue, activation, ragged K, tiles per program
    (64, 64, 32, 64, "bfloat16", 1, None, 1),      # one tile, one K step (fewer steps than stages)
])
def test_blackwell_gemm_in_the_interpreter(monkeypatch, M, N, K, BN, out, split, activation, programs):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, _OUT[out])
    blackwell_gemm.gemm(a, b, c, BM=128, BN=BN, BK=32, STAGES=3, EPILOGUE_SPLIT=split,
                        activation=persistent_gemm.relu if activation else None, num_programs=programs)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if activation:
        ref = np.maximum(ref, 0.0)
    tolerance = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}[out]
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < tolerance


_EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm", "blackwell_gemm.py")


@pytest.mark.parametrize("line, message", [
    ("mbarrier.wait(empty.index(prev % STAGES), ((step - 1) // STAGES) & 1, pred=step > 0)",
     "while the tcgen05_mma at line"),                       # a stage refilled under an MMA that reads it
    ("mbarrier.wait(acc_bar, t & 1)", "tmem_load reads tensor memory that the tcgen05_mma"),  # early epilogue
])
def test_the_example_without_a_wait_is_reported(monkeypatch, tmp_path, line, message):
    """The example's protocol is needed: dropping either wait is an error naming both lines."""
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    with open(_EXAMPLE) as f:
        source = f.read()
    assert line in source
    shutil.copy(os.path.join(os.path.dirname(_EXAMPLE), "persistent_gemm.py"), tmp_path)
    path = tmp_path / "buggy_gemm.py"
    path.write_text(source.replace(line, "pass  # planted bug: no wait"))
    spec = importlib.util.spec_from_file_location("buggy_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = np.random.default_rng(1).standard_normal((130, 96)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((96, 64)).astype(np.float16)
    with pytest.raises(InterpreterError, match=message) as info:
        module.gemm(a, b, np.zeros((130, 64), np.float32), BM=128, BN=64, BK=32, STAGES=2, EPILOGUE_SPLIT=1,
                    num_programs=1)
    assert "buggy_gemm.py" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("BN, split, out", [(256, 4, ir.float16), (128, 2, ir.float32)])
def test_blackwell_gemm_compiles_for_sm_100a(BN, split, out):
    BM, BK = 128, 64
    nvmma = gl.NVMMASharedLayout.get_default_for
    c_block = (BM, BN // split)
    compiled = blackwell_gemm.blackwell_gemm_kernel.compile(
        TensorDescType((BM, BK), ir.float16, nvmma([BM, BK], ir.float16)),
        TensorDescType((BK, BN), ir.float16, nvmma([BK, BN], ir.float16)),
        TensorDescType(c_block, out, nvmma(list(c_block), out)), "i32", "i32", "i32",
        STAGES=3, GROUP_M=8, EPILOGUE_SPLIT=split, ACTIVATION=persistent_gemm.relu, num_warps=4, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == BK // 16
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") == 2
    assert re.search(rf"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], {BN};", ptx)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert compiled.metadata["spill_stores"] == 0


# ------------------------------------------------------------ the warp-specialized version
@pytest.mark.parametrize("M, N, K, split, programs, buffers", [
    (200, 136, 96, 2, 2, 2),   # ragged; three tiles per program: both accumulators, reused
    (130, 64, 200, 1, 1, 2),   # ragged K, two tiles
    (200, 136, 96, 2, 2, 1),   # one accumulator: each tile's MMAs wait for the previous epilogue
])
def test_blackwell_ws_gemm_in_the_interpreter(monkeypatch, M, N, K, split, programs, buffers):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    blackwell_ws_gemm.gemm(a, b, c, BM=128, BN=64, BK=32, STAGES=3, EPILOGUE_SPLIT=split, num_programs=programs,
                           ACC_BUFFERS=buffers)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


@needs_ptxas
def test_blackwell_ws_gemm_compiles_for_sm_100a():
    BM, BN, BK = 128, 256, 64
    nvmma = gl.NVMMASharedLayout.get_default_for
    c_block = (BM, BN // 4)
    compiled = blackwell_ws_gemm.blackwell_ws_gemm_kernel.compile(
        TensorDescType((BM, BK), ir.float16, nvmma([BM, BK], ir.float16)),
        TensorDescType((BK, BN), ir.float16, nvmma([BK, BN], ir.float16)),
        TensorDescType(c_block, ir.float16, nvmma(list(c_block), ir.float16)), "i32", "i32", "i32",
        STAGES=3, GROUP_M=8, EPILOGUE_SPLIT=4, ACTIVATION=None, num_warps=4, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == BK // 16
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], 512;", ptx)
    assert compiled.metadata["spill_stores"] == 0
