"""Every pipeline example, run once on the GPU with a measured timeline (:mod:`gluonkit.runtime.timeline`).

:data:`EXAMPLES` maps a name to ``run(events) -> MeasuredTimeline``: it makes random inputs with
torch, launches the example inside :func:`~gluonkit.runtime.timeline.measuring` at level ``events``,
checks its result against a float64 reference and returns the timeline of the example's (first)
kernel.  Used by
``tests/test_measured_timeline_examples.py`` and ``benchmarks/timeline_pictures.py``.
"""

import math
import os
import sys

import torch

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
for _folder in ("persistent_gemm", "warp_specialized", "attention"):
    sys.path.insert(0, os.path.join(_ROOT, _folder))

import flash_attention  # noqa: E402
import persistent_gemm  # noqa: E402
import pipelined_gemm  # noqa: E402
import producer_consumer  # noqa: E402
import ws_gemm  # noqa: E402
import ws_gemm_fp8  # noqa: E402
from gluonkit.runtime.timeline import measuring  # noqa: E402

CAPACITY = 4096  # events per warp: the largest example here records about 1000 at level "all"


def _measured(call, events):
    with measuring(capacity=CAPACITY, events=events) as timelines:
        call()
    torch.cuda.synchronize()
    assert timelines, "the example launched nothing on the GPU"
    return timelines[0]


def _check(name, got, ref, tolerance):
    err = ((got.double() - ref).norm() / ref.norm()).item()
    assert err < tolerance, f"{name}: relative error {err:.2e}"


def _randn(*shape, dtype=torch.float16):
    return torch.randn(*shape, device="cuda").to(dtype)


def _gemm_inputs(M, N, K, dtype=torch.float16, out=torch.float32):
    a, b = _randn(M, K, dtype=dtype), _randn(K, N, dtype=dtype)
    return a, b, torch.full((M, N), float("nan"), device="cuda", dtype=out), a.double() @ b.double()


def persistent(events):
    a, b, c, ref = _gemm_inputs(2048, 2048, 2048)
    timeline = _measured(lambda: persistent_gemm.gemm(a, b, c, EPILOGUE_SPLIT=2), events)
    _check("persistent_gemm", c, ref, 1e-3)
    return timeline


def pipelined(events):
    a, b, c, ref = _gemm_inputs(1024, 1024, 2048)
    timeline = _measured(lambda: pipelined_gemm.gemm(a, b, c), events)
    _check("pipelined_gemm", c, ref, 1e-3)
    return timeline


def producer_consumer_example(events):
    x = _randn(8192, 128)
    y = torch.full((8192, 128), float("nan"), device="cuda")
    timeline = _measured(lambda: producer_consumer.square_plus_one(x, y, programs=132), events)
    _check("producer_consumer", y, x.double() * x.double() + 1, 1e-6)
    return timeline


def _ws(events, **config):
    a, b, c, ref = _gemm_inputs(2048, 2048, 2048, torch.bfloat16, torch.bfloat16)
    timeline = _measured(lambda: ws_gemm.prepare(a, b, c, **config)(), events)
    _check("ws_gemm", c, ref, 1e-2)
    return timeline


def ws_coop(events):
    return _ws(events, BN=256, STAGES=4, EPILOGUE_SPLIT=2)


def ws_pingpong(events):
    return _ws(events, BN=128, STAGES=6, EPILOGUE_SPLIT=2, PINGPONG=True, GROUP_M=8)


def ws_fp8(events):
    M = N = K = 2048
    a = _randn(M, K, dtype=torch.float8_e4m3fn)
    b = _randn(N, K, dtype=torch.float8_e4m3fn)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    scale_a, scale_b = (torch.tensor([s], device="cuda") for s in (0.5, 0.25))
    timeline = _measured(lambda: ws_gemm_fp8.gemm(a, b, c, scale_a, scale_b), events)
    _check("ws_gemm_fp8", c, (a.float().double() @ b.float().double().T) * 0.125, 8e-3)
    return timeline


def attention(events):
    B, H, S, D = 1, 4, 1024, 128
    q, k, v = (_randn(B, H, S, D) for _ in range(3))
    o = torch.full((B, H, S, D), float("nan"), device="cuda", dtype=torch.float16)
    lse = torch.full((B, H, S), float("nan"), device="cuda")
    timeline = _measured(lambda: flash_attention.attention(q, k, v, o, lse), events)
    p = torch.softmax(q.double() @ k.double().transpose(-1, -2) / math.sqrt(D), dim=-1)
    _check("flash_attention", o, p @ v.double(), 1e-2)
    return timeline


EXAMPLES = {
    "persistent_gemm": persistent,
    "pipelined_gemm": pipelined,
    "producer_consumer": producer_consumer_example,
    "ws_gemm_coop": ws_coop,
    "ws_gemm_pingpong": ws_pingpong,
    "ws_gemm_fp8": ws_fp8,
    "flash_attention": attention,
}

