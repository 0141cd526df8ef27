"""Launching ``@gluonkit.jit`` kernels: ``kernel[grid](...)`` in the CPU interpreter.

End to end through the frontend, layout inference, the verifier and the interpreter, on
numpy arrays written in place and compared with numpy; plus the launch's own contract:
argument typing and binding errors at the ``def`` line, divisibility specialization,
callable grids, and the error without ``GLUONKIT_INTERPRET``.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.interpret import InterpreterError
from gluonkit.runtime.launch import NoBackendError


@pytest.fixture(autouse=True)
def interpret(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")


@gluonkit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([2], [32], [4], [0])
    pid = gl.program_id(0)
    offs = pid * BLOCK + gl.arange(0, BLOCK, layout)
    mask = offs < n
    x = gl.load(x_ptr + offs, mask=mask)
    y = gl.load(y_ptr + offs, mask=mask)
    gl.store(out_ptr + offs, x + y, mask=mask)


@gluonkit.jit
def add_unmasked_kernel(x_ptr, out_ptr, BLOCK: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) * 2.0)  # no mask: the tail overruns


@gluonkit.jit
def softmax_kernel(out_ptr, in_ptr, n_rows, n_cols, stride,
                   ROWS: gl.constexpr, BLOCK: gl.constexpr, layout: gl.constexpr):
    rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BLOCK, gl.SliceLayout(0, layout))
    offs = rows[:, None] * stride + cols[None, :]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = gl.load(in_ptr + offs, mask=mask, other=-float("inf"))
    shifted = x - gl.max(x, axis=1)[:, None]
    numerator = gl.exp(shifted)
    y = numerator / gl.sum(numerator, axis=1)[:, None]
    gl.store(out_ptr + offs, y, mask=mask)


def cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("n", [1, 255, 256, 1000])
def test_vector_add_with_a_callable_grid(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    add_kernel[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, y, out, n, BLOCK=256)
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("layout,num_warps", [
    (gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0]), 4),  # rows spread over warps
    (gl.BlockedLayout([1, 2], [1, 32], [1, 2], [1, 0]), 2),  # a row spans both warps
    (gl.BlockedLayout([2, 1], [8, 4], [1, 4], [0, 1]), 4),  # columns minor over lanes
])
def test_fused_softmax_matches_numpy(layout, num_warps):
    rows, cols = 37, 100
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32) * 5
    out = np.full_like(x, np.nan)
    ROWS, BLOCK = 8, 128
    softmax_kernel[(cdiv(rows, ROWS),)](out, x, rows, cols, cols, ROWS=ROWS, BLOCK=BLOCK, layout=layout,
                                        num_warps=num_warps)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_out_of_bounds_through_the_frontend_names_the_users_line():
    x = np.ones(100, np.float32)
    out = np.zeros(100, np.float32)
    with pytest.raises(InterpreterError) as err:
        add_unmasked_kernel[(1,)](x, out, BLOCK=128)
    text = str(err.value)
    assert "gl.store(out_ptr + offs, gl.load(x_ptr + offs) * 2.0)" in text
    assert "out-of-bounds load" in text and "argument 'x_ptr'" in text
    assert "pointer element (100)" in text and "element index 100 of an array of 100 elements" in text
    assert __file__.rstrip("c") in text


def test_arguments_are_typed_and_divisibility_is_specialized():
    @gluonkit.jit
    def k(p, n, f, b, BLOCK: gl.constexpr):
        offs = gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [1], [0]))
        gl.store(p + offs, gl.load(p + offs) * f + n, mask=(offs < n) & b)

    buf = np.zeros(40, np.float32)
    k[(1,)](buf, 32, 1.5, True, BLOCK=32, num_warps=1)
    np.testing.assert_array_equal(buf, np.r_[np.full(32, 32.0), np.zeros(8)])
    (func,) = k.cache.values()
    assert [str(a.type) for a in func.args] == ["ptr<float32>", "int32", "float32", "int1"]
    assert func.specialization == {"p": {"divisibility": 16}, "n": {"divisibility": 16}}
    k[(1,)](buf[1:], 2**40 + 1, 1.0, False, BLOCK=32, num_warps=1)  # 4 bytes off alignment; int64
    spec = [f.specialization for f in k.cache.values()][1]
    assert spec == {}
    assert [str(a.type) for a in list(k.cache.values())[1].args][1] == "int64"


def test_wrong_argument_count_or_type_names_the_def_line_and_parameter():
    x = np.zeros(8, np.float32)
    with pytest.raises(CompilationError) as err:
        add_kernel[(1,)](x, x, x, BLOCK=256)
    assert "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr):" in str(err.value)
    assert "'n'" in str(err.value)
    with pytest.raises(CompilationError, match="parameter 'y_ptr'") as err:
        add_kernel[(1,)](x, "not an array", x, 8, BLOCK=256)
    assert "def add_kernel" in str(err.value)
    with pytest.raises(CompilationError, match="unexpected keyword argument 'num_stage'"):
        add_kernel[(1,)](x, x, x, 8, BLOCK=256, num_stage=2)
    with pytest.raises(CompilationError, match="grid must be 1 to 3 non-negative ints"):
        add_kernel[(1, 1, 1, 1)](x, x, x, 8, BLOCK=256)


def test_results_are_written_in_place_into_strided_views():
    base = np.zeros((4, 256), np.float32)
    view = base[1]  # a view into a larger buffer
    add_kernel[(1,)](np.ones(256, np.float32), np.ones(256, np.float32), view, 256, BLOCK=256)
    np.testing.assert_array_equal(base[1], 2.0)
    assert not base[[0, 2, 3]].any()


def test_torch_cpu_tensors_are_device_memory():
    torch = pytest.importorskip("torch")
    x = torch.arange(300, dtype=torch.float32)
    out = torch.zeros(300, dtype=torch.float32)
    add_kernel[(2,)](x, x, out, 300, BLOCK=256)
    assert torch.equal(out, 2 * x)

    @gluonkit.jit
    def scale(p, BLOCK: gl.constexpr):
        offs = gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [1], [0]))
        gl.store(p + offs, gl.load(p + offs) * 3.0)

    h = torch.arange(64, dtype=torch.bfloat16)  # bf16 goes through an int16 numpy view
    scale[(1,)](h, BLOCK=64, num_warps=1)
    assert torch.equal(h, torch.arange(64, dtype=torch.bfloat16) * 3)


def test_without_the_interpreter_the_launch_says_how_to_run(monkeypatch):
    monkeypatch.delenv("GLUONKIT_INTERPRET")
    monkeypatch.setattr(gluonkit.runtime.launch, "_gpu_present", lambda: False)  # as on a machine without a GPU
    x = np.zeros(8, np.float32)
    with pytest.raises(NoBackendError, match="GLUONKIT_INTERPRET=1"):
        add_kernel[(1,)](x, x, x, 8, BLOCK=256)


@gluonkit.jit
def row_sum_loop_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [2], [0])
    row = gl.program_id(0)
    cols = gl.arange(0, BLOCK, layout)
    acc = gl.zeros([BLOCK], gl.float32, layout)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        acc += gl.load(x_ptr + row * stride + start + cols, mask=mask, other=0.0)
    total = gl.sum(acc, axis=0)
    if total > 0:
        total = total * 2.0
    gl.store(out_ptr + row, total)


def test_row_loop_with_runtime_bounds_and_a_runtime_branch():
    x = np.random.default_rng(7).integers(-8, 9, (5, 1000)).astype(np.float32)
    out = np.zeros(5, np.float32)
    row_sum_loop_kernel[(5,)](x, out, 1000, 1000, BLOCK=256, num_warps=2)
    s = x.sum(axis=1)
    np.testing.assert_array_equal(out, np.where(s > 0, 2 * s, s))


def test_device_print_through_the_frontend(capsys):
    @gluonkit.jit
    def k():
        gl.device_print("v:", gl.arange(0, 2, gl.BlockedLayout([1], [32], [1], [0])) * 10)

    k[(1, 2)](num_warps=1)
    assert capsys.readouterr().out.splitlines() == [
        "pid (0, 0, 0) idx (0) v: 0", "pid (0, 0, 0) idx (1) v: 10",
        "pid (0, 1, 0) idx (0) v: 0", "pid (0, 1, 0) idx (1) v: 10"]
