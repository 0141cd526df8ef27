"""Planted bugs in a producer/consumer pipeline across partitions, each reported by the interpreter.

:func:`ring_kernel` is ``examples/warp_specialized/producer_consumer.py`` with a ``BUG``
constexpr that plants one mistake at a line marked ``# BUG:<name>``; the report must point
at that line (or, for a deadlock, list it among the partitions' waits) under every schedule
the interpreter tries.
"""

from __future__ import annotations


import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor
from kernel_checks import marked_line


@gluonkit.jit
def _loader(x_desc, bufs, ready, empty, my_tiles, STAGES: gl.constexpr, BUG: gl.constexpr):
    BM: gl.constexpr = x_desc.block_type.shape[0]
    for i in range(my_tiles):
        tile = gl.program_id(0) + i * gl.num_programs(0)
        stage = i % STAGES
        if BUG != "no_empty_wait":
            mbarrier.wait(empty.index(stage), ((i // STAGES) & 1) ^ 1)  # BUG:empty_count
        if BUG != "no_expect":
            mbarrier.expect(ready.index(stage), x_desc.block_type.nbytes)  # BUG:no_empty_wait
        tma.async_load(x_desc, [tile * BM, 0], ready.index(stage), bufs.index(stage))  # LOAD


@gluonkit.jit
def _computer(y_desc, bufs, out, ready, empty, my_tiles, STAGES: gl.constexpr, BUG: gl.constexpr):
    BM: gl.constexpr = y_desc.block_type.shape[0]
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    for i in range(my_tiles):
        tile = gl.program_id(0) + i * gl.num_programs(0)
        stage = i % STAGES
        phase = (i // STAGES) & 1
        if BUG == "parity":
            phase = phase ^ 1
        mbarrier.wait(ready.index(stage), phase)  # BUG:parity BUG:no_expect BUG:READY_WAIT
        if BUG == "early_release":
            mbarrier.arrive(empty.index(stage))  # released before it is read
        x = bufs.index(stage).load(layout).to(gl.float32)  # BUG:early_release
        gl.thread_barrier()
        if BUG != "early_release":
            mbarrier.arrive(empty.index(stage))
        tma.store_wait(0)
        out.store(x * x + 1.0)
        fence_async_shared()
        tma.async_store(y_desc, [tile * BM, 0], out)
    if BUG != "no_final_store_wait":
        tma.store_wait(0)


@gluonkit.jit
def ring_kernel(x_desc, y_desc, M, STAGES: gl.constexpr, BUG: gl.constexpr):
    BM: gl.constexpr = x_desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BM, x_desc.block_type.shape[1]], x_desc.layout)
    out = gl.allocate_shared_memory(y_desc.dtype, y_desc.block_type.shape, y_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2 if BUG == "empty_count" else 1)
    fence_async_shared()
    my_tiles = gl.cdiv(gl.cdiv(M, BM) - gl.program_id(0), gl.num_programs(0))
    gl.warp_specialize([
        (_computer, (y_desc, bufs, out, ready, empty, my_tiles, STAGES, BUG)),
        (_loader, (x_desc, bufs, ready, empty, my_tiles, STAGES, BUG)),
    ], [1], [24])


def _run(bug, monkeypatch, schedules=None, M=160, BM=32, STAGES=2):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    if schedules is not None:
        monkeypatch.setenv("GLUONKIT_INTERPRET_SCHEDULES", str(schedules))
    x = np.random.default_rng().standard_normal((M, 32)).astype(np.float16)
    y = np.full((M, 32), np.nan, np.float32)
    layout = gl.NVMMASharedLayout.get_default_for
    x_desc = TensorDescriptor.from_tensor(x, [BM, 32], layout([BM, 32], gl.float16))
    y_desc = TensorDescriptor.from_tensor(y, [BM, 32], layout([BM, 32], gl.float32))
    ring_kernel[(1,)](x_desc, y_desc, M, STAGES=STAGES, BUG=bug, num_warps=4)
    return x, y


def test_the_correct_ring_matches_numpy_under_many_schedules(monkeypatch):
    x, y = _run(None, monkeypatch, schedules=8)
    ref = x.astype(np.float64) ** 2 + 1
    assert np.abs(y - ref).max() < 1e-6


@pytest.mark.parametrize("bug, waits, explanation", [
    ("no_expect", [("_computer", "BUG:no_expect"), ("_loader", "BUG:empty_count")],
     "its copies brought 2048 byte(s) that no mbarrier.expect announced"),
    ("empty_count", [("_loader", "BUG:empty_count"), ("_computer", "BUG:READY_WAIT")],
     "1 of its 2 arrival(s) and 0 transaction byte(s) are still missing in its current phase (parity 0); arrivals so "
     "far came from the default partition"),
])
def test_deadlocks_list_every_partitions_wait(monkeypatch, bug, waits, explanation):
    with pytest.raises(InterpreterError) as info:
        _run(bug, monkeypatch)
    text = str(info.value)
    assert "deadlock" in text
    functions = {"_computer": _computer, "_loader": _loader}
    for name, marker in waits:
        assert f"mbarrier.wait at line {marked_line(functions[name], marker)}" in text, text
    assert explanation in text


def test_a_wrong_parity_is_reported(monkeypatch):
    """Waiting for parity 1 of a fresh barrier returns at once (as on the GPU), so the buffer is read
    before any copy wrote it; if the copy was issued first, the wait itself is on the wrong phase."""
    with pytest.raises(InterpreterError) as info:
        _run("parity", monkeypatch)
    err = info.value
    wait, read = marked_line(_computer, "BUG:parity"), marked_line(_computer, "BUG:early_release")
    assert (err.loc.line, err.loc.line == wait and "wrong phase" in str(err)) in ((wait, True), (read, False))
    if err.loc.line == read:
        assert "which nothing has written yet" in str(err)


def test_refilling_a_stage_before_it_is_freed_is_reported(monkeypatch):
    with pytest.raises(InterpreterError) as info:
        _run("no_empty_wait", monkeypatch)
    err = info.value
    assert err.loc.line in (marked_line(_loader, "BUG:no_empty_wait"), marked_line(_loader, "LOAD")), str(err)
    assert "race" in str(err) or "before refilling it" in str(err)


def test_releasing_a_stage_before_reading_it_is_a_race(monkeypatch):
    """The loader may refill the stage while the compute partition still reads it: whichever comes
    first, the report names the read and the refill."""
    with pytest.raises(InterpreterError) as info:
        _run("early_release", monkeypatch, schedules=6)
    text = str(info.value)
    read_line, load_line = marked_line(_computer, "BUG:early_release"), marked_line(_loader, "LOAD")
    assert info.value.loc.line in (read_line, load_line), text
    if "race" in text:
        assert f"line {read_line}" in text and "the default partition" in text
    else:
        assert f"the TMA load issued at line {load_line} may still be writing it" in text


def test_a_partition_ending_with_a_store_in_flight_is_reported(monkeypatch):
    with pytest.raises(InterpreterError) as info:
        _run("no_final_store_wait", monkeypatch)
    text = str(info.value)
    assert "the default partition ends while the TMA store issued at line" in text
    assert "call tma.store_wait(0) before the default partition ends" in text
