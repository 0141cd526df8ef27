"""How long a TMA load keeps its destination busy (:mod:`gluonkit.lower.memplan.liveness`).

A load completes at a phase of its mbarrier; its destination is busy until the last
``mbarrier.wait`` on that barrier that can run after it.  So a pipeline's stage buffers,
drained by a wait after the loop, share bytes with the epilogue's buffer (as Gluon's
pipelined matmuls need to fit), while a load that no later wait observes keeps its buffer
to the end of the kernel — and the interpreter reports it.  Checked on the plan, against
numpy in the interpreter, and through ptxas for sm_90a.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.hopper import mbarrier, tma
from gluonkit.lower import context
from gluonkit.nvidia.hopper import TensorDescriptor
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

L = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
B = gl.constexpr(32)
N = 32  # B on the host


@gluonkit.jit
def _load(desc, bars, bufs, tile):
    stage = tile % 2
    mbarrier.expect(bars.index(stage), desc.block_type.nbytes)
    tma.async_load(desc, [tile * desc.block_shape[0], 0], bars.index(stage), bufs.index(stage))


@gluonkit.jit
def _take(bars, bufs, tile):
    stage = tile % 2
    mbarrier.wait(bars.index(stage), (tile // 2) & 1)
    return bufs.index(stage).load(L)


@gluonkit.jit
def staged_sum_kernel(desc, y_ptr, n_tiles, PREFETCH_PAST_END: gl.constexpr):
    """y = the sum of the n_tiles row blocks of desc, double-buffered through TMA."""
    bufs = gl.allocate_shared_memory(desc.dtype, [2] + desc.block_shape, desc.layout)  # STAGES
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(2):
        mbarrier.init(bars.index(s), count=1)
    _load(desc, bars, bufs, 0)
    acc = gl.zeros([B, B], gl.float32, L)
    for i in range(n_tiles - 1):
        _load(desc, bars, bufs, i + 1)
        acc += _take(bars, bufs, i)
    acc += _take(bars, bufs, n_tiles - 1)  # the drain: the last wait on bars
    if PREFETCH_PAST_END:
        _load(desc, bars, bufs, n_tiles)  # never waited for
    out = gl.allocate_shared_memory(gl.float32, [B, B], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), acc)  # EPILOGUE
    rows = gl.arange(0, B, layout=gl.SliceLayout(1, L))
    cols = gl.arange(0, B, layout=gl.SliceLayout(0, L))
    gl.store(y_ptr + rows[:, None] * B + cols[None, :], out.load(L))


def _offsets(monkeypatch, prefetch: bool):
    """The byte offsets of the STAGES and EPILOGUE buffers in the sm_90a plan, and the compiled kernel."""
    captured = []
    plan_ = context.plan_shared_memory

    def capture(func):
        captured.append(plan_(func))
        return captured[-1]

    monkeypatch.setattr(context, "plan_shared_memory", capture)
    layout = gl.NVMMASharedLayout.get_default_for([N, N], gl.float32)
    desc = TensorDescriptor.from_tensor(np.zeros((4 * N, N), np.float32), [N, N], layout)
    compiled = staged_sum_kernel.compile(desc, "*fp32", "i32", PREFETCH_PAST_END=prefetch, target="sm_90a")
    lines, first = inspect.getsourcelines(staged_sum_kernel.fn)
    line = {m: first + next(i for i, t in enumerate(lines) if t.rstrip().endswith(f"# {m}")) for m in ("STAGES",
                                                                                                      "EPILOGUE")}
    regions = {m: next(r for r in captured[-1].regions.values() if r.op.loc.line == n) for m, n in line.items()}
    return {m: r.offset for m, r in regions.items()}, compiled


def test_drained_stage_buffers_share_bytes_with_the_epilogue(monkeypatch):
    offsets, compiled = _offsets(monkeypatch, prefetch=False)
    assert offsets["EPILOGUE"] == offsets["STAGES"]
    assert compiled.metadata["shared"] < 2 * N * N * 4 + N * N * 4


def test_a_load_no_wait_observes_keeps_its_buffer_to_the_end(monkeypatch):
    offsets, compiled = _offsets(monkeypatch, prefetch=True)
    assert offsets["EPILOGUE"] >= offsets["STAGES"] + 2 * N * N * 4
    assert compiled.metadata["shared"] >= 3 * N * N * 4


@pytest.mark.parametrize("n_tiles", [1, 2, 5])
def test_the_sum_matches_numpy(n_tiles):
    x = np.random.default_rng().standard_normal((5 * N, N)).astype(np.float32)
    y = np.full((N, N), np.nan, np.float32)
    desc = TensorDescriptor.from_tensor(x, [N, N], gl.NVMMASharedLayout.get_default_for([N, N], gl.float32))
    with interpreter_on():
        staged_sum_kernel[(1,)](desc, y, n_tiles, PREFETCH_PAST_END=False)
    expected = x[:n_tiles * N].astype(np.float64).reshape(n_tiles, N, N).sum(axis=0)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_the_interpreter_reports_the_unobserved_load():
    x = np.random.default_rng().standard_normal((4 * N, N)).astype(np.float32)
    desc = TensorDescriptor.from_tensor(x, [N, N], gl.NVMMASharedLayout.get_default_for([N, N], gl.float32))
    with interpreter_on(), pytest.raises(InterpreterError, match="in flight"):
        staged_sum_kernel[(1,)](desc, np.zeros((N, N), np.float32), 3, PREFETCH_PAST_END=True)


@needs_ptxas
def test_the_shared_plan_assembles(monkeypatch):
    _, compiled = _offsets(monkeypatch, prefetch=False)
    assert "cubin" in compiled.asm
