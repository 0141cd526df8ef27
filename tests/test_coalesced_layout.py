"""``CoalescedLayout``: Gluon 3.9's "let the compiler pick a coalesced layout" placeholder.

It behaves like ``AutoLayout`` (no rank, no linear layout, resolved by inference) and a
kernel written with it computes the right values and lowers through ptxas.
"""

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.layouts import AutoLayout, BlockedLayout, CoalescedLayout, SliceLayout
from interpreting import interpreter_on
from kernel_checks import needs_ptxas


@gluonkit.jit
def plus_one_kernel(x_ptr, y_ptr, n, BLOCK: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=gl.CoalescedLayout())
    mask = offs < n
    x = gl.load(x_ptr + offs, mask=mask)
    gl.store(y_ptr + offs, x + 1.0, mask=mask)


def test_coalesced_layout_is_an_unresolved_layout():
    layout = CoalescedLayout()
    assert repr(layout) == "CoalescedLayout()" and layout == CoalescedLayout()
    assert hash(layout) == hash(CoalescedLayout()) and layout != AutoLayout()
    with pytest.raises(ValueError, match="CoalescedLayout has no rank"):
        layout.rank
    with pytest.raises(ValueError, match="CoalescedLayout has no linear layout"):
        layout.to_linear_layout([128])
    with pytest.raises(ValueError, match="parent must be a concrete distributed layout"):
        SliceLayout(0, layout)
    assert gl.CoalescedLayout is CoalescedLayout


def test_a_kernel_on_coalesced_layouts_matches_numpy():
    x = np.random.default_rng().standard_normal(1000).astype(np.float32)
    y = np.full_like(x, np.nan)
    with interpreter_on():
        plus_one_kernel[(4,)](x, y, x.size, BLOCK=256)
    np.testing.assert_array_equal(y, x + np.float32(1))


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_kernel_on_coalesced_layouts_lowers(target):
    compiled = plus_one_kernel.compile("*fp32:16", "*fp32:16", "i32", target=target, num_warps=4, BLOCK=256)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    # Inference resolved it to consecutive elements on consecutive lanes (coalesced).
    resolved = repr(BlockedLayout([1], [32], [4], [0]))
    assert resolved in compiled.asm["ir"] and "CoalescedLayout" not in compiled.asm["ir"]
