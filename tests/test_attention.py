"""The FA3-style forward attention (``examples/attention/flash_attention.py``): in the interpreter
against numpy float64 (non-causal and causal, ragged sequence lengths, every partition schedule
the interpreter tries), through ptxas for sm_90a without spills, and on the GPU against a
float32 torch reference (marked ``gpu``)."""

import os
import re
import sys

import ml_dtypes
import numpy as np
import pytest

from gluonkit import ir
from gluonkit.ir import TensorDescType
from gluonkit.lower.backend.cuda_tools import find_disassembler
from gluonkit.runtime.driver import has_gpu
from kernel_checks import needs_ptxas

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "attention"))

import flash_attention  # noqa: E402

_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
_SHORT = {"float16": "fp16", "bfloat16": "bf16"}  # pointer type names in signatures


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("B, H, S, D, dtype, causal, block_n", [
    (1, 2, 200, 64, "float16", False, 64),    # ragged: the last key block is masked, Q/O tiles clipped
    (1, 2, 200, 64, "bfloat16", True, 64),    # causal: skipped and masked blocks, ragged edge
    (2, 1, 128, 64, "float16", True, 128),    # one block: the diagonal block only
])
def test_attention_in_the_interpreter(monkeypatch, B, H, S, D, dtype, causal, block_n, overlap):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(_NP[dtype]) for _ in range(3))
    o = np.full((B, H, S, D), np.nan, _NP[dtype])
    lse = np.full((B, H, S), np.nan, np.float32)
    flash_attention.attention(q, k, v, o, lse, causal=causal, sm_scale=0.3, BLOCK_N=block_n, OVERLAP=overlap)
    ref_o, ref_lse = flash_attention.reference(q, k, v, causal, sm_scale=0.3)
    tol = 2e-2 if dtype == "bfloat16" else 3e-3
    assert np.abs(o.astype(np.float64) - ref_o).max() < tol
    assert np.abs(lse - ref_lse).max() < 1e-4


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("causal, programs", [(False, 2), (True, 2), (True, 3)])
def test_persistent_programs_run_every_tile_in_the_interpreter(monkeypatch, causal, programs, overlap):
    """Few programs for many tiles: 3 heads of 3 tiles each (the last one ragged), so programs run
    several tiles, causal pairs straddle heads and the last pair has one tile; every row of O and the
    LSE is written once and right (they start as NaN)."""
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    B, H, S, D = 1, 3, 300, 64
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(3))
    o = np.full((B, H, S, D), np.nan, np.float16)
    lse = np.full((B, H, S), np.nan, np.float32)
    flash_attention.attention(q, k, v, o, lse, causal=causal, BLOCK_N=64, OVERLAP=overlap, programs=programs)
    ref_o, ref_lse = flash_attention.reference(q, k, v, causal)
    assert np.abs(o.astype(np.float64) - ref_o).max() < 3e-3
    assert np.abs(lse - ref_lse).max() < 1e-4


def _compile(D, BLOCK_N, causal, dtype=ir.bfloat16, BLOCK_M=64, stages=2, overlap=False):
    qo, kv, s_layout, o_layout = flash_attention.attention_layouts(BLOCK_M, BLOCK_N, D, dtype)
    return flash_attention.attention_fwd_kernel.compile(
        TensorDescType((1, BLOCK_M, D), dtype, qo), TensorDescType((BLOCK_N, D), dtype, kv),
        TensorDescType((BLOCK_N, D), dtype, kv), f"*{_SHORT[dtype.name]}:16", "*fp32:16", "i32", "i32", "fp32",
        CAUSAL=causal, STAGES=stages, s_layout=s_layout, o_layout=o_layout, PRODUCER_REGS=24, CONSUMER_REGS=240,
        OVERLAP=overlap, num_warps=4, target="sm_90a")


@needs_ptxas
# D=128 and D=256 need more than the 168 registers of .maxnreg: they spilled until each workers'
# warpgroup got a dispatch chain of its own (ptxas then allocates by the setmaxnreg budgets).
@pytest.mark.parametrize("D, BLOCK_N, causal, overlap, stages", [
    (64, 128, False, False, 2), (128, 128, True, False, 3), (128, 128, True, True, 3), (128, 128, False, True, 3),
    (256, 64, False, False, 2)])
