"""Interpreter timelines (:mod:`gluonkit.interpret.trace`, :mod:`gluonkit.interpret.timeline`).

The producer/consumer example's trace must hold the expected events in a valid order on the
logical clock, point at the example's own lines, load as JSON and draw as well-formed SVG;
a failing launch (a deadlock) is still written; and nothing is recorded unless asked for.
"""

from __future__ import annotations

import json
import linecache
import os
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret import InterpreterError, engine
from gluonkit.interpret import trace as trace_module
from gluonkit.interpret.timeline import main as timeline_main
from gluonkit.interpret.timeline import render_svg
from gluonkit.interpret.trace import TRACE_ENV, recording
from gluonkit.language.nvidia.ampere import async_copy
from gluonkit.language.nvidia.hopper import mbarrier

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "persistent_gemm"))

import pipelined_gemm  # noqa: E402
import producer_consumer  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def _run_example(monkeypatch, M=128, BM=32, STAGES=2, programs=2):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    x = np.random.default_rng().standard_normal((M, 32)).astype(np.float16)
    y = np.full((M, 32), np.nan, np.float32)
    with recording() as trace:
        producer_consumer.square_plus_one(x, y, BM=BM, STAGES=STAGES, programs=programs)
    assert np.abs(y - producer_consumer.reference(x)).max() < 1e-6
    return json.loads(json.dumps(trace.to_json()))  # what a viewer loads


def _by_process(data):
    names, lanes, events = {}, {}, defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "M":
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            elif e["name"] == "thread_name":
                lanes[(e["pid"], e["tid"])] = e["args"]["name"]
        else:
            events[e["pid"]].append(e)
    return names, lanes, events


def test_producer_consumer_trace_has_every_kind_in_a_valid_order(monkeypatch):
    data = _run_example(monkeypatch, M=160, STAGES=2, programs=2)
    names, lanes, events = _by_process(data)
    # 2 programs x 3 schedules (forward, reverse, random seed 0), each a process of two lanes
    assert sorted(names.values()) == sorted(
        f"#1 producer_consumer_kernel · program ({p}, 0, 0) · {s}"
        for p in (0, 1) for s in ("forward schedule", "reverse schedule", "random schedule (seed 0)"))
    for pid in names:
        assert lanes[(pid, 0)] == "default partition (4 warps)"
        assert lanes[(pid, 1)] == "worker partition 0 (1 warp)"
        evs = events[pid]
        kinds = {e["args"]["kind"] for e in evs}
        assert {"mbarrier.wait", "mbarrier.arrive", "mbarrier.expect", "mbarrier.phase", "tma.load", "tma.store",
                "tma.store_wait", "thread_barrier"} <= kinds
        assert [e["ts"] for e in evs] == sorted(e["ts"] for e in evs)  # one clock per process, in order
        # every wait ends, after it began, on its own lane
        stacks = defaultdict(list)
        waits = []
        for i, e in enumerate(evs):
            if e["ph"] == "B":
                stacks[e["tid"]].append((i, e))
            elif e["ph"] == "E":
                j, begin = stacks[e["tid"]].pop()
                assert e["name"] == begin["name"] and e["ts"] >= begin["ts"]
                waits.append((i, begin, e))
        assert not any(stacks.values())
        # every async op completes after its issue
        issued, landed = {}, {}
        for i, e in enumerate(evs):
            if e["ph"] == "b":
                issued[e["id"]] = (i, e)
            elif e["ph"] == "e":
                assert e["id"] in issued and e["ts"] >= issued[e["id"]][1]["ts"]
                landed[e["id"]] = (i, e)
        assert issued.keys() == landed.keys()
        # loads are issued by the loader, on ready[s], into bufs[s]; the compute partition waits on ready[s]
        loads = [(issued[k][1], landed[k]) for k in issued if issued[k][1]["args"]["kind"] == "tma.load"]
        assert loads and all(b["tid"] == 1 for b, _ in loads)
        assert all(b["args"]["destination"] == "bufs" + b["args"]["barrier"][len("ready"):] for b, _ in loads)
        for stage in range(2):
            bar = f"ready[{stage}]"
            stage_loads = [(b, e) for b, e in loads if b["args"]["barrier"] == bar]
            stage_waits = [(i, b, e) for i, b, e in waits if b["args"].get("barrier") == bar]
            assert len(stage_loads) == len(stage_waits) >= 1
            assert all(b["tid"] == 0 for _, b, _ in stage_waits)
            for (load, (land_index, land)), (end_index, begin, end) in zip(stage_loads, stage_waits):
                assert begin["args"]["parity"] == load["args"]["phase"] & 1
                assert land_index < end_index and land["ts"] <= end["ts"], (load, land, end)


