"""The Hopper GEMM examples: in the interpreter against float64 numpy at ragged sizes (CPU),
through ptxas for sm_90a (CPU), and on the GPU against torch (marked ``gpu``)."""

import os
import sys

import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit import ir
from gluonkit.ir.types import TensorDescType
from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))

import pipelined_gemm  # noqa: E402
from kernel_checks import needs_ptxas


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


@needs_ptxas
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


@needs_ptxas
@pytest.mark.parametrize("BN, stages", [(128, 4), (256, 3)])
@pytest.mark.parametrize("sizes", ["i32:16", "i32"])  # strides specialized on 16 or not (4104 x 4104 x 4104)
def test_pipelined_gemm_keeps_its_wgmma_pipelined(BN, stages, sizes):
    # Unspecialized strides used to make ptxas serialize every wgmma (note C7514, 1.8x the time on the H100):
    # O3 sank the epilogue's thread coordinates between the loop's exit and its wgmma.wait_group 0.
    BM, BK = 128, 64
    a_layout = gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16)
    b_layout = gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16)
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], instr_shape=[16, BN, 16])
    compiled = pipelined_gemm.pipelined_gemm_kernel.compile(
        TensorDescType((BM, BK), ir.float16, a_layout), TensorDescType((BK, BN), ir.float16, b_layout),
        "*fp16:16", sizes, sizes, sizes, sizes, STAGES=stages, acc_layout=acc, num_warps=8)
    assert compiled.metadata["ptxas_notes"] == []
    ptx = compiled.asm["ptx"]
    exit_block = ptx[:ptx.index("wgmma.wait_group.sync.aligned 0;")].rsplit("$L__BB", 1)[1]
    code = [line for line in exit_block.split("\n")[1:] if line.strip() and not line.lstrip().startswith(("//", "."))]
    assert code == [], code  # the wait opens the loop's exit block


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


# ------------------------------------------------------------------ persistent GEMM
import ml_dtypes  # noqa: E402

import persistent_gemm  # noqa: E402

_OUT_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


@pytest.mark.parametrize("M, N, K, out, split, activation, programs", [
    (200, 136, 96, "float32", 1, None, 4),      # ragged M and N: TMA zero fill and clipped stores
    (130, 72, 200, "float16", 2, "relu", 3),   # split epilogue, activation hook, ragged K
    (64, 64, 32, "bfloat16", 1, None, 1),      # one tile, one K step (fewer steps than stages)
    (256, 192, 160, "float32", 2, "relu", 5),  # more programs than some tiles' share
])
def test_persistent_gemm_in_the_interpreter(monkeypatch, M, N, K, out, split, activation, programs):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, _OUT_DTYPES[out])
    act = persistent_gemm.relu if activation else None
    persistent_gemm.gemm(a, b, c, BM=64, BN=64, BK=32, STAGES=3, num_warps=4, EPILOGUE_SPLIT=split,
                         activation=act, num_programs=programs)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if activation:
        ref = np.maximum(ref, 0.0)
    tolerance = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}[out]
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < tolerance


def test_grouped_tile_order_visits_every_tile_once(monkeypatch):
    """The grouped order is a permutation of the tiles, walking GROUP_M rows column by column."""
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    import gluonkit

    @gluonkit.jit
    def order(out_ptr, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
        tile = gl.program_id(0)
        pid_m, pid_n = persistent_gemm.grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        gl.store(out_ptr + 2 * tile, pid_m)
        gl.store(out_ptr + 2 * tile + 1, pid_n)

    num_pid_m, num_pid_n, group = 7, 5, 3
    out = np.full((num_pid_m * num_pid_n, 2), -1, np.int32)
    order[(num_pid_m * num_pid_n,)](out, num_pid_m, num_pid_n, GROUP_M=group)
    assert sorted(map(tuple, out)) == [(m, n) for m in range(num_pid_m) for n in range(num_pid_n)]
    assert [tuple(p) for p in out[:4]] == [(0, 0), (1, 0), (2, 0), (0, 1)]
    assert [tuple(p) for p in out[-2:]] == [(6, 3), (6, 4)]  # the last group has one row


@needs_ptxas
@pytest.mark.parametrize("stages, split, out", [(3, 1, ir.float16), (4, 2, ir.bfloat16), (3, 2, ir.float32)])
def test_persistent_gemm_compiles_for_hopper_without_spills(stages, split, out):
    BM, BN, BK = 128, 256, 64
    in_layout = gl.NVMMASharedLayout.get_default_for
    c_block = (BM, BN // split)
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], instr_shape=[16, BN, 16])
    compiled = persistent_gemm.persistent_gemm_kernel.compile(
        TensorDescType((BM, BK), ir.float16, in_layout([BM, BK], ir.float16)),
        TensorDescType((BK, BN), ir.float16, in_layout([BK, BN], ir.float16)),
        TensorDescType(c_block, out, in_layout(list(c_block), out)), "i32", "i32", "i32",
        STAGES=stages, GROUP_M=8, EPILOGUE_SPLIT=split, acc_layout=acc, ACTIVATION=persistent_gemm.relu,
        num_warps=8)
    ptx = compiled.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    assert compiled.metadata["spill_stores"] == 0 and compiled.metadata["stack_frame"] == 0
    assert compiled.metadata["shared"] <= 232448


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("M, N, K, split, out", [(1024, 1024, 1024, 1, "float16"), (1000, 296, 776, 2, "float32"),
                                                 (2048, 768, 1000, 2, "bfloat16")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_persistent_gemm_on_the_gpu_matches_torch(M, N, K, split, out, dtype):
    torch = pytest.importorskip("torch")
    a = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
    c = torch.full((M, N), float("nan"), device="cuda", dtype=getattr(torch, out))
    stages = 4 if split == 2 and out != "float32" else 3  # what fits in 227 KB beside C's buffer
    persistent_gemm.gemm(a, b, c, EPILOGUE_SPLIT=split, STAGES=stages, activation=persistent_gemm.relu)
    torch.cuda.synchronize()
    ref = torch.relu(a.double() @ b.double())
    tolerance = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[out]
    assert ((c.double() - ref).norm() / ref.norm()).item() < tolerance
