"""The ``maxnreg`` launch option: a register cap per thread, compiled as PTX ``.maxnreg``.

It reaches the IR (so the printed IR, and with it the on-disk cache key, tells capped and
uncapped builds apart) and the lowering; ptxas honours it.  Bad values are an
``ArgumentError`` at the kernel's ``def``; the interpreter ignores the option.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.ir import print_function
from gluonkit.lang.errors import ArgumentError
from gluonkit.runtime.cache import kernel_key
from gluonkit.runtime.driver import has_gpu

from interpreting import interpreter_on
from kernel_checks import line_containing, needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]
LAYOUT = gl.BlockedLayout([64], [32], [4], [0])  # 64 values per thread: many live registers
F32P = gl.pointer_type(gl.float32)


@gluonkit.jit
def many_live(x_ptr, out_ptr, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    x = gl.load(x_ptr + offs)
    total = gl.sum(x, axis=0)  # every value stays live across the reduction
    gl.store(out_ptr + offs, x * total + x * x)


def _compile(target, maxnreg):
    return many_live.compile("*fp32", "*fp32", target=target, BLOCK=8192, layout=LAYOUT, maxnreg=maxnreg)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_maxnreg_becomes_ptx_maxnreg_and_ptxas_honours_it(target):
    free = _compile(target, None)
    assert ".maxnreg" not in free.asm["ptx"] and free.metadata["registers"] > 32
    capped = _compile(target, 128)
    assert ".maxnreg 128" in capped.asm["ptx"] and capped.metadata["registers"] <= 128
    tight = _compile(target, 32)  # below what the kernel wants: ptxas spills instead
    assert ".maxnreg 32" in tight.asm["ptx"]
    assert tight.metadata["registers"] <= 32 and tight.metadata["spill_stores"] > 0


def test_maxnreg_is_in_the_ir_text_and_the_cache_key():
    free = many_live.build_ir([F32P, F32P], dict(BLOCK=8192, layout=LAYOUT))
    capped = many_live.build_ir([F32P, F32P], dict(BLOCK=8192, layout=LAYOUT), maxnreg=128)
    assert capped is not free and capped.maxnreg == 128 and free.maxnreg is None
    assert "num_warps=4 maxnreg=128 {" in print_function(capped)
    assert "maxnreg" not in print_function(free)
    assert kernel_key(capped, "sm_90a") != kernel_key(free, "sm_90a")
    assert many_live.build_ir([F32P, F32P], dict(BLOCK=8192, layout=LAYOUT), maxnreg=128) is capped


@pytest.mark.parametrize("value", [0, -8, 128.0, "128", True])
def test_bad_maxnreg_is_an_argument_error_at_the_def(value):
    with pytest.raises(ArgumentError, match=r"maxnreg \(registers per thread\) must be a positive int or None, "
                                            rf"got {value!r}") as info:
        _compile("sm_90a", value)
    assert f":{line_containing(many_live.fn, 'def many_live')}:" in str(info.value)
    with interpreter_on(), pytest.raises(ArgumentError, match="must be a positive int or None"):
        x = np.zeros(8192, np.float32)
        many_live[(1,)](x, x, BLOCK=8192, layout=LAYOUT, maxnreg=value)


def test_the_interpreter_ignores_maxnreg():
    rng = np.random.default_rng()
    x = rng.standard_normal(2 * 8192).astype(np.float32)
    out = np.zeros_like(x)
    with interpreter_on():
        many_live[(2,)](x, out, BLOCK=8192, layout=LAYOUT, maxnreg=32)
    blocks = x.astype(np.float64).reshape(2, 8192)
    expected = blocks * blocks.sum(axis=1, keepdims=True) + blocks * blocks
    np.testing.assert_allclose(out.reshape(2, 8192), expected, rtol=1e-4, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_capped_and_uncapped_launches_agree_on_the_gpu(monkeypatch):
    """A capped launch (spilling) computes what the uncapped one does, and each cap is its own build."""
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("GLUONKIT_INTERPRET", raising=False)
    x = torch.randn(2 * 8192, device="cuda")
    results = []
    for maxnreg in (None, 32, None, 32):  # repeats take the fast path with the right kernel
        out = torch.zeros_like(x)
        many_live[(2,)](x, out, BLOCK=8192, layout=LAYOUT, maxnreg=maxnreg)
        results.append(out)
    torch.cuda.synchronize()
    blocks = x.double().reshape(2, 8192)
    expected = (blocks * blocks.sum(dim=1, keepdim=True) + blocks * blocks).reshape(-1)
    for out in results:
        torch.testing.assert_close(out.double(), expected, rtol=1e-4, atol=1e-2)
    assert torch.equal(results[0], results[2]) and torch.equal(results[1], results[3])