def test_every_event_points_at_the_examples_source(monkeypatch):
    data = _run_example(monkeypatch, M=64, programs=1)
    example = os.path.realpath(producer_consumer.__file__)
    ops = defaultdict(set)
    for e in data["traceEvents"]:
        if e["ph"] == "M":
            continue
        path, line = e["args"]["location"].rsplit(":", 1)
        assert os.path.realpath(path) == example
        assert e["args"]["source"] == linecache.getline(example, int(line)).strip()
        ops[e["args"]["kind"]].add((e["args"]["op"], e["args"]["source"]))
    assert ops["mbarrier.wait"] == {("mbarrier_wait", "mbarrier.wait(ready.index(stage), (i // STAGES) & 1)"),
                                    ("mbarrier_wait", "mbarrier.wait(empty.index(stage), (lap & 1) ^ 1)")}
    assert ops["tma.load"] == {("async_tma_copy_global_to_shared",
                                "tma.async_load(x_desc, [tile * BM, 0], ready.index(stage), bufs.index(stage))")}
    assert ops["thread_barrier"] == {("thread_barrier", "gl.thread_barrier()  # every thread of this partition "
                                                        "has read the buffer")}


def test_the_environment_variable_writes_every_launch(monkeypatch, tmp_path):
    path = tmp_path / "pc.json"
    monkeypatch.setenv(TRACE_ENV, str(path))
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    x = np.random.default_rng().standard_normal((64, 32)).astype(np.float16)
    for _ in range(2):
        y = np.full((64, 32), np.nan, np.float32)
        producer_consumer.square_plus_one(x, y, BM=32, programs=1)
        assert np.abs(y - producer_consumer.reference(x)).max() < 1e-6
    data = json.loads(path.read_text())
    names = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"}
    assert {n.split(" · ")[0] for n in names} == {"#1 producer_consumer_kernel", "#2 producer_consumer_kernel"}
    assert "logical" in data["otherData"]["clock"]
    for e in data["traceEvents"]:  # the fields each phase needs in Chrome's trace-event format
        required = {"M": {"name", "pid", "args"}, "B": {"name", "pid", "tid", "ts"}, "E": {"pid", "tid", "ts"},
                    "i": {"name", "pid", "tid", "ts", "s"}, "b": {"name", "cat", "id", "pid", "ts"},
                    "e": {"name", "cat", "id", "pid", "ts"}}[e["ph"]]
        assert required <= e.keys(), e


@gluonkit.jit
def _waits_on_first(bars):
    mbarrier.wait(bars.index(0), 0)  # WAIT_FIRST


@gluonkit.jit
def _waits_on_second(bars):
    mbarrier.wait(bars.index(1), 0)  # WAIT_SECOND


@gluonkit.jit
def deadlock_kernel(n):
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    gl.warp_specialize([(_waits_on_first, (bars,)), (_waits_on_second, (bars,))], [1], [24])


def test_a_deadlocked_launch_is_written_with_its_waits_open(monkeypatch, tmp_path):
    path = tmp_path / "deadlock.json"
    monkeypatch.setenv(TRACE_ENV, str(path))
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    with pytest.raises(InterpreterError, match="deadlock"):
        deadlock_kernel[(1,)](3, num_warps=4)
    data = json.loads(path.read_text())
    waits = [e for e in data["traceEvents"] if e["ph"] in "BE" and e["args"]["kind"] == "mbarrier.wait"]
    assert sorted((e["ph"], e["tid"], e["args"]["barrier"]) for e in waits) == [("B", 0, "bars[0]"),
                                                                                ("B", 1, "bars[1]")]
    svg = render_svg(data)
    titles = [t.text for t in ET.fromstring(svg).iter(f"{SVG}title")]
    assert sum("never ended" in t for t in titles) == 2