def test_attention_compiles_for_hopper_without_spills(D, BLOCK_N, causal, overlap, stages):
    compiled = _compile(D, BLOCK_N, causal, overlap=overlap, stages=stages)
    ptx, meta = compiled.asm["ptx"], compiled.metadata
    assert f"wgmma.mma_async.sync.aligned.m64n{BLOCK_N}k16.f32.bf16.bf16" in ptx  # S = Q Kᵀ from shared memory
    assert f"wgmma.mma_async.sync.aligned.m64n{D}k16.f32.bf16.bf16" in ptx        # O += P V, P from registers
    assert "ex2.approx.ftz.f32" in ptx and "fma.rn.f32" in ptx  # one FFMA and one MUFU.EX2 per score
    # P's conversions come before each product's wgmma.fence, not between its MMAs (where ptxas
    # would inject a warpgroup.arrive before every MMA reading a register written after the fence).
    products = re.findall(r"wgmma\.fence\.sync\.aligned;(.*?)wgmma\.commit_group", ptx, re.S)
    assert products and not any("cvt." in body for body in products)
    assert [(p["num_warps"], p["registers"]) for p in meta["partitions"]] == [(4, 240), (4, 240), (1, 24)]
    assert meta["spill_stores"] == 0 and meta["stack_frame"] == 0 and meta["shared"] <= 232448


def _loop_bodies(sass: str):
    """The SASS instructions (text after the address) of each loop of ``sass`` (a conditional backward
    branch's target up to the branch; ptxas's out-of-line mbarrier retry blocks jump back
    unconditionally) that issues wgmma (``HGMMA``)."""
    code = [(int(a, 16), text.strip()) for a, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    at = {address: i for i, (address, _) in enumerate(code)}
    bodies = []
    for i, (address, text) in enumerate(code):
        target = re.search(r"\bBRA\s+0x([0-9a-f]+)", text)
        if target and text.startswith("@") and int(target.group(1), 16) < address:
            body = [t for _, t in code[at[int(target.group(1), 16)]:i + 1]]
            if any("HGMMA" in t for t in body):
                bodies.append(body)
    return bodies


@needs_ptxas
@pytest.mark.skipif(find_disassembler() is None, reason="needs cuobjdump or nvdisasm")
@pytest.mark.parametrize("causal", [False, True])
def test_softmax_runs_under_the_pv_product_in_the_sass(causal):
    """Intra-warpgroup overlap as ptxas schedules it: in every key loop, the exponentials come after the
    wait for the scores (``WARPGROUP.DEPBAR.LE gsb0, 0x1``) and before the wait for ``P V`` (``0x0``).
    ptxas had moved the second wait above the whole softmax while both shared a basic block.  And
    P, carried from one block to the next in packed pairs, needs no PRMT (32 a block while the
    lowering gave each bf16 register its own phi)."""
    sass = _compile(128, 128, causal, overlap=True, stages=3).asm["sass"]
    loops = [b for b in _loop_bodies(sass) if sum("HGMMA" in t for t in b) == 16]  # S and P V of one block
    assert len(loops) == 4  # unmasked and masked blocks, two consumer warpgroups
    for body in loops:
        scores = next(i for i, t in enumerate(body) if "DEPBAR.LE gsb0, 0x1" in t)
        pv = next(i for i, t in enumerate(body) if "DEPBAR.LE gsb0, 0x0" in t)
        exps = [i for i, t in enumerate(body) if "MUFU.EX2" in t]
        assert len(exps) >= 64 and scores < exps[0] and exps[-1] < pv
        assert not any(t.startswith("PRMT") for t in body)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("B, H, S, D", [(2, 4, 1024, 128), (1, 3, 1000, 64), (2, 2, 777, 128), (1, 2, 512, 256)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("overlap", [False, True])
def test_attention_on_the_gpu_matches_torch(B, H, S, D, causal, dtype, overlap):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=getattr(torch, dtype)) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
    flash_attention.attention(q, k, v, o, lse, causal=causal, OVERLAP=overlap)
    torch.cuda.synchronize()
    s = q.float() @ k.float().transpose(-1, -2) / D ** 0.5
    if causal:
        s = s.masked_fill(~torch.ones(S, S, dtype=torch.bool, device="cuda").tril(), float("-inf"))
    ref_lse = torch.logsumexp(s, -1)
    ref_o = torch.softmax(s, -1) @ v.float()
    assert (o.float() - ref_o).abs().max().item() < (2e-2 if dtype == "bfloat16" else 4e-3)
    assert (lse - ref_lse).abs().max().item() < 1e-3


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("overlap", [False, True])
def test_persistent_programs_on_the_gpu_match_torch(causal, overlap):
    """5 programs for 3·2·8 = 48 tiles of a ragged length: each program runs about ten tiles, the
    K/V ring and the ping-pong parity run on across them."""
    torch = pytest.importorskip("torch")
    B, H, S, D = 3, 2, 1000, 128
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, S), float("nan"), device="cuda", dtype=torch.float32)
    flash_attention.attention(q, k, v, o, lse, causal=causal, OVERLAP=overlap, programs=5)
    torch.cuda.synchronize()
    s = q.float() @ k.float().transpose(-1, -2) / D ** 0.5
    if causal:
        s = s.masked_fill(~torch.ones(S, S, dtype=torch.bool, device="cuda").tril(), float("-inf"))
    assert (o.float() - torch.softmax(s, -1) @ v.float()).abs().max().item() < 2e-2
    assert (lse - torch.logsumexp(s, -1)).abs().max().item() < 1e-3
