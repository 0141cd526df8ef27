"""The fp8 warp-specialized GEMM with per-tensor scales (``examples/warp_specialized/ws_gemm_fp8.py``):
exact in the interpreter against float64 of the fp8 inputs, through ptxas for sm_90a, clear errors
for inputs it cannot take, and on the GPU against ``torch._scaled_mm`` (marked ``gpu``)."""

import os
import sys

import ml_dtypes
import numpy as np
import pytest

from gluonkit import ir
from gluonkit.ir import TensorDescType
from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import ws_gemm  # noqa: E402
import ws_gemm_fp8  # noqa: E402
from kernel_checks import needs_ptxas  # noqa: E402
from persistent_gemm import gemm_layouts  # noqa: E402

_FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
_OUT = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
_TOLERANCE = {"bfloat16": 8e-3, "float32": 1e-6}


def _operands(M, N, K, a_type, b_type, rng):
    a = rng.standard_normal((M, K)).astype(_FP8[a_type])
    b = rng.standard_normal((N, K)).astype(_FP8[b_type])
    scales = np.array([rng.uniform(0.5, 2)], np.float32), np.array([rng.uniform(0.5, 2)], np.float32)
    return a, b, scales


def _reference(a, b, scales):
    """float64 of the fp8 inputs; the scales' product as the kernel forms it (in fp32)."""
    return (a.astype(np.float64) @ b.astype(np.float64).T) * np.float64(scales[0][0] * scales[1][0])


@pytest.mark.parametrize("M, N, K, a_type, b_type, out, stages, programs", [
    (200, 136, 272, "e4m3", "e4m3", "bfloat16", 2, 2),   # ragged M, N, K (K: 3 slices, the last partial)
    (130, 72, 208, "e5m2", "e5m2", "float32", 3, 3),     # more stages than slices, programs without tiles
    (150, 104, 128, "e4m3", "e5m2", "bfloat16", 2, 1),   # mixed e4m3 x e5m2, one K slice
])
@pytest.mark.parametrize("pingpong", [False, True])
def test_ws_gemm_fp8_in_the_interpreter(monkeypatch, M, N, K, a_type, b_type, out, stages, programs, pingpong):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    a, b, scales = _operands(M, N, K, a_type, b_type, np.random.default_rng())
    c = np.full((M, N), np.nan, _OUT[out])
    ws_gemm_fp8.gemm(a, b, c, *scales, BN=64, STAGES=stages, PINGPONG=pingpong, num_programs=programs)
    ref = _reference(a, b, scales)
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < _TOLERANCE[out]


@pytest.mark.parametrize("pingpong, split_k, split_tiles", [(False, 2, None), (True, 3, 2)])
def test_ws_gemm_fp8_with_split_k_in_the_interpreter(monkeypatch, pingpong, split_k, split_tiles):
    """K-major fp8 B and scales together with ws_gemm's split-K (partials scaled, then summed)."""
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    a, b, scales = _operands(200, 136, 384, "e4m3", "e5m2", np.random.default_rng())
    c = np.full((200, 136), np.nan, np.float32)
    ws_gemm_fp8.gemm(a, b, c, *scales, BN=64, STAGES=2, PINGPONG=pingpong, num_programs=3, SPLIT_K=split_k,
                     SPLIT_TILES=split_tiles)
    ref = _reference(a, b, scales)
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < _TOLERANCE["float32"]


@pytest.mark.parametrize("M, N, K, pingpong, BM, BN, stages", [
    (8192, 8192, 8192, False, 128, 256, 4),   # deep K: cooperative 128 x 256, 48 KB per stage
    (4999, 4112, 3008, False, 256, 128, 4),   # N just above 16 x 256: 256 x 128 tiles take 5 waves, not 6
    (8192, 8192, 1024, True, 128, 128, 6),    # shallow K: ping-pong 128 x 128, 32 KB per stage
])
def test_choose_config_fills_shared_memory_with_fp8_stages(M, N, K, pingpong, BM, BN, stages):
    cfg = ws_gemm_fp8.choose_config(M, N, K, 2, 132)
    assert (cfg["PINGPONG"], cfg["BM"], cfg["BN"], cfg["BK"], cfg["STAGES"]) == (pingpong, BM, BN, 128, stages)
    c_bytes = (2 if pingpong else 1) * BM * BN // 2 * 2
    assert stages * (BM + BN) * 128 + c_bytes <= ws_gemm_fp8.SHARED_BYTES


