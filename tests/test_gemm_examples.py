"""The Hopper GEMM examples: in the interpreter against float64 numpy at ragged sizes (CPU),
through ptxas for sm_90a (CPU), and on the GPU against torch (marked ``gpu``)."""

import os
import sys

import numpy as np
import pytest

import gluonkit.lang as gl
from gluonkit import ir
from gluonkit.ir.types import TensorDescType
from gluonkit.lower.ptxas import find_ptxas
from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))

import pipelined_gemm  # noqa: E402


@pytest.mark.parametrize("M, N, K, stages", [(100, 72, 80, 3), (64, 64, 32, 2), (130, 64, 200, 4)])
def test_pipelined_gemm_in_the_interpreter(monkeypatch, M, N, K, stages):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    pipelined_gemm.gemm(a, b, c, BM=64, BN=64, BK=32, STAGES=stages, num_warps=4)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_pipelined_gemm_compiles_for_hopper_without_spills():
    BM, BN, BK = 128, 128, 64
    a_layout = gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)
    b_layout = gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16)
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], instr_shape=[16, BN, 16])
    compiled = pipelined_gemm.pipelined_gemm_kernel.compile(
        TensorDescType((BM, BK), ir.float16, a_layout), TensorDescType((BK, BN), ir.float16, b_layout),
        "*fp32:16", "i32:16", "i32:16", "i32:16", "i32:16", STAGES=4, acc_layout=acc, num_warps=8)
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert compiled.metadata["spill_stores"] == 0 and compiled.metadata["stack_frame"] == 0


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("M, N, K", [(512, 512, 512), (1000, 296, 776)])  # rows: multiples of 16 bytes (TMA)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_pipelined_gemm_on_the_gpu_matches_torch(M, N, K, dtype):
    torch = pytest.importorskip("torch")
    a = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
    c = torch.full((M, N), float("nan"), device="cuda")
    pipelined_gemm.gemm(a, b, c)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-5
