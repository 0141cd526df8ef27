"""``DotOperandLayout`` over a ``BlockedLayout`` (the operands of Gluon's ``dot_fma``) in kernels.

Converting a tile into the operand layout copies each row of A (column of B) to every
thread that needs it; converting back must give the tile unchanged.  Checked in the
interpreter against numpy on random inputs, and through ptxas.
"""

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

ACC = gl.BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0])


@gluonkit.jit
def operand_round_trip(in_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, OPERAND: gl.constexpr,
                       acc: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, acc))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, acc))
    tile = gl.load(in_ptr + rows[:, None] * N + cols[None, :])
    operand = gl.convert_layout(tile, gl.DotOperandLayout(OPERAND, acc, 0))
    back = gl.convert_layout(operand * 3.0, acc)
    gl.store(out_ptr + rows[:, None] * N + cols[None, :], back)


@pytest.mark.parametrize("operand", [0, 1])
@pytest.mark.parametrize("shape", [(32, 32), (16, 64), (4, 8)], ids=["32x32", "16x64", "4x8"])
def test_values_survive_a_round_trip_through_the_operand_layout(shape, operand):
    m, n = shape
    x = np.random.default_rng().standard_normal((m, n)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with interpreter_on():
        operand_round_trip[(1,)](x, out, M=m, N=n, OPERAND=operand, acc=ACC, num_warps=4)
    np.testing.assert_array_equal(out, x * np.float32(3))


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_operand_conversions_lower(target):
    for operand in (0, 1):
        compiled = operand_round_trip.compile("*fp32:16", "*fp32:16", target=target, num_warps=4, M=32, N=32,
                                              OPERAND=operand, acc=ACC)
        assert compiled.asm["cubin"][:4] == b"\x7fELF"
