"""The cost model (:mod:`gluonkit.runtime.model`): modelled timelines and predicted launch times.

Properties of the model, on the CPU: it is deterministic; a compute-bound kernel's time
follows its MMA cost; a shallow ring (a planted pipeline bubble) shows in the predicted time
and as blocked waits; the bilinear extrapolation from small problems matches a direct
prediction; the timeline is the interpreter trace's vocabulary; autotune's model pruning
keeps the model's best ``top_k`` configurations.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor
from gluonkit.runtime.model import SM90A, SM100A, extrapolate, modelling, predict, table_for
from interpreting import interpreter_on

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = [os.path.join(HERE, "..", "examples", d) for d in ("warp_specialized", "persistent_gemm")]
sys.path[:0] = EXAMPLES

import blackwell_gemm  # noqa: E402
import blackwell_ws_gemm  # noqa: E402
import persistent_gemm  # noqa: E402
import pipelined_gemm  # noqa: E402
import producer_consumer  # noqa: E402


def _gemm(tiles: int, k_steps: int, BN: int = 128, STAGES: int = 3, module=persistent_gemm, target="sm_90a", **extra):
    """The model's prediction of one program of ``module``'s GEMM over ``tiles`` tiles of ``k_steps`` K-slices."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128 * tiles, 64 * k_steps)).astype(np.float16)
    b = rng.standard_normal((64 * k_steps, BN)).astype(np.float16)
    c = np.zeros((128 * tiles, BN), np.float16)
    with interpreter_on(), modelling(target) as found:
        module.prepare(a, b, c, BN=BN, STAGES=STAGES, num_programs=1, **extra)()
    assert len(found) == 1
    return found[0]


def _stream(stages: int):
    x = np.random.default_rng(1).standard_normal((64 * 12, 64)).astype(np.float16)
    y = np.zeros((64 * 12, 64), np.float32)
    with interpreter_on():
        x_desc, y_desc = producer_consumer.descriptors(x, y, 64)
        return predict(producer_consumer.producer_consumer_kernel, (1,), x_desc, y_desc, x.shape[0], STAGES=stages,
                       num_warps=4)


def test_prediction_is_deterministic():
    first, second = _gemm(2, 6), _gemm(2, 6)
    assert first.time_us == second.time_us
    assert first.simulation.events == second.simulation.events
    assert first.time_us > first.program_us > 0


def test_compute_bound_time_follows_the_mma_cost():
    """With memory made fast, the GEMM is compute-bound: twice the MMA cycles, about twice the time."""
    base = _gemm(2, 8)
    fast_memory = SM90A.with_(mem_bytes_per_cycle=10_000.0, load_latency=50.0)
    slow_mma = fast_memory.with_(mma_flops_per_cycle={k: v / 2 for k, v in SM90A.mma_flops_per_cycle.items()})
    t1 = base.with_table(fast_memory).program_us
    t2 = base.with_table(slow_mma).program_us
    fast = base.with_table(fast_memory).simulation
    mma_share = fast.busy["tensor cores"] / fast.cycles
    assert mma_share > 0.8  # it is compute-bound
    assert 1.75 < t2 / t1 < 2.05
    # memory-bound instead: the MMA cost hardly matters
    slow_memory = SM90A.with_(mem_bytes_per_cycle=4.0)
    ratio = base.with_table(slow_memory.with_(mma_flops_per_cycle=slow_mma.mma_flops_per_cycle)).program_us / \
        base.with_table(slow_memory).program_us
    assert ratio < 1.1


def _blocked_ns(prediction) -> float:
    """The time partitions spent in waits that blocked (the timeline's red boxes)."""
    begins, total = {}, 0.0
    for e in prediction.simulation.events:
        if e["ph"] == "B" and e["args"]["kind"] == "mbarrier.wait":
            begins[e["pid"], e["tid"]] = e["ts"]
        elif e["ph"] == "E" and e["args"]["kind"] == "mbarrier.wait" and e["args"]["blocked"]:
            total += e["ts"] - begins[e["pid"], e["tid"]]
    return total


def test_a_shallow_ring_is_a_bubble_the_model_shows():
    """Two stages (one K-slice loaded ahead): each MMA waits for the rest of its slice's load
    latency; four stages (three ahead) hide it.  (The GEMM needs two stages at least: the refill of a stage
    waits for the MMA before it.)"""
    # bandwidth to spare, and a load latency (1200 cycles) over two MMAs' time (2 x 512) but under three
    table = SM90A.with_(mem_bytes_per_cycle=200.0, load_latency=1200.0)
    shallow = _gemm(2, 12, STAGES=2).with_table(table, timeline=True)
    deep = _gemm(2, 12, STAGES=4).with_table(table, timeline=True)
    assert shallow.program_us > 1.3 * deep.program_us
    assert _blocked_ns(shallow) > 2 * _blocked_ns(deep)


