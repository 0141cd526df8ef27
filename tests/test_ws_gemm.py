"""The warp-specialized persistent GEMM (``examples/warp_specialized/ws_gemm.py``, cooperative
and ping-pong): in the
interpreter against numpy float64 under the default partition schedules, through ptxas for
sm_90a (sm_100a has no wgmma: a clear error), and on the GPU against torch (marked ``gpu``)."""

import os
import sys

import ml_dtypes
import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit import ir
from gluonkit.interpret import partitions as interpret_partitions
from gluonkit.ir import TensorDescType
from gluonkit.lang import CompilationError
from gluonkit.lower.backend.ptxas import find_ptxas
from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import ws_gemm  # noqa: E402

_OUT_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
_TOLERANCE = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 8e-3}


@pytest.mark.parametrize("M, N, K, inp, out, split, stages, programs", [
    (200, 136, 96, "float16", "float32", 2, 3, 2),     # ragged M, N: zero-filled loads, clipped stores
    (130, 72, 200, "bfloat16", "bfloat16", 1, 2, 3),   # ragged K, more programs than most have tiles
    (128, 64, 32, "float16", "float16", 2, 3, 1),      # one tile, one K step (fewer steps than stages)
    (520, 200, 64, "float16", "float32", 2, 2, 3),     # ping-pong: odd and even tile counts per program
])
@pytest.mark.parametrize("pingpong", [False, True])
def test_ws_gemm_in_the_interpreter(monkeypatch, M, N, K, inp, out, split, stages, programs, pingpong):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    seen = []
    original = interpret_partitions._Scheduler.run

    def recording(self):
        seen.append(self.schedule)
        return original(self)

    monkeypatch.setattr(interpret_partitions._Scheduler, "run", recording)
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(_OUT_DTYPES[inp])
    b = rng.standard_normal((K, N)).astype(_OUT_DTYPES[inp])
    c = np.full((M, N), np.nan, _OUT_DTYPES[out])
    ws_gemm.gemm(a, b, c, BM=128, BN=64, BK=32, STAGES=stages, EPILOGUE_SPLIT=split, PINGPONG=pingpong,
                 num_programs=programs)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < _TOLERANCE[out]
    assert len(seen) == 3 * programs  # every program under forward, reverse and one random schedule: no hazard


@pytest.mark.parametrize("M, N, K, variant", [
    (8192, 8192, 8192, (False, 256, 4, 16)),   # deep K, many tiles: cooperative 128 x 256
    (3000, 5000, 2000, (False, 256, 4, 16)),
    (8192, 8192, 1024, (True, 128, 6, 8)),     # shallow K: ping-pong hides the epilogues
    (8192, 256, 8192, (True, 128, 6, 8)),      # 64 tiles of 128 x 256 on 132 SMs: ping-pong 128 x 128
])
def test_choose_config_picks_the_variant_for_the_shape(M, N, K, variant):
    cfg = ws_gemm.choose_config(M, N, K, 2, 132)
    assert (cfg["PINGPONG"], cfg["BN"], cfg["STAGES"], cfg["GROUP_M"]) == variant
    c_buffers = (2 if cfg["PINGPONG"] else 1) * 128 * cfg["BN"] // 2 * 2
    assert cfg["STAGES"] * (128 * 64 + 64 * cfg["BN"]) * 2 + c_buffers <= 232448 - 1024
    assert ws_gemm.choose_config(M, N, K, 4, 132)["STAGES"] == variant[2] - 1  # fp32 C: a larger C buffer


