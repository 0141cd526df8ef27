"""The Blackwell attention forward (``examples/attention/blackwell_attention.py``): in the interpreter
against numpy float64 (non-causal and causal, ragged sequence lengths, head dims 64 and 128, every
partition schedule the interpreter tries, protocol checked), the example with one synchronization
step removed (each reported with its lines), ptxas for sm_100a without spills, and a Blackwell GPU
run (marked ``gpu``; skipped unless the device is sm_100a)."""

import importlib.util
import os
import re
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

from gluonkit import ir
from gluonkit.interpret import InterpreterError
from gluonkit.ir import TensorDescType
from gluonkit.runtime.driver import device_properties, has_gpu
from kernel_checks import needs_ptxas

_DIR = os.path.join(os.path.dirname(__file__), "..", "examples", "attention")
sys.path.insert(0, _DIR)

import blackwell_attention  # noqa: E402

_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _run(module, B, H, S, D, dtype, causal, block_n, seed=None, **config):
    """Random Q, K, V; the kernel's O and LSE (poisoned with NaN first) and the float64 reference."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(_NP[dtype]) for _ in range(3))
    o = np.full((B, H, S, D), np.nan, _NP[dtype])
    lse = np.full((B, H, S), np.nan, np.float32)
    module.attention(q, k, v, o, lse, causal=causal, sm_scale=0.3, BLOCK_N=block_n, **config)
    return o, lse, blackwell_attention.reference(q, k, v, causal, sm_scale=0.3)


@pytest.mark.parametrize("B, H, S, D, dtype, causal, block_n, p_tmem", [
    (1, 2, 200, 64, "float16", False, 64, True),    # ragged: 4 key blocks, the last masked; both S buffers reused
    (1, 2, 200, 64, "bfloat16", True, 64, True),    # causal: skipped and masked blocks, two query tiles per head
    (2, 1, 128, 64, "float16", True, 128, True),    # one key block: no correction step, straight to the epilogue
    (1, 1, 160, 128, "float16", False, 32, True),   # head dim 128: O rescaled in two column slices; 5 blocks
    (1, 2, 200, 64, "bfloat16", False, 64, False),  # P through shared memory
    (1, 1, 200, 128, "float16", True, 64, False),
])
def test_blackwell_attention_in_the_interpreter(monkeypatch, B, H, S, D, dtype, causal, block_n, p_tmem):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    o, lse, (ref_o, ref_lse) = _run(blackwell_attention, B, H, S, D, dtype, causal, block_n, P_TMEM=p_tmem)
    tol = 2e-2 if dtype == "bfloat16" else 3e-3
    assert np.abs(o.astype(np.float64) - ref_o).max() < tol
    assert np.abs(lse - ref_lse).max() < 1e-4


# Each case removes one synchronization step of the protocol (``old`` -> ``new``); without it the
# interpreter must report the hazard, or the deadlock, at the example's lines.
_PLANTED = "pass  # planted bug"


@pytest.mark.parametrize("old, new, message, p_tmem", [
    # the softmax reads S before the MMA's commit says it is there (before the MMA ran, or while it runs)
    ("mbarrier.wait(s_ready.index(buf), (j // 2) & 1)", _PLANTED,
     "tmem_load reads .*(nothing has written|may still be updating)", True),
    # the correction does not wait for P_{j-1} V_{j-1}: p_ready's parity is then ambiguous (a fresh
    # barrier's phase "-1" counts as complete) and alpha is read before the softmax wrote it
    ("        mbarrier.wait(pv_done, (j - 1) & 1)\n", f"        {_PLANTED}\n",
     "reads .*(nothing has written|may still be updating)", True),
    # P V issued before the correction has rescaled O
    ("mbarrier.wait(o_fixed, (j - 1) & 1, pred=j > 0)", _PLANTED, "tcgen05_mma", True),
    # the softmax runs ahead of P V: two phases of p_ready complete before the MMA warp waits (deadlock)
    ("mbarrier.wait(pv_done, (j - 1) & 1, pred=j > 0)", _PLANTED, "deadlock", True),
    # the loader refills a K/V stage before its previous copy was even consumed
    ("mbarrier.wait(kv_empty.index(stage), ((j // STAGES) & 1) ^ 1)", _PLANTED,
     "mbarrier_expect: arrives on the next phase", True),
    # P over S: the product that reads P never frees S's buffer, so the next scores wait forever
    ("mbarriers=[kv_empty.index(stage), pv_done, s_free.index(j % 2)]", "mbarriers=[kv_empty.index(stage), pv_done]",
     "deadlock", True),
    # P through shared memory, written with no proxy fence before the MMA reads it
    ("        fence_async_shared()                                   # the MMA reads P", f"        {_PLANTED}",
     "wrote through the generic proxy with no fence_async_shared", False),
    # P through shared memory: nobody hands S's buffer back, the MMA warp waits forever
    ("        mbarrier.arrive(s_free.index(buf))\n", f"        {_PLANTED}\n", "deadlock", False),
])
def test_the_example_without_a_synchronization_step_is_reported(monkeypatch, tmp_path, old, new, message, p_tmem):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    with open(os.path.join(_DIR, "blackwell_attention.py")) as f:
        source = f.read()
    assert source.count(old) == 1, old
    shutil.copy(os.path.join(_DIR, "flash_attention.py"), tmp_path)
    path = tmp_path / "buggy_attention.py"
    path.write_text(source.replace(old, new))
    spec = importlib.util.spec_from_file_location("buggy_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(InterpreterError, match=message) as info:
        _run(module, 1, 1, 200, 64, "float16", False, 64, seed=0, P_TMEM=p_tmem)
    assert "buggy_attention.py" in str(info.value)


_MMA = "tcgen05.mma.cta_group::1.kind::f16"


@needs_ptxas
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype, p_tmem", [(ir.float16, True), (ir.bfloat16, True), (ir.float16, False)])
def test_blackwell_attention_compiles_for_sm_100a(D, causal, dtype, p_tmem):
    config = {**blackwell_attention.default_config(D), "P_TMEM": p_tmem}
    BLOCK_N = config.pop("BLOCK_N")
    qo, kv = blackwell_attention.layouts(128, BLOCK_N, D, dtype)
    q_ty, kv_ty = TensorDescType((1, 128, D), dtype, qo), TensorDescType((BLOCK_N, D), dtype, kv)
    compiled = blackwell_attention.blackwell_attention_kernel.compile(
        q_ty, kv_ty, kv_ty, q_ty, "*fp32", "i32", "fp32", CAUSAL=causal, **config, num_warps=4, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"]
    # Q Kᵀ (K = D) is issued at two places (block 0, then one ahead), P V (K = BLOCK_N) at one.
    assert ptx.count(_MMA) == 2 * (D // 16) + BLOCK_N // 16
    # P V reads A from tensor memory ([a_tmem]) exactly when P stays there
    assert len(re.findall(r"kind::f16 \[%r\d+\], \[%r\d+\]", ptx)) == (BLOCK_N // 16 if p_tmem else 0)
    # s_ready at both Q Kᵀ sites; after P V: kv_empty, pv_done (and s_free when P is over S)
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64") == 2 + 2 + p_tmem
    # 2 S buffers (2 x BLOCK_N columns) + O (D columns), rounded up to a power of two
    columns = 1 << (2 * BLOCK_N + D - 1).bit_length()
    assert re.search(rf"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], {columns};", ptx)
    assert "ex2.approx" in ptx
    assert compiled.metadata["spill_stores"] == 0
    # Q, two K/V stages (and P through shared memory): fits the 227 KB a CTA may use
    tile = 128 * D * 2
    assert compiled.metadata["shared"] >= tile * (1 + 2 * 2) + (0 if p_tmem else 128 * BLOCK_N * 2)


_BLACKWELL = has_gpu() and device_properties().arch == "sm_100a"


@pytest.mark.gpu
@pytest.mark.skipif(not _BLACKWELL, reason="needs a Blackwell (sm_100a) GPU")
@pytest.mark.parametrize("S, D, causal", [(1024, 128, False), (1000, 128, True), (777, 64, False),
                                          (512, 64, True)])
def test_blackwell_attention_on_the_gpu(S, D, causal):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.randn(2, 4, S, D, device="cuda").half() for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((2, 4, S), float("nan"), device="cuda")
    blackwell_attention.attention(q, k, v, o, lse, causal=causal)
    torch.cuda.synchronize()
    ref_o, ref_lse = blackwell_attention.reference(q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), causal)
    assert np.abs(o.double().cpu().numpy() - ref_o).max() < 1e-2
    assert np.abs(lse.cpu().numpy() - ref_lse).max() < 1e-3


def test_the_timeline_records_each_tcgen05_mma(monkeypatch):
    """Every MMA is a span on the MMA warp's lane, from issue to the wait that observes its commit."""
    from gluonkit.interpret.trace import recording

    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    with recording() as trace:
        _run(blackwell_attention, 1, 1, 128, 64, "float16", False, 32, seed=0)   # 4 key blocks
    spans = [e for e in trace.to_json()["traceEvents"] if e.get("args", {}).get("kind") == "tcgen05_mma"]
    begins = [e for e in spans if e["ph"] == "b"]
    ends = [e for e in spans if e["ph"] == "e"]
    schedules = len({e["pid"] for e in begins})
    assert len(begins) == len(ends) == 2 * 4 * schedules        # Q Kᵀ and P V per block, under each schedule
    assert {e["tid"] for e in begins} == {2}                     # worker partition 1: the MMA warp
    assert {b["args"]["reads"] for b in begins} == {"q_smem[0], k_smem[0]", "q_smem[0], k_smem[1]",
                                                    "tensor memory, v_smem[0]", "tensor memory, v_smem[1]"}
