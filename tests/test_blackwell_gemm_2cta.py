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
def test_2cta_ws_gemm_in_the_interpreter(monkeypatch, M, N, K, BN, BK, split, programs, clc, inp, out,
                                        cluster_m=1):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(inp)
    b = rng.standard_normal((K, N)).astype(inp)
    c = np.full((M, N), np.nan, out)
    blackwell_ws_gemm_2cta.gemm(a, b, c, BN=BN, BK=BK, STAGES=3, EPILOGUE_SPLIT=split, num_programs=programs,
                                use_clc=clc, cluster_m=cluster_m)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tolerance = {np.float32: 1e-6, np.float16: 1e-3, ml_dtypes.bfloat16: 8e-3}[out]
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < tolerance


@pytest.mark.parametrize("M, N, K, BN, BK, split, programs, clc, inp, out", [
    # ragged M (the second pair's rows of the last tile are all outside), 3 tiles per cluster, B multicast
    (700, 136, 96, 64, 32, 2, 1, False, np.float16, np.float32),
    # two clusters; ragged K; both accumulators of every CTA reused
    (1024, 192, 72, 64, 32, 1, 2, False, np.float16, np.float16),
    # CLC in a cluster of 4: CTA 0 cancels for all, every CTA hands the ids to its partitions
    (600, 136, 64, 64, 32, 2, None, True, np.float16, ml_dtypes.bfloat16),
    # fp8 e4m3 inputs
    (512, 144, 128, 64, 64, 1, 1, False, ml_dtypes.float8_e4m3fn, np.float32),
])
def test_two_pair_clusters_with_multicast_b_in_the_interpreter(monkeypatch, M, N, K, BN, BK, split, programs, clc,
                                                               inp, out):
    """``cluster_m=2``: clusters of 4 CTAs (2 pairs, 512-row tiles), B loaded once per pair position
    and multicast to both pairs, each stage freed by both pairs' multicast commits."""
    test_2cta_ws_gemm_in_the_interpreter(monkeypatch, M, N, K, BN, BK, split, programs, clc, inp, out, cluster_m=2)


def _buggy_example(tmp_path, replacements):
    """The example with ``replacements`` (source line -> new text) applied, imported from ``tmp_path``."""
    with open(_EXAMPLE) as f:
        source = f.read()
    for line, replacement in replacements:
        assert line in source
        source = source.replace(line, replacement)
    shutil.copy(os.path.join(_DIR, "..", "persistent_gemm", "persistent_gemm.py"), tmp_path)
    path = tmp_path / "buggy_2cta.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("buggy_2cta", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("replacements, message, lines", [
    # the loaders split the multicast block's bytes between the pairs that receive it, so each CTA's pair
    # barrier expects too few: the phase would complete while a multicast copy is still landing
    ([("mbarrier.expect(ready.index(stage), a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)",
       "mbarrier.expect(ready.index(stage), a_desc.nbytes_per_cta + b_desc.nbytes_per_cta // CLUSTER_M)")],
     "transaction bytes mismatch", ("mbarrier.expect(ready.index(stage)", "tma.async_load(b_desc")),
    # the MMA's commit reaches only its own pair (no multicast=True, and the empty barriers counted for one
    # commit), so the loader that multicasts B refills a stage the other pair's MMA may still read
    ([("mbarriers=[empty.index(stage)], multicast=CLUSTER_M > 1)", "mbarriers=[empty.index(stage)])"),
      ("tcgen05_mma_barrier_count([a_smem, b_smem], CLUSTER_M > 1, True)",
       "tcgen05_mma_barrier_count([a_smem, b_smem], False, True)")],
     "stage refilled while still read", ("tma.async_load(b_desc", "tcgen05_mma(a_smem.index(stage)")),
])
def test_the_multicast_example_with_a_planted_bug_is_reported(monkeypatch, tmp_path, replacements, message, lines):
    """Both lines are named: where it is reported and (in the message or a note) the other one."""
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    module = _buggy_example(tmp_path, replacements)
    a = np.random.default_rng(1).standard_normal((512, 128)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((128, 64)).astype(np.float16)  # 4 K steps over 2 stages
    with pytest.raises(InterpreterError, match=message) as info:
        module.gemm(a, b, np.zeros((512, 64), np.float32), BN=64, BK=32, STAGES=2, EPILOGUE_SPLIT=1,
                    num_programs=1, cluster_m=2)
    source = (tmp_path / "buggy_2cta.py").read_text().splitlines()
    text = str(info.value)
    named = {int(n) for n in re.findall(r"line (\d+)", text)} | {int(n) for n in re.findall(r"buggy_2cta\.py:(\d+)", text)}
    for fragment in lines:
        assert any(fragment in source[n - 1] for n in named if 0 < n <= len(source)), (fragment, text)


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
    module = _buggy_example(tmp_path, [(line, replacement)])
    a = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((64, 192)).astype(np.float16)  # 3 tiles: a buffer is reused
    with pytest.raises(InterpreterError, match=message) as info:
        module.gemm(a, b, np.zeros((256, 192), np.float32), BN=64, BK=32, STAGES=2, EPILOGUE_SPLIT=1,
                    num_programs=1)
    assert "buggy_2cta.py" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("clc, dtype, cluster_m", [(False, ir.float16, 1), (True, ir.float16, 1),
                                                   (False, ir.float8e4nv, 1), (False, ir.float16, 2),
                                                   (True, ir.float16, 2)])
def test_2cta_ws_gemm_compiles_for_sm_100a(clc, dtype, cluster_m):
    BN, split = 256, 4
    BK = 128 // dtype.itemsize  # 128-byte rows
    (a_block, a_layout), (b_block, b_layout), (c_block, c_layout) = blackwell_ws_gemm_2cta.cluster_layouts(
        BN, BK, split, dtype, ir.float16, cluster_m)
    compiled = blackwell_ws_gemm_2cta.blackwell_ws_gemm_2cta_kernel.compile(
        TensorDescType(tuple(a_block), dtype, a_layout), TensorDescType(tuple(b_block), dtype, b_layout),
        TensorDescType(tuple(c_block), ir.float16, c_layout),
        "i32", "i32", "i32", STAGES=4, GROUP_M=8, EPILOGUE_SPLIT=split, ACTIVATION=None, USE_CLC=clc,
        CLUSTER_M=cluster_m, num_warps=4, num_ctas=2 * cluster_m, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    kind = "f16" if dtype == ir.float16 else "f8f6f4"
    assert ptx.count(f"tcgen05.mma.cta_group::2.kind::{kind}") == BK * dtype.itemsize // 32
    assert re.search(r"tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], 512;", ptx)
    assert f".reqnctapercluster {2 * cluster_m}" in ptx
    assert ("clusterlaunchcontrol.try_cancel" in ptx) == clc
    multicast_b = re.findall(r"cp\.async\.bulk\.tensor\.2d\.cta_group::2\.shared::cluster\.global\.mbarrier::"
                             r"complete_tx::bytes\.multicast::cluster", ptx)
    assert bool(multicast_b) == (cluster_m == 2)  # B multicast to both pairs (one copy per 64-column box)