def test_a_one_stage_ring_exposes_the_load_latency():
    """The producer/consumer example with one stage: the loader may fetch a tile only once the
    compute partition has read the previous one, so every tile waits for a whole load; with four
    stages the loads overlap.  Doubling the load latency shows it: the one-stage kernel slows
    down by about one latency per tile, the four-stage one by much less."""
    shallow, deep = _stream(1), _stream(4)
    slow = SM90A.with_(load_latency=2 * SM90A.load_latency)
    grew_shallow = shallow.with_table(slow).program_us - shallow.program_us
    grew_deep = deep.with_table(slow).program_us - deep.program_us
    assert shallow.program_us > deep.program_us
    assert grew_shallow > 10 * SM90A.cycles_to_us(SM90A.load_latency)  # 12 tiles, each about one latency more
    assert grew_shallow > 2.5 * grew_deep


def test_extrapolation_matches_a_direct_prediction():
    direct = _gemm(4, 24).program_us
    extrapolated = extrapolate(lambda t, k: _gemm(t, k).program_us, (4, 24), ((2, 3), (8, 16)))
    assert abs(extrapolated - direct) / direct < 0.03


def test_extrapolate_is_exact_on_bilinear_functions_and_skips_small_dimensions():
    calls = []

    def f(t, k):
        calls.append((t, k))
        return 3 + 2 * t + 5 * k + 7 * t * k

    assert extrapolate(f, (40, 300), ((2, 3), (8, 16))) == pytest.approx(f(40, 300))
    calls.clear()
    assert extrapolate(f, (1, 300), ((2, 3), (8, 16))) == pytest.approx(f(1, 300))
    assert {t for t, _ in calls} == {1}


def test_timeline_speaks_the_interpreter_trace_vocabulary():
    prediction = _gemm(2, 4)
    trace = prediction.timeline
    json.dumps(trace)
    kinds = {e["args"]["kind"] for e in trace["traceEvents"] if e["ph"] != "M"}
    assert {"mbarrier.wait", "mbarrier.arrive", "mbarrier.phase", "tma.load", "tma.store", "wgmma"} <= kinds
    waits = [e for e in trace["traceEvents"] if e["ph"] == "B" and e["args"]["kind"] == "mbarrier.wait"]
    assert all(e["args"]["location"].endswith(".py:" + e["args"]["location"].rsplit(":", 1)[1]) for e in waits)
    assert any("persistent_gemm.py" in e["args"]["location"] for e in waits)
    svg = prediction.svg()
    ET.fromstring(svg)
    assert "model output" in svg
    assert "model output" in prediction.summary()


def test_partitions_are_agents_that_fork_and_join():
    prediction = _stream(2)
    names = set(prediction.simulation.ends)
    assert any("worker partition 0" in n for n in names) and any("default partition" in n for n in names)
    starts = [e for e in prediction.simulation.events if e["ph"] == "B" and e["args"]["kind"] == "partition"]
    assert starts and all(e["ts"] > 0 for e in starts)  # a worker starts at the fork, after the setup


def test_blackwell_double_buffered_accumulator_hides_the_epilogue():
    plain = _gemm(3, 8, BN=256, module=blackwell_gemm, target="sm_100a")
    single = _gemm(3, 8, BN=256, module=blackwell_ws_gemm, target="sm_100a", ACC_BUFFERS=1)
    double = _gemm(3, 8, BN=256, module=blackwell_ws_gemm, target="sm_100a")
    assert double.program_us < single.program_us < plain.program_us
    assert double.table is SM100A
    kinds = {e["args"]["kind"] for e in double.simulation.events if e["ph"] != "M"}
    assert "wgmma" in kinds  # tcgen05 MMAs are drawn in the MMA row


def test_unknown_target_is_reported():
    with pytest.raises(ValueError, match="no cost table for target 'sm_80'.*sm_90a"):
        table_for("sm_80")


