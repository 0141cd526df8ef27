"""The persistent block-scaled Blackwell GEMM example: the interpreter against float64 at ragged sizes
(mxfp8, mxfp4, nvfp4), its planted protocol bugs, and ptxas for sm_100a."""

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
from gluonkit.layouts import scales_copy_bases
from kernel_checks import needs_ptxas

_DIR = os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm")
sys.path.insert(0, _DIR)

import blackwell_block_scaled_gemm as example  # noqa: E402

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def _operand(fmt, rows, k, rng):
    if fmt == "e2m1":
        packed = rng.integers(0, 256, (rows, k // 2), dtype=np.uint8)
        return packed, np.stack([E2M1[packed & 15], E2M1[packed >> 4]], axis=2).reshape(rows, k)
    stored = (rng.standard_normal((rows, k)) * 3).astype(ml_dtypes.float8_e4m3fn if fmt == "e4m3"
                                                         else ml_dtypes.float8_e5m2)
    return stored, stored.astype(np.float64)


def _scales(nvfp4, rows, sk, rng):
    if nvfp4:
        stored = rng.uniform(0.05, 8, (rows, sk)).astype(ml_dtypes.float8_e4m3fn)
        return stored, stored.astype(np.float64)
    stored = rng.integers(110, 145, (rows, sk), dtype=np.uint8)
    return stored, np.ldexp(1.0, stored.astype(np.int64) - 127)


def _problem(a_fmt, b_fmt, M, N, K, nvfp4, seed):
    rng = np.random.default_rng(seed)
    vec = 16 if nvfp4 else 32
    (a, av), (b, bv) = _operand(a_fmt, M, K, rng), _operand(b_fmt, N, K, rng)
    (sa, sav), (sb, sbv) = _scales(nvfp4, M, K // vec, rng), _scales(nvfp4, N, K // vec, rng)
    ref = (av * np.repeat(sav, vec, axis=1)) @ (bv * np.repeat(sbv, vec, axis=1)).T
    return a, b, sa, sb, ref


@pytest.mark.parametrize("a_fmt, b_fmt, M, N, K, nvfp4, BN, BK, programs", [
    ("e4m3", "e4m3", 200, 136, 256, False, 128, 128, 2),   # mxfp8, ragged M and N, two K-slices, 2 tiles/program
    ("e5m2", "e4m3", 130, 256, 384, False, 256, 128, 1),   # mixed fp8, BN = 256 (two scale chunks), 3 K-slices
    ("e2m1", "e2m1", 128, 132, 256, False, 128, 128, 2),   # mxfp4 (kind::mxf4)
    ("e2m1", "e2m1", 140, 128, 256, True, 128, 128, 1),    # nvfp4 (kind::mxf4nvf4, UE4M3 scales, VEC 16)
])
def test_block_scaled_gemm_in_the_interpreter(monkeypatch, a_fmt, b_fmt, M, N, K, nvfp4, BN, BK, programs):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    a, b, sa, sb, ref = _problem(a_fmt, b_fmt, M, N, K, nvfp4, seed=M + N + K)
    c = np.full((M, N), np.nan, np.float32)
    example.gemm(a, b, sa, sb, c, a_fmt, b_fmt, BN=BN, BK=BK, STAGES=3, EPILOGUE_SPLIT=2, num_programs=programs)
    np.testing.assert_allclose(c, ref.astype(np.float32), rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_pack_scales_puts_each_chunk_in_tcgen05_cp_order():
    scales = np.arange(130 * 6, dtype=np.int64).reshape(130, 6)
    packed = example.pack_scales(scales)
    assert packed.shape == (2, 2, 2, 256)
    chunk = packed[1, 1].reshape(-1)  # rows 128.., scales 4..
    r, g, c = 1, 0, 1
    assert chunk[16 * r + 4 * g + c] == scales[128 + 32 * g + r, 4 + c]
    assert chunk[16 * 5 + 4 * 0 + 2] == 0  # padding (scale 6 of row 133 does not exist)
    assert packed[0, 0].reshape(-1)[16 * 3 + 4 * 2 + 1] == scales[64 + 3, 1]


_EXAMPLE = os.path.join(_DIR, "blackwell_block_scaled_gemm.py")


@pytest.mark.parametrize("line, replacement, message", [
    # a stage (and its scales in tensor memory) refilled while its MMA may still read it
    ("mbarrier.wait(empty.index(prev % STAGES), ((step - 1) // STAGES) & 1, pred=step > 0)", "pass",
     "overwrites the shared buffer .* while the tcgen05_mma_scaled at line"),
    # the epilogue reads the accumulator before the tile's MMAs are known complete
    ("mbarrier.wait(acc_bar, t & 1)", "pass", "tmem_load reads tensor memory that the tcgen05_mma_scaled"),
    # one scale buffer for all stages: the next copy overwrites scales the previous MMA may read
    ("sa_tmem.index(stage))", "sa_tmem.index(0))", "tcgen05_copy overwrites tensor memory that the "
                                                   "tcgen05_mma_scaled at line"),
])
def test_the_example_with_a_planted_bug_is_reported(monkeypatch, tmp_path, line, replacement, message):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    with open(_EXAMPLE) as f:
        source = f.read()
    assert line in source
    shutil.copy(os.path.join(_DIR, "persistent_gemm.py"), tmp_path)
    path = tmp_path / "buggy_scaled_gemm.py"
    path.write_text(source.replace(line, replacement + "  # planted bug", 1))
    spec = importlib.util.spec_from_file_location("buggy_scaled_gemm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a, b, sa, sb, _ = _problem("e4m3", "e4m3", 130, 128, 384, False, seed=5)
    with pytest.raises(InterpreterError, match=message) as info:
        module.gemm(a, b, sa, sb, np.zeros((130, 128), np.float32), "e4m3", "e4m3", BN=128, BK=128, STAGES=2,
                    EPILOGUE_SPLIT=1, num_programs=1)
    assert "buggy_scaled_gemm.py" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("fmt, scale, BN, BK", [("e4m3", ir.uint8, 256, 128), ("e2m1", ir.uint8, 256, 256),
                                                 ("e2m1", ir.float8e4nv, 128, 256)])
def test_block_scaled_gemm_compiles_for_sm_100a(fmt, scale, BN, BK):
    BM, split = 128, 4
    vec = 16 if scale == ir.float8e4nv else 32
    storage = ir.uint8 if fmt == "e2m1" else ir.float8e4nv
    kb = BK // 2 if fmt == "e2m1" else BK
    nvmma = gl.NVMMASharedLayout.get_default_for
    scale_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=4)
    skt = BK // vec
    c_block = (BM, BN // split)
    compiled = example.block_scaled_gemm_kernel.compile(
        TensorDescType((BM, kb), storage, nvmma([BM, kb], storage)),
        TensorDescType((BN, kb), storage, nvmma([BN, kb], storage)),
        TensorDescType((1, skt // 4, 2, 256), scale, scale_layout),
        TensorDescType((BN // 128, skt // 4, 2, 256), scale, scale_layout),
        TensorDescType(c_block, ir.float16, nvmma(list(c_block), ir.float16)), "i32", "i32", "i32",
        A_FMT=fmt, B_FMT=fmt, SA_LAYOUT=gl.SharedLinearLayout(scales_copy_bases(BM, skt), alignment=128),
        SB_LAYOUT=gl.SharedLinearLayout(scales_copy_bases(BN, skt), alignment=128), STAGES=3, GROUP_M=8,
        EPILOGUE_SPLIT=split, num_warps=4, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    assert ptx.count("tcgen05.mma.cta_group::1.kind::") == kb // 32
    assert ptx.count("tcgen05.cp.cta_group::1.warpx4.32x128b") == (1 + BN // 128) * skt // 4
    columns = 512 if BN == 256 else 256  # BN + 32 + 32 (the scale buffers) columns, rounded up to a power of two
    assert re.search(rf"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], {columns};", ptx)
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert compiled.metadata["spill_stores"] == 0
