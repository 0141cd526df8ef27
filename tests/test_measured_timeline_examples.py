"""Measured timelines of every pipeline example on the GPU: each runs once, instrumented at level
``all``, computes the right result (checked in ``benchmarks/measured_examples.py``) and its events
are well-formed (:meth:`~gluonkit.runtime.timeline.MeasuredTimeline.problems`)."""

from __future__ import annotations

import os
import sys

import pytest

from gluonkit.runtime.driver import has_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]

EXAMPLES = ["persistent_gemm", "pipelined_gemm", "producer_consumer", "ws_gemm_coop", "ws_gemm_pingpong",
            "ws_gemm_fp8", "flash_attention"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_pipeline_example_has_a_well_formed_measured_timeline(name):
    pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    import measured_examples

    assert sorted(measured_examples.EXAMPLES) == sorted(EXAMPLES)
    timeline = measured_examples.EXAMPLES[name]("all")
    assert timeline.problems() == []
    kinds = {timeline.table[int(e)]["kind"] for w in timeline.warps for e in w.events}
    assert kinds & {"mbarrier.wait", "cp_async.wait"} and kinds & {"tma.load", "cp_async"}, kinds
    assert all(e["source"] and e["line"] > 0 for e in timeline.table if e["phase"] != "instant")
