"""Measured timelines: the compiler's instrumentation (lower/instrument.py) and the runtime's
decoding (runtime/timeline.py) on the CPU; the instrumented launch on the GPU (``gpu`` marker)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit import ir
from gluonkit.ir import TensorDescType
from gluonkit.lower.instrument import SMID_SHIFT, VALID, TimelineOptions, timeline_options
from gluonkit.runtime.driver import has_gpu
from gluonkit.runtime.timeline import MeasuredTimeline, measure
from kernel_checks import needs_ptxas
from interpreting import interpreter_on

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from warp_specialized import producer_consumer, ws_gemm  # noqa: E402



def _ws_gemm(target: str, instrument):
    """The cooperative WS GEMM (128 x 256 tiles) compiled with or without the timeline records."""
    BM, BN, BK = 128, 256, 64
    bf16 = gl.bfloat16
    a_layout, b_layout, c_layout, c_block, acc = ws_gemm.gemm_layouts(BM, BN, BK, bf16, bf16, 2, 8)
    return ws_gemm.ws_gemm_kernel.compile(
        TensorDescType((BM, BK), bf16, a_layout), TensorDescType((BK, BN), bf16, b_layout),
        TensorDescType(tuple(c_block), bf16, c_layout), "*fp32", "i32", "i32", "i32", "i32",
        STAGES=4, GROUP_M=16, EPILOGUE_SPLIT=2, acc_layout=acc, PRODUCER_REGS=24, num_warps=8, target=target,
        scale_a=None, scale_b=None, instrument=instrument)


@needs_ptxas
def test_instrumented_ws_gemm_assembles_and_names_its_pipeline_events():
    plain, timed = _ws_gemm("sm_90a", False), _ws_gemm("sm_90a", "all")
    assert "%globaltimer" not in plain.asm["ptx"] and "timeline" not in plain.metadata
    assert "%globaltimer" in timed.asm["ptx"] and ".const .align 8 .b8 gluonkit_timeline[16]" in timed.asm["ptx"]
    assert timed.metadata["spill_stores"] == 0
    assert timed.metadata["registers"] <= plain.metadata["registers"] + 8
    events = timed.metadata["timeline"]["events"]
    kinds = {(e["kind"], e["phase"]) for e in events}
    assert {("mbarrier.wait", "begin"), ("mbarrier.wait", "end"), ("tma.load", "instant"), ("wgmma", "instant"),
            ("mbarrier.arrive", "instant"), ("tma.store", "instant"), ("kernel.start", "instant")} <= kinds
    producer_wait = next(e for e in events if e["kind"] == "mbarrier.wait" and "empty.index" in e["source"])
    assert producer_wait["location"].endswith(f"ws_gemm.py:{producer_wait['line']}")
    assert producer_wait["source"].startswith("mbarrier.wait(empty.index(stage)")


@needs_ptxas
def test_the_default_level_records_the_waits_and_reads_slow_registers_only_at_anchors():
    timed = _ws_gemm("sm_90a", True)
    assert timed.metadata["timeline"]["level"] == "waits" and timed.metadata["spill_stores"] == 0
    kinds = {e["kind"] for e in timed.metadata["timeline"]["events"]}
    assert {"mbarrier.wait", "kernel.start", "partition.start", "partition.end"} <= kinds
    assert not kinds & {"wgmma", "wgmma.wait", "tma.load", "mbarrier.arrive", "mbarrier.expect", "thread_barrier"}
    ptx = timed.asm["ptx"]
    anchors = ptx.count("%globaltimer;")
    # the kernel's start and end, and a start and an end for each of its two partitions
    assert anchors == 6 and ptx.count("%smid;") == anchors
    # each wait is one store of its begin and end (no store before the wait), each anchor one store
    waits = len([e for e in timed.metadata["timeline"]["events"] if e["phase"] == "end"])
    assert ptx.count("st.global.cs.v4.u32") == waits and ptx.count("st.global.cs.v2.u64") == anchors
    assert ptx.count("st.global.cs.") == waits + anchors and "st.global.v" not in ptx  # all stream past L2 (.cs)
    # a wait's begin is a clock read kept in a register: every %clock read is in a record or a wait's begin
    assert ptx.count("%clock;") == waits * 2 + anchors
    full = {e["kind"] for e in _ws_gemm("sm_90a", "all").metadata["timeline"]["events"]}
    assert {"thread_barrier", "wgmma.wait", "wgmma"} <= full


@needs_ptxas
def test_instrumented_producer_consumer_assembles_for_blackwell():
    nvmma = gl.NVMMASharedLayout.get_default_for
    compiled = producer_consumer.producer_consumer_kernel.compile(
        TensorDescType((64, 128), ir.float16, nvmma([64, 128], ir.float16)),
        TensorDescType((64, 128), ir.float32, nvmma([64, 128], ir.float32)), "i32", STAGES=3, num_warps=4,
        target="sm_100a", instrument=(512, "all"))
    assert compiled.asm["cubin"][:4] == b"\x7fELF" and "%globaltimer" in compiled.asm["ptx"]
    assert compiled.metadata["timeline"]["capacity"] == 512
    assert {e["kind"] for e in compiled.metadata["timeline"]["events"]} >= {"tma.load", "tma.store", "mbarrier.wait"}


def test_instrument_option_is_checked():
    assert timeline_options(True) == TimelineOptions() and timeline_options(False) is None
    assert timeline_options(4096) == (4096, "waits") and timeline_options("all").events == "all"
    assert timeline_options((64, "all")) == (64, "all")
    with pytest.raises(ValueError, match="events per warp"):
        timeline_options(-3)
    with pytest.raises(ValueError, match="'waits'"):
        timeline_options((64, "some"))


def _synthetic(table, rows, warps_per_cta, capacity, partitions=()):
    """A compiled kernel's metadata and an event buffer holding ``rows[(cta, warp)] = [(ns, cycles, event)]``
    (``ns`` 0 for an event that is not an anchor)."""
    raw = np.zeros((len({c for c, _ in rows}) or 1, warps_per_cta, capacity),
                   np.dtype([("globaltimer", "<u8"), ("clock", "<u4"), ("tag", "<u4")]))
    for (cta, warp), entries in rows.items():
        for slot, (ns, cycles, event) in enumerate(entries):
            raw[cta, warp, slot] = (ns, cycles, event | (7 + cta) << SMID_SHIFT | VALID)
    metadata = {"timeline": {"events": table, "capacity": capacity}, "num_threads": 32 * warps_per_cta,
                "partitions": list(partitions)}
    interleaved = np.ascontiguousarray(raw.reshape(-1, capacity).T)  # entry slot * rows + row
    return metadata, interleaved.view(np.uint8).reshape(-1)


TABLE = [
    {"kind": "kernel.start", "phase": "instant", "op": "x", "location": "k.py:1", "source": "a"},
    {"kind": "mbarrier.wait", "phase": "begin", "op": "mbarrier_wait", "location": "k.py:2", "source": "wait"},
    {"kind": "mbarrier.wait", "phase": "end", "op": "mbarrier_wait", "location": "k.py:2", "source": "wait"},
    {"kind": "tma.load", "phase": "instant", "op": "async_tma_copy_global_to_shared", "location": "k.py:3",
     "source": "load"},
    {"kind": "kernel.end", "phase": "instant", "op": "return", "location": "k.py:4", "source": ""},
]


def test_decoding_places_events_by_globaltimer_and_clock_and_names_partitions():
    # Two warps of one CTA at 2 cycles per ns: warp 1 starts 100 ns after warp 0.
    rows = {(0, 0): [(1000, 50, 0), (0, 70, 1), (0, 1050, 2), (1600, 1250, 3)],
            (0, 1): [(1100, 9, 0), (1200, 209, 3)]}
    metadata, raw = _synthetic(TABLE, rows, 2, 8,
                               [{"partition": "default", "first_warp": 0, "num_warps": 1},
                                {"partition": "worker 0", "first_warp": 1, "num_warps": 1}])
    tl = MeasuredTimeline.decode("k", (1,), metadata, raw)
    assert tl.clock_ghz == pytest.approx((1200 + 200) / (600 + 100))
    w0, w1 = tl.warps
    assert (w0.sm, w1.sm) == (7, 7) and not tl.dropped
    np.testing.assert_allclose(w0.times, [0, 20 / tl.clock_ghz, 1000 / tl.clock_ghz, 1200 / tl.clock_ghz])
    np.testing.assert_allclose(w1.times, [100, 100 + 200 / tl.clock_ghz])
    events = tl.chrome_events(unit_ns=1.0)
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {"warp 0 (default)", "warp 1 (worker 0)"}
    waits = [e for e in events if e.get("name") == "mbarrier.wait"]
    assert [e["ph"] for e in waits] == ["B", "E"] and waits[0]["args"]["location"] == "k.py:2"
    summary = tl.summary()
    assert summary["default"]["mbarrier.wait"] == pytest.approx(980 / tl.clock_ghz)
    assert "<svg" in tl.svg(ctas=[0]) and "mbarrier.wait" in tl.svg(ctas=[0])


def test_a_waits_entry_holds_its_begin_and_end():
    # {begin clock, begin tag, end clock, end tag}: the begin's half is written into the entry's first 8 bytes
    rows = {(0, 0): [(1000, 50, 0), (0, 1050, 2), (1600, 1250, 4)]}
    metadata, raw = _synthetic(TABLE, rows, 1, 4)
    entries = raw.view(np.dtype([("globaltimer", "<u8"), ("clock", "<u4"), ("tag", "<u4")]))
    entries["globaltimer"][1] = 70 | (1 | VALID) << 32
    tl = MeasuredTimeline.decode("k", (1,), metadata, raw)
    (w,) = tl.warps
    assert [tl.table[int(e)]["kind"] for e in w.events] == ["kernel.start", "mbarrier.wait", "mbarrier.wait",
                                                            "kernel.end"]
    np.testing.assert_allclose(w.times, np.array([0, 20, 1000, 1200]) / tl.clock_ghz)
    assert tl.clock_ghz == pytest.approx(1200 / 600) and tl.problems() == [] and not tl.dropped  # 3 entries of 4


def test_a_full_row_is_reported_as_dropped_events(tmp_path):
    rows = {(0, 0): [(10 + i if i in (0, 3) else 0, i, 3) for i in range(4)]}
    metadata, raw = _synthetic(TABLE, rows, 1, 4)
    tl = MeasuredTimeline.decode("k", (1,), metadata, raw)
    assert tl.dropped
    path = tmp_path / "t.json"
    tl.save_chrome(str(path))
    assert len(json.loads(path.read_text())["traceEvents"]) == 3 + 4


def test_problems_names_what_is_malformed():
    good = [(1000, 0, 0), (0, 10, 1), (0, 90, 2), (0, 95, 3), (1100, 200, 4)]
    rows = {(0, 0): good,
            (0, 1): [(1000, 0, 0), (0, 10, 1), (0, 95, 3), (1100, 200, 4)],  # a wait that never ends
            (1, 0): [(1000, 0, 1), (0, 10, 2), (1100, 200, 4)],  # no start anchor
            (1, 1): [(1000, 100, 0), (0, 50, 3), (1100, 300, 4)]}  # the clock goes back
    metadata, raw = _synthetic(TABLE, rows, 2, 8, [{"partition": "default", "first_warp": 0, "num_warps": 1},
                                                   {"partition": "worker 0", "first_warp": 1, "num_warps": 1}])
    found = MeasuredTimeline.decode("k", (2,), metadata, raw).problems()
    assert found == ["CTA 0 warp 1: the mbarrier.wait at k.py:2 (event 1) has no end",
                     "CTA 1 warp 0: starts with mbarrier.wait, ends with kernel.end",
                     "CTA 1 warp 1: time goes back after event 0"], found
    metadata, raw = _synthetic(TABLE, {(0, 0): good}, 1, 8, [{"partition": "default", "first_warp": 0, "num_warps": 1},
                                                              {"partition": "worker 0", "first_warp": 1,
                                                               "num_warps": 1}])
    assert MeasuredTimeline.decode("k", (1,), metadata, raw).problems() == ["no events from ['worker 0']"]


def test_a_timeline_survives_json_and_is_drawn_by_matplotlib(tmp_path):
    rows = {(0, 0): [(1000, 50, 0), (0, 70, 1), (0, 1050, 2), (1600, 1250, 3)],
            (0, 1): [(1100, 9, 0), (1200, 209, 3)], (1, 0): [(1000, 0, 0), (1100, 200, 3)]}
    metadata, raw = _synthetic(TABLE, rows, 2, 8)
    tl = MeasuredTimeline.decode("k", (2,), metadata, raw)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tl.to_json(ctas=[0], end_ns=500)))
    back = MeasuredTimeline.from_json(json.loads(path.read_text()))
    assert [(w.cta, w.warp) for w in back.warps] == [(0, 0), (0, 1)]
    np.testing.assert_allclose(back.warps[0].times, np.rint(tl.warps[0].times[:3]))
    assert back.slices(back.warps[0])[0].info["source"] == "wait" and back.clock_ghz == tl.clock_ghz
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    ax = tl.plot(ctas=[0, 1])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["CTA 1 · warp 0 (kernel)", "CTA 0 · warp 1 (kernel)",
                                                             "CTA 0 · warp 0 (kernel)"]
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"mbarrier.wait", "kernel.start", "tma.load"}
    ax.figure.savefig(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_measure_refuses_the_interpreter_with_a_pointer_to_its_own_traces():
    x = np.random.default_rng(1).standard_normal((128, 32)).astype(np.float16)
    y = np.full((128, 32), np.nan, np.float32)
    x_desc, y_desc = producer_consumer.descriptors(x, y, 64)
    with interpreter_on(), pytest.raises(RuntimeError, match="interpret.trace"):
        measure(producer_consumer.producer_consumer_kernel, (1,), x_desc, y_desc, 128, STAGES=2, num_warps=4)
    assert np.abs(y - producer_consumer.reference(x)).max() < 1e-5  # the launch itself ran


# ---------------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_measured_producer_consumer_has_every_partitions_events_and_a_correct_result():
    torch = pytest.importorskip("torch")
    M, N = 4096, 128
    x = torch.randn(M, N, device="cuda").half()
    y = torch.full((M, N), float("nan"), device="cuda")
    x_desc, y_desc = producer_consumer.descriptors(x, y, 64)
    tl = measure(producer_consumer.producer_consumer_kernel, (8,), x_desc, y_desc, M, STAGES=3, num_warps=4,
                 events="all")
    torch.cuda.synchronize()
    assert torch.allclose(y, x.float() * x.float() + 1)
    assert {w.cta for w in tl.warps} == set(range(8)) and not tl.dropped
    parts = {tl.partition_of(w.warp) for w in tl.warps}
    assert parts == {"default", "worker 0"}, parts
    assert 0.5 < tl.clock_ghz < 3.0
    assert tl.problems() == []
    assert all(0 <= w.sm < 256 for w in tl.warps)
    loads = [tl.table[int(e)] for w in tl.warps for e in w.events if tl.table[int(e)]["kind"] == "tma.load"]
    assert len(loads) == M // 64  # one TMA load per row tile, issued by the load partition


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_a_full_row_keeps_its_first_events_and_leaves_the_other_warps_rows_alone():
    torch = pytest.importorskip("torch")
    M, N = 4096, 128
    x = torch.randn(M, N, device="cuda").half()
    y = torch.full((M, N), float("nan"), device="cuda")
    x_desc, y_desc = producer_consumer.descriptors(x, y, 64)
    tl = measure(producer_consumer.producer_consumer_kernel, (8,), x_desc, y_desc, M, STAGES=3, num_warps=4,
                 capacity=3, events="all")
    torch.cuda.synchronize()
    assert torch.allclose(y, x.float() * x.float() + 1) and tl.dropped
    working = sum(p["num_warps"] for p in tl.partitions)  # the padding warps of the CTA record nothing
    # three entries each: a wait's entry holds two events (its begin and end)
    assert len(tl.warps) == 8 * working and all(3 <= len(w.times) <= 6 and w.full for w in tl.warps)
    firsts = {tl.table[int(w.events[0])]["kind"] for w in tl.warps}
    assert firsts == {"kernel.start", "partition.start"}, firsts
