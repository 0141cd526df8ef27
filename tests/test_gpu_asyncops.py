"""Atomics, inline assembly and cp.async on the GPU, against numpy and the CPU interpreter.

The kernels are those of ``tests/test_atomics.py``, ``tests/test_inline_asm.py`` and
``tests/test_async_copy.py``; marked ``gpu`` (skipped without a CUDA GPU and torch).
Outputs are poisoned before each launch so an element the kernel fails to write cannot pass.
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.dirname(__file__))

from interpreting import launch_interpreted  # noqa: E402
import test_async_copy as cp  # noqa: E402
import test_atomics as at  # noqa: E402
import test_inline_asm as asm  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]


def _cuda(a):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


# ---------------------------------------------------------------------------- atomics
@pytest.mark.parametrize("layout", [at.BLOCKED, at.REPLICATED], ids=["blocked", "replicated"])
def test_histogram_matches_numpy(layout):
    rng = np.random.default_rng(11)
    n, block = 100_003, 64 if layout is at.REPLICATED else 256
    x = rng.integers(0, 37, n).astype(np.int32)
    bins = _cuda(np.zeros(37, np.int32))
    at.histogram_kernel[(-(-n // block),)](_cuda(x), bins, n, BLOCK=block, layout=layout)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(bins.cpu().numpy(), np.bincount(x, minlength=37))


@pytest.mark.parametrize("fn, dtype", [("add", np.int64), ("max", np.float32), ("min", np.float32),
                                       ("xor", np.int32), ("or", np.uint64), ("max", np.uint32)])
def test_final_values_match_the_interpreter(fn, dtype):
    rng = np.random.default_rng(12)
    n, block, slots = 4096, 256, 23
    if np.dtype(dtype).kind == "f":
        values, initial = rng.standard_normal(n).astype(dtype), rng.standard_normal(slots).astype(dtype)
    else:
        values, initial = rng.integers(0, 1000, n).astype(dtype), rng.integers(0, 1000, slots).astype(dtype)
    index = rng.integers(0, slots, n).astype(np.int32)
    expected = initial.copy()
    launch_interpreted(at.rmw_kernel, (n // block,), expected, values, np.zeros(n, dtype), index, n, FN=fn,
                       BLOCK=block, layout=at.BLOCKED)
    memory = _cuda(initial)
    old = _cuda(np.zeros(n, dtype))
    at.rmw_kernel[(n // block,)](memory, _cuda(values), old, _cuda(index), n, FN=fn, BLOCK=block, layout=at.BLOCKED)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(memory.cpu().numpy(), expected)


@pytest.mark.parametrize("layout", [at.BLOCKED, at.REPLICATED], ids=["blocked", "replicated"])
def test_tickets_are_handed_out_once_each(layout):
    block = 64 if layout is at.REPLICATED else 256
    counter = _cuda(np.array([5], np.int32))
    tickets = _cuda(np.full(50 * block, -1, np.int32))
    at.ticket_kernel[(50,)](counter, tickets, BLOCK=block, layout=layout)
    torch.cuda.synchronize()
    assert int(counter.item()) == 5 + 50 * block
    np.testing.assert_array_equal(np.sort(tickets.cpu().numpy()), np.arange(5, 5 + 50 * block))


def test_scalar_and_cas_match_the_interpreter():
    counter = _cuda(np.array([11], np.int32))
    out = _cuda(np.full(6, -1, np.int32))
    at.scalar_kernel[(6,)](counter, out)
    torch.cuda.synchronize()
    assert int(counter.item()) == 23
    np.testing.assert_array_equal(np.sort(out.cpu().numpy()), 11 + 2 * np.arange(6))
    memory = np.random.default_rng(3).integers(0, 3, 128).astype(np.int32)
    expected, expected_old = memory.copy(), np.zeros(128, np.int32)
    launch_interpreted(at.cas_kernel, (1,), expected, expected_old, BLOCK=128, layout=at.REPLICATED)
    gm, go = _cuda(memory), _cuda(np.full(128, -1, np.int32))
    at.cas_kernel[(1,)](gm, go, BLOCK=128, layout=at.REPLICATED)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(gm.cpu().numpy(), expected)
    np.testing.assert_array_equal(go.cpu().numpy(), expected_old)


# ------------------------------------------------------------------------ inline asm
@pytest.mark.parametrize("pack", [1, 2])
def test_inline_asm_negates(pack):
    x = np.random.default_rng(pack).standard_normal(512).astype(np.float16)
    y = _cuda(np.full(512, np.nan, np.float16))
    asm.negate_kernel[(1,)](_cuda(x), y, PACK=pack, layout=asm.LAYOUT)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), -x)


def test_inline_asm_two_results():
    x = (np.random.default_rng(5).standard_normal(512) * 10).astype(np.float32)
    s, r = _cuda(np.full(512, np.nan, np.float32)), _cuda(np.zeros(512, np.int32))
    asm.two_results_kernel[(1,)](_cuda(x), s, r, 1.5, layout=asm.LAYOUT)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(s.cpu().numpy(), x + np.float32(1.5))
    np.testing.assert_array_equal(r.cpu().numpy(), np.trunc(x).astype(np.int32))


# --------------------------------------------------------------------------- cp.async
@pytest.mark.parametrize("M, K, stages", [(64, 1000, 3), (45, 256, 2), (300, 4096, 4)])
def test_pipelined_row_sums_match_numpy(M, K, stages):
    x = np.random.default_rng(M).standard_normal((M, K)).astype(np.float32)
    out = _cuda(np.full(M, np.nan, np.float32))
    cp.row_sum_kernel[(-(-M // 32),)](_cuda(x), out, M, K, BM=32, BK=64, STAGES=stages, layout=cp.TILE)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("increment", [False, True])
def test_mbarrier_completed_copies(increment):
    x = np.random.default_rng(4).standard_normal((32, 64)).astype(np.float32)
    out = _cuda(np.full_like(x, np.nan))
    cp.barrier_copy_kernel[(1,)](_cuda(x), out, 20, INCREMENT=increment, layout=cp.TILE)
    torch.cuda.synchronize()
    got = out.cpu().numpy()
    np.testing.assert_array_equal(got[:20], x[:20])
    np.testing.assert_array_equal(got[20:], 0)
