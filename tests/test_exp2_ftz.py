"""``gl.exp2`` of float32 is Triton's ``ex2.approx.ftz.f32``: one MUFU instruction per element
(the non-flushing form costs a range test and two multiplies more, which made up most of the
FMA-pipe work of attention's softmax).  A result below float32's smallest normal is 0, on the
GPU and in the interpreter alike; ``gl.exp`` keeps the non-flushing form, as in Triton."""

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.runtime.driver import has_gpu
from interpreting import launch_interpreted
from kernel_checks import needs_ptxas

_LAYOUT = gl.BlockedLayout([1], [32], [4], [0])
_TINY = np.finfo(np.float32).tiny  # 2**-126
# Around the flush: 2**-149 (smallest subnormal) ... 2**-126 and a little above, ordinary values.
_X = np.float32([-160, -149, -130, -126.5, -126, -125.9, -20.25, -1, 0, 1e-40, 0.5, 3, 60, 127.5])


@gluonkit.jit
def _exp_kernel(x_ptr, out2_ptr, oute_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    gl.store(out2_ptr + offs, gl.exp2(x))
    gl.store(oute_ptr + offs, gl.exp(x * 0.6931471805599453))


def _inputs(rng):
    return np.concatenate([_X, rng.uniform(-140, 40, 128 - _X.size).astype(np.float32)])


def _flushed_exp2(x):
    exact = np.exp2(x.astype(np.float64))
    return np.where(exact < _TINY, 0.0, exact)


def test_interpreter_flushes_subnormal_exp2_results_only():
    x = _inputs(np.random.default_rng(0))
    out2, oute = np.full_like(x, np.nan), np.full_like(x, np.nan)
    launch_interpreted(_exp_kernel, (1,), x, out2, oute, N=128, layout=_LAYOUT, num_warps=4)
    np.testing.assert_allclose(out2, _flushed_exp2(x), rtol=2e-7, atol=0)
    assert (out2[:4] == 0).all() and out2[5] > 0 and out2[4] == _TINY
    # exp keeps subnormal results: exp(-130 ln 2) = 2**-130 is not 0
    assert oute[2] > 0 and oute[2] < _TINY


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_exp2_lowers_to_the_flushing_instruction(target):
    ptx = _exp_kernel.compile("*fp32:16", "*fp32:16", "*fp32:16", N=128, layout=_LAYOUT, num_warps=4,
                              target=target).asm["ptx"]
    assert "ex2.approx.ftz.f32" in ptx
    assert "ex2.approx.f32" in ptx  # exp: not flushed


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_gpu_exp2_flushes_like_the_interpreter():
    torch = pytest.importorskip("torch")
    x = _inputs(np.random.default_rng(1))
    xd = torch.from_numpy(x).cuda()
    out2, oute = torch.full_like(xd, float("nan")), torch.full_like(xd, float("nan"))
    _exp_kernel[(1,)](xd, out2, oute, N=128, layout=_LAYOUT, num_warps=4)
    got = out2.cpu().numpy()
    want = _flushed_exp2(x)
    assert ((got == 0) == (want == 0)).all()
    np.testing.assert_allclose(got, want, rtol=2 ** -21, atol=0)  # ex2.approx: within 2 ulp