def test_the_svg_is_well_formed_with_a_lane_per_partition(monkeypatch, tmp_path):
    data = _run_example(monkeypatch, M=128, programs=1)
    svg = render_svg(data, select="forward")
    root = ET.fromstring(svg)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "default partition (4 warps)" in texts and "worker partition 0 (1 warp)" in texts
    assert sum("program (0, 0, 0)" in t for t in texts) == 1  # the forward schedule's run only
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert any(t.startswith("wait ready[") and "producer_consumer.py:" in t for t in titles)
    assert any(t.startswith("TMA load → bufs[") for t in titles)
    blocked = [r for r in root.iter(f"{SVG}rect") if r.get("fill") == "#d62728"]
    assert blocked  # the compute partition waits for its first tile: a bubble
    # the command line writes the same picture from the JSON file
    trace_file, svg_file = tmp_path / "t.json", tmp_path / "t.svg"
    trace_file.write_text(json.dumps(data))
    assert timeline_main([str(trace_file), "-o", str(svg_file), "--select", "forward"]) == 0
    assert svg_file.read_text() == svg


@gluonkit.jit
def cp_async_kernel(x_ptr, out_ptr, layout: gl.constexpr):
    rows = gl.arange(0, 32, gl.SliceLayout(1, layout))[:, None]
    cols = gl.arange(0, 64, gl.SliceLayout(0, layout))[None, :]
    smem = gl.allocate_shared_memory(gl.float32, [32, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    async_copy.async_load(smem, x_ptr + rows * 64 + cols)
    async_copy.commit_group()
    async_copy.wait_group(0)
    gl.store(out_ptr + rows * 64 + cols, smem.load(layout) * 2.0)


def test_cp_async_and_wgmma_are_traced(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng()
    x = rng.standard_normal((32, 64)).astype(np.float32)
    out = np.zeros_like(x)
    a = rng.standard_normal((64, 128)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    with recording() as trace:
        cp_async_kernel[(1,)](x, out, layout=gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0]), num_warps=4)
        pipelined_gemm.gemm(a, b, c, BM=64, BN=64, BK=32, STAGES=2, num_warps=4)
    assert np.array_equal(out, x * 2)
    assert np.abs(c - a.astype(np.float64) @ b.astype(np.float64)).max() < 1e-2
    by_kind = defaultdict(list)
    for e in trace.to_json()["traceEvents"]:
        if e["ph"] != "M":
            by_kind[(e["args"]["kind"], e["ph"])].append(e)
    copies = by_kind[("cp_async", "b")]
    assert [e["name"] for e in copies] == ["cp.async → smem"] and len(by_kind[("cp_async", "e")]) == 1
    assert by_kind[("cp_async.commit", "i")][0]["args"]["copies"] == 1
    assert by_kind[("cp_async.wait", "i")][0]["args"]["retires"] == 1
    issued, retired = by_kind[("wgmma", "b")], by_kind[("wgmma", "e")]
    assert len(issued) == len(retired) == 4  # K / BK groups, each retired by a warpgroup_mma_wait
    assert all(e["args"]["reads"].startswith("a_smem[") for e in issued)
    assert by_kind[("wgmma.wait", "i")]
    for e in by_kind[("wgmma", "e")]:
        begin = next(b for b in issued if b["id"] == e["id"])
        assert e["ts"] >= begin["ts"]


def test_nothing_is_recorded_unless_asked(monkeypatch, tmp_path):
    monkeypatch.delenv(TRACE_ENV, raising=False)
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)
    seen = []
    original = engine.Program.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append((self.trace, "trace" in self.progress))

    monkeypatch.setattr(engine.Program, "__init__", spy)
    assert trace_module.active_trace() is None
    x = np.random.default_rng().standard_normal((64, 32)).astype(np.float16)
    y = np.full((64, 32), np.nan, np.float32)
    producer_consumer.square_plus_one(x, y, BM=32, programs=1)
    assert np.abs(y - producer_consumer.reference(x)).max() < 1e-6
    assert seen and all(s == (None, False) for s in seen)
    assert list(tmp_path.iterdir()) == []
