"""Cluster launch control (``blackwell.clc``) on the CPU: the interpreter's deterministic
stealing (every tile exactly once), misuse reports, the sm_90a compile error, and the
sm_100a PTX (ptxas assembles it)."""

import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit.interpret.errors import InterpreterError
from gluonkit.ir.diagnostics import CompilationError

from clc_kernels import clc_load_too_early, clc_tiles
from cluster_kernels import replicated
from interpreting import interpreter_on
from kernel_checks import marked_line, needs_ptxas

BLOCK = 64
LAYOUT = gl.BlockedLayout([1], [32], [2], [0])


def _run_tiles(tiles):
    rng = np.random.default_rng(5)
    x = rng.integers(-1000, 1000, tiles * BLOCK).astype(np.int32)
    out = np.full_like(x, -7)
    owner = np.zeros(tiles, np.int32)
    with interpreter_on():
        clc_tiles[(tiles,)](x, out, owner, BLOCK=BLOCK, layout=LAYOUT, num_warps=2)
    return x, out, owner


@pytest.mark.parametrize("tiles", [1, 2, 7])
def test_stealing_computes_every_tile_exactly_once(tiles):
    x, out, owner = _run_tiles(tiles)
    expected = x.astype(np.int64) * 3 + np.repeat(np.arange(tiles), BLOCK)
    np.testing.assert_array_equal(out, expected)
    # The interpreter starts program 0, which steals every later program: all tiles are its own.
    np.testing.assert_array_equal(owner, np.ones(tiles, np.int32))


def test_loading_the_response_before_the_wait_is_reported():
    out = np.zeros(32, np.int32)
    with interpreter_on(), pytest.raises(InterpreterError) as info:
        clc_load_too_early[(2,)](out, layout=gl.BlockedLayout([1], [32], [1], [0]), num_warps=1)
    text = str(info.value)
    assert f":{marked_line(clc_load_too_early, 'EARLY')}:" in text
    assert "try_cancel issued at line" in text


def _compile(target):
    return clc_tiles.compile("*i32", "*i32", "*i32", target=target, BLOCK=BLOCK, layout=LAYOUT, num_warps=2)


def test_sm90a_is_a_compile_error_at_the_users_line():
    with pytest.raises(CompilationError) as info:
        _compile("sm_90a")
    text = str(info.value)
    assert "Blackwell (sm_100a)" in text and "target='sm_100a'" in text


@needs_ptxas
def test_sm100a_ptx_assembles():
    ptx = _compile("sm_100a").asm["ptx"]
    assert "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128" in ptx
    assert "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128" in ptx
    assert "clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128" in ptx


def test_a_cluster_is_cancelled_once_and_every_cta_gets_the_answer():
    tiles = 5
    rng = np.random.default_rng(9)
    x = rng.integers(-1000, 1000, tiles * BLOCK).astype(np.int32)
    out = np.full_like(x, -7)
    owner = np.zeros(tiles, np.int32)
    with interpreter_on():
        clc_tiles[(tiles,)](x, out, owner, BLOCK=BLOCK, layout=replicated(2), num_ctas=2)
    np.testing.assert_array_equal(out, x.astype(np.int64) * 3 + np.repeat(np.arange(tiles), BLOCK))
    np.testing.assert_array_equal(owner, np.ones(tiles, np.int32))  # one atomic per cluster, all by program 0


@needs_ptxas
def test_sm100a_cluster_ptx_multicasts_the_response():
    c = clc_tiles.compile("*i32", "*i32", "*i32", target="sm_100a", BLOCK=BLOCK, layout=replicated(2), num_ctas=2)
    assert ("try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128"
            in c.asm["ptx"])