def _compile(target, BN=256, stages=4, split=2, out=ir.bfloat16, inp=ir.bfloat16, pingpong=False):
    BM, BK = 128, 64
    warps = 4 if pingpong else 8
    nvmma = gl.NVMMASharedLayout.get_default_for
    c_block = (BM, BN // split)
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1], instr_shape=[16, BN, 16])
    kernel, extra = ((ws_gemm.ws_gemm_pingpong_kernel, dict(CONSUMER_REGS=240)) if pingpong else
                     (ws_gemm.ws_gemm_kernel, {}))
    return kernel.compile(
        TensorDescType((BM, BK), inp, nvmma([BM, BK], inp)), TensorDescType((BK, BN), inp, nvmma([BK, BN], inp)),
        TensorDescType(c_block, out, nvmma(list(c_block), out)), "i32", "i32", "i32",
        STAGES=stages, GROUP_M=16, EPILOGUE_SPLIT=split, acc_layout=acc, PRODUCER_REGS=24, num_warps=warps,
        target=target, scale_a=None, scale_b=None, **extra)  # no scales: the 16-bit GEMM


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
@pytest.mark.parametrize("BN, stages, out", [(256, 4, ir.bfloat16), (128, 6, ir.float16), (256, 3, ir.float32)])
def test_ws_gemm_compiles_for_hopper_without_spills(BN, stages, out):
    compiled = _compile("sm_90a", BN=BN, stages=stages, out=out)
    ptx, meta = compiled.asm["ptx"], compiled.metadata
    assert f"wgmma.mma_async.sync.aligned.m64n{BN}k16.f32.bf16.bf16" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx and "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    assert [(p["first_warp"], p["num_warps"], p["registers"]) for p in meta["partitions"]] == [(0, 8, 240), (8, 1, 24)]
    assert meta["num_threads"] == 384
    assert meta["spill_stores"] == 0 and meta["stack_frame"] == 0 and meta["shared"] <= 232448
    # One named barrier per K step in the consumers (before handing the stage back), none in the producer.
    consumer_loop = ptx[ptx.index("mbarrier.try_wait"):ptx.index("setmaxnreg.dec")]
    assert "bar.sync 0, 256;" in consumer_loop and "bar.sync 2," not in ptx


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
@pytest.mark.parametrize("stages, out", [(6, ir.bfloat16), (4, ir.float32)])
def test_ws_gemm_pingpong_compiles_for_hopper_without_spills(stages, out):
    compiled = _compile("sm_90a", BN=128, stages=stages, out=out, pingpong=True)
    ptx, meta = compiled.asm["ptx"], compiled.metadata
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    for text in ("setmaxnreg.inc.sync.aligned.u32 248;", "setmaxnreg.inc.sync.aligned.u32 240;",
                 "setmaxnreg.dec.sync.aligned.u32 24;"):
        assert text in ptx
    assert [(p["first_warp"], p["num_warps"], p["registers"]) for p in meta["partitions"]] == [
        (0, 4, 248), (4, 4, 240), (8, 1, 24)]
    assert meta["spill_stores"] == 0 and meta["stack_frame"] == 0 and meta["shared"] <= 232448
    # Each consumer's named barrier covers its own warpgroup only.
    assert "bar.sync 0, 128;" in ptx and "bar.sync 2, 128;" in ptx and "bar.sync 0, 256;" not in ptx


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_ws_gemm_on_sm100_says_wgmma_is_hopper_only():
    with pytest.raises(CompilationError, match="sm_100a has no wgmma"):
        _compile("sm_100a")


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("M, N, K, out", [(1024, 1024, 1024, "bfloat16"), (1000, 296, 776, "float32"),
                                          (3000, 5000, 2000, "float16"), (8192, 256, 1000, "bfloat16"),
                                          (4999, 4104, 3000, "bfloat16")])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("pingpong", [False, True])
def test_ws_gemm_on_the_gpu_matches_torch(M, N, K, out, dtype, pingpong):
    torch = pytest.importorskip("torch")
    a = torch.randn(M, K, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(K, N, device="cuda", dtype=getattr(torch, dtype))
    c = torch.full((M, N), float("nan"), device="cuda", dtype=getattr(torch, out))
    BN, stages = (128, 6 if out != "float32" else 4) if pingpong else (256, 4 if out != "float32" else 3)
    ws_gemm.gemm(a, b, c, BN=BN, STAGES=stages, PINGPONG=pingpong)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert ((c.double() - ref).norm() / ref.norm()).item() < {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}[out]
