"""What Gluon 3.9's frontend accepts, with Gluon's semantics: launch options as kernel
parameters, ``@gluonkit.aggregate``, ``@gluonkit.constexpr_function``, tuples through
``@jit`` calls, early returns, ``break``/``continue`` and the debugging builtins.

Kernels run in the CPU interpreter against numpy on fresh random inputs; misuse must give
a :class:`~gluonkit.CompilationError` naming the user's line; a few kernels are compiled for
sm_90a and sm_100a through ptxas.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.lang.errors import ArgumentError
from gluonkit.lower.backend.ptxas import find_ptxas

from interpreting import interpreter_on

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
TARGETS = ["sm_90a", "sm_100a"]


@pytest.fixture(autouse=True)
def interpret():
    with interpreter_on():
        yield


@pytest.fixture
def rng():
    return np.random.default_rng()


def _line(fn, marker: str) -> int:
    """The file line number of the first source line of ``fn`` containing ``marker``."""
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


# ------------------------------------------------------------ launch options as parameters
@gluonkit.jit
def warps_kernel(x_ptr, out_ptr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    offs = gl.arange(0, 32 * num_warps, layout)
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, x * num_warps + gl.num_warps() * 100 + gl.num_ctas() * 10000)


@pytest.mark.parametrize("warps", [1, 2, 8])
def test_a_keyword_launch_option_binds_the_parameter_too(warps, rng):
    x = rng.integers(-50, 50, 32 * warps).astype(np.int32)
    out = np.zeros_like(x)
    warps_kernel[(1,)](x, out, num_warps=warps)
    np.testing.assert_array_equal(out, x * warps + warps * 100 + 10000)


@gluonkit.jit
def options_kernel(x_ptr, out_ptr, num_warps: gl.constexpr = 2, num_ctas: gl.constexpr = 1):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) + num_warps * 10 + gl.num_warps() * 1000 + num_ctas)


def test_a_positional_argument_or_default_binds_only_the_parameter(rng):
    # As Triton's binder does: only a keyword argument also sets the launch option.
    x = rng.integers(-50, 50, 128).astype(np.int32)
    out = np.zeros_like(x)
    options_kernel[(1,)](x, out, 8)
    np.testing.assert_array_equal(out, x + 80 + 4000 + 1)
    options_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, x + 20 + 4000 + 1)
    options_kernel[(1,)](x, out, num_warps=4, num_ctas=1)
    np.testing.assert_array_equal(out, x + 40 + 4000 + 1)


def test_a_grid_callable_sees_the_launch_options(rng):
    seen = []
    x = rng.integers(-50, 50, 64).astype(np.int32)
    out = np.zeros_like(x)
    warps_kernel[lambda meta: seen.append(meta) or (1,)](x, out, num_warps=2)
    assert seen[0]["num_warps"] == 2 and seen[0]["num_ctas"] == 1
    np.testing.assert_array_equal(out, x * 2 + 200 + 10000)


def test_clusters_are_refused_at_launch_and_compile(rng):
    x = np.zeros(128, np.int32)
    with pytest.raises(ArgumentError, match="num_ctas=2: thread-block clusters are not supported yet") as info:
        options_kernel[(1,)](x, x, num_ctas=2)
    assert f":{_line(options_kernel.fn, 'def options_kernel')}:" in str(info.value)
    with pytest.raises(ArgumentError, match="clusters are not supported yet"):
        warps_kernel.compile("*i32", "*i32", num_warps=4, num_ctas=4)
    with pytest.raises(ArgumentError, match="num_ctas must be a positive power of two"):
        warps_kernel[(1,)](x, x, num_warps=4, num_ctas=3)
    with pytest.raises(ArgumentError, match="num_warps must be a positive power of two"):
        warps_kernel[(1,)](x, x, num_warps=3)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_launch_option_parameters_compile(target):
    compiled = warps_kernel.compile("*i32:16", "*i32:16", target=target, num_warps=8)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert ".reqntid 256" in compiled.asm["ptx"] or "maxntid 256" in compiled.asm["ptx"]