@needs_ptxas
@pytest.mark.parametrize("pingpong, BM, BN, stages", [(False, 128, 256, 4), (False, 256, 128, 4), (True, 128, 128, 6)])
def test_ws_gemm_fp8_compiles_for_hopper_without_spills(pingpong, BM, BN, stages):
    warps = 4 if pingpong else 8
    a_l, b_l, c_l, c_block, acc = gemm_layouts(BM, BN, 128, ir.float8e4nv, ir.bfloat16, 2, warps, True)
    kernel, extra = ((ws_gemm.ws_gemm_pingpong_kernel, dict(CONSUMER_REGS=240)) if pingpong else
                     (ws_gemm.ws_gemm_kernel, {}))
    compiled = kernel.compile(
        TensorDescType((BM, 128), ir.float8e4nv, a_l), TensorDescType((BN, 128), ir.float8e5, b_l),
        TensorDescType(tuple(c_block), ir.bfloat16, c_l), "*fp32", "i32", "i32", "i32", "i32", "*fp32", "*fp32",
        STAGES=stages, GROUP_M=16, EPILOGUE_SPLIT=2, acc_layout=acc, PRODUCER_REGS=24, num_warps=warps,
        B_KMAJOR=True, target="sm_90a", **extra)
    ptx, meta = compiled.asm["ptx"], compiled.metadata
    assert f"wgmma.mma_async.sync.aligned.m64n{BN}k32.f32.e4m3.e5m2" in ptx
    assert ptx.count("ld.global") == (4 if pingpong else 2)  # each consumer reads the two scales once
    assert meta["spill_stores"] == 0 and meta["stack_frame"] == 0 and meta["shared"] <= 232448


def _bad_inputs():
    rng = np.random.default_rng(0)
    a, b, scales = _operands(128, 64, 96, "e4m3", "e4m3", rng)
    c = np.zeros((128, 64), ml_dtypes.bfloat16)
    b_kn = np.ascontiguousarray(b.T)  # [K, N]: the layout of the 16-bit ws_gemm
    return [
        ((a, b_kn, c) + scales, r"b must be given as \[N, K\]"),
        ((a, b_kn.T, c) + scales, r"b must be row-major .*K-major"),  # right shape, column-major
        ((a.astype(np.float16), b, c) + scales, "a must be float8_e4m3fn or float8_e5m2"),
        ((a, b.astype(np.float16), c) + scales, "b must be float8_e4m3fn or float8_e5m2"),
        ((a, b, c.astype(np.float16)[:, :32]) + scales, r"c must be \[M, N\]"),
        ((a, b, c, scales[0].astype(np.float64), scales[1]), "scale_a must be a one-element float32"),
        ((a, b, c, scales[0], np.ones(2, np.float32)), "scale_b must be a one-element float32"),
    ]


@pytest.mark.parametrize("index", range(7))
def test_ws_gemm_fp8_rejects_bad_input_clearly(index):
    args, message = _bad_inputs()[index]
    with pytest.raises(ValueError, match=message):
        ws_gemm_fp8.prepare(*args)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("M, N, K", [(1024, 1024, 1024), (4999, 4112, 3008), (8192, 256, 1024), (1000, 304, 784)])
@pytest.mark.parametrize("dtypes", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"),
                                    ("float8_e4m3fn", "float8_e5m2")])
@pytest.mark.parametrize("pingpong", [False, True])
def test_ws_gemm_fp8_on_the_gpu_matches_scaled_mm(M, N, K, dtypes, pingpong):
    torch = pytest.importorskip("torch")
    a = torch.randn(M, K, device="cuda").to(getattr(torch, dtypes[0]))
    b = torch.randn(N, K, device="cuda").to(getattr(torch, dtypes[1]))
    sa, sb = torch.tensor(0.75, device="cuda"), torch.tensor(1.5, device="cuda")
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    ws_gemm_fp8.gemm(a, b, c, sa, sb, **(dict(BN=128, STAGES=6, PINGPONG=True) if pingpong else
                                         dict(BN=256, STAGES=4)))
    torch.cuda.synchronize()
    ref = (a.double() @ b.double().t()) * (0.75 * 1.5)
    assert ((c.double() - ref).norm() / ref.norm()).item() < 8e-3
    if dtypes != ("float8_e5m2", "float8_e5m2"):  # which _scaled_mm refuses ("not supported")
        theirs = torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        assert ((c.double() - theirs.double()).norm() / ref.norm()).item() < 8e-3
