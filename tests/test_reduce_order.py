"""Within a thread, ``reduce`` combines registers as a balanced pairwise tree
(:mod:`gluonkit.ir.reduce_order`): the interpreter's float32 sums are the tree's bits, not a
chain's, and the PTX's adds are ``log2 n`` deep."""

import re

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.ir.reduce_order import combine_pairwise
from interpreting import launch_interpreted
from kernel_checks import needs_ptxas

_ROWS = gl.BlockedLayout([1, 8], [32, 1], [4, 1], [1, 0])  # a row's 8 elements in one thread's registers


@gluonkit.jit
def _row_sums(x_ptr, out_ptr, layout: gl.constexpr):
    rows = gl.arange(0, 128, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, 8, layout=gl.SliceLayout(0, layout))
    gl.store(out_ptr + rows, gl.sum(gl.load(x_ptr + rows[:, None] * 8 + cols[None, :]), 1))


def test_combine_pairwise_pairs_neighbours_first():
    assert combine_pairwise("abcdefgh", lambda a, b: f"({a}{b})") == "(((ab)(cd))((ef)(gh)))"
    assert combine_pairwise("abcde", lambda a, b: f"({a}{b})") == "(((ab)(cd))e)"
    assert combine_pairwise("a", lambda a, b: a + b) == "a"


def test_interpreter_sums_a_threads_registers_as_a_tree():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((128, 8)) * 10.0 ** rng.integers(-4, 5, (128, 8))).astype(np.float32)
    out = np.full(128, np.nan, np.float32)
    launch_interpreted(_row_sums, (1,), x, out, layout=_ROWS, num_warps=4)
    tree = np.array([combine_pairwise(list(row), np.add) for row in x], np.float32)
    chain = np.array([_chain(row) for row in x], np.float32)
    assert (tree != chain).sum() > 10  # the inputs tell the orders apart
    np.testing.assert_array_equal(out, tree)


def _chain(row):
    acc = row[0]
    for v in row[1:]:
        acc = np.float32(acc + v)
    return acc


@needs_ptxas
def test_ptx_adds_form_a_tree():
    ptx = _row_sums.compile("*fp32:16", "*fp32:16", layout=_ROWS, num_warps=4, target="sm_90a").asm["ptx"]
    adds = re.findall(r"add\.(?:rn\.)?f32\s+(%r\d+), (%r\d+), (%r\d+);", ptx)
    depth = {}
    for out, a, b in adds:
        depth[out] = 1 + max(depth.get(a, 0), depth.get(b, 0))
    assert len(adds) == 7 and max(depth.values()) == 3