def test_autotune_model_pruning_keeps_the_models_best_configs():
    kernel = gluonkit.autotune(
        configs=[gluonkit.Config({"STAGES": s}, num_warps=4) for s in (1, 2, 4)], key=["M"],
        prune_configs_by={"model": "sm_90a", "top_k": 2})(producer_consumer.producer_consumer_kernel)
    x = np.random.default_rng(2).standard_normal((64 * 8, 64)).astype(np.float16)
    y = np.zeros((64 * 8, 64), np.float32)
    with interpreter_on():
        x_desc, y_desc = producer_consumer.descriptors(x, y, 64)
        kernel[(1,)](x_desc, y_desc, x.shape[0])
    times = kernel.model_times
    assert len(times) == 3
    ranked = sorted(times, key=times.get)
    kept = kernel.model_prune((1,), (x_desc, y_desc, x.shape[0]), {}, list(times))
    assert kept == ranked[:2]
    assert kernel.best_config == ranked[0]  # the interpreter launches the first config left
    assert ranked[-1].kwargs["STAGES"] == 1
    np.testing.assert_allclose(y, producer_consumer.reference(x), rtol=1e-3, atol=1e-3)


def test_model_and_perf_model_together_are_refused():
    with pytest.raises(gluonkit.runtime.autotune.AutotunerError, match="perf_model or model"):
        gluonkit.autotune(configs=[gluonkit.Config({"STAGES": 1})], key=["M"],
                          prune_configs_by={"model": "sm_90a", "perf_model": lambda **k: 0.0})(
            producer_consumer.producer_consumer_kernel)


@gluonkit.jit
def _reinit_kernel(desc, TILES: gl.constexpr, REINIT: gl.constexpr):
    """Loads ``TILES`` tiles one after another, waiting for each; with ``REINIT`` the barrier is
    initialized afresh for every tile (its phases restart: every wait is for parity 0)."""
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    if not REINIT:
        mbarrier.init(bar, count=1)
    for i in gl.static_range(TILES):
        if REINIT:
            mbarrier.init(bar, count=1)
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [i * desc.block_type.shape[0], 0], bar, smem)
        mbarrier.wait(bar, 0 if REINIT else i % 2)
        if REINIT:
            mbarrier.invalidate(bar)
    if not REINIT:
        mbarrier.invalidate(bar)


def test_a_barrier_initialized_again_starts_its_phases_afresh():
    """Every wait is for its own load, whether the phases continue or restart at a new init."""
    x = np.random.default_rng(3).standard_normal((64 * 6, 64)).astype(np.float16)
    with interpreter_on():
        desc = TensorDescriptor.from_tensor(x, [64, 64], gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16))
        times = [predict(_reinit_kernel, (1,), desc, TILES=6, REINIT=r, num_warps=4).program_us for r in (False, True)]
    latency_us = SM90A.cycles_to_us(SM90A.load_latency)
    assert times[0] > 6 * latency_us
    assert abs(times[1] - times[0]) / times[0] < 0.05


def _pipelined(k_steps: int = 8):
    """The model's prediction of one 128 x 128 tile of ``pipelined_gemm``."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 64 * k_steps)).astype(np.float16)
    b = rng.standard_normal((64 * k_steps, 128)).astype(np.float16)
    c = np.zeros((128, 128), np.float16)
    with interpreter_on(), modelling(SM90A) as found:
        pipelined_gemm.prepare(a, b, c)()
    return found[0]


def test_wgmma_that_ptxas_serialized_are_synchronous_and_pay_their_latency(monkeypatch):
    # The model learns of a serialized wgmma from ptxas's note C7514 (pipelined_gemm got one at row strides not
    # multiples of 16 before the final wgmma wait was kept ahead of its epilogue, tests/test_gemm_examples.py):
    # the same tile without and with that note.
    predict_module = importlib.import_module("gluonkit.runtime.model.predict")  # the package's `predict` is the function

    monkeypatch.setattr(predict_module, "ptxas_notes", lambda func, arch: ())
    aligned = _pipelined()
    note = "C7514: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator"
    monkeypatch.setattr(predict_module, "ptxas_notes", lambda func, arch: (note,))
    odd = _pipelined()
    assert not aligned.recorder.serialized_wgmma and odd.recorder.serialized_wgmma
    assert "wgmma serialized by ptxas" in odd.summary() and "serialized" not in aligned.summary()
    slow = odd.with_table(SM90A.with_(wgmma_latency=4 * SM90A.wgmma_latency))
    # 8 K-steps x 4 instructions per warpgroup, each paying its latency: the time grows by about that
    extra = 8 * 4 * 3 * SM90A.wgmma_latency / SM90A.clock_ghz / 1e3
    assert 0.9 * extra < slow.program_us - odd.program_us < 1.1 * extra
    assert odd.program_us > aligned.program_us
    same = aligned.with_table(SM90A.with_(wgmma_latency=4 * SM90A.wgmma_latency))
    assert same.program_us == aligned.program_us  # pipelined wgmma hide their latency
