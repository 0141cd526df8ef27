"""Kernels on the GPU, compared with torch and with the CPU interpreter on random inputs.

Marked ``gpu``: skipped without a CUDA GPU and torch.  Outputs are poisoned (NaN) before
each launch so an element the kernel fails to write cannot pass.
"""

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gluonkit
import gluonkit.language as gl
from gluonkit.runtime.driver import has_gpu
from interpreting import interpreter_on  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))


def _poisoned(shape, dtype):
    return torch.full(shape if isinstance(shape, tuple) else (shape,), float("nan"), device="cuda", dtype=dtype)


def _interpret(fn, *numpy_args, **kwargs):
    """Run a launch in the interpreter with numpy arrays (in place)."""
    with interpreter_on():
        fn(*numpy_args, **kwargs)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 4096, 100_003])
def test_vector_add_matches_torch(dtype, n):
    from vector_add import add

    tdtype = getattr(torch, dtype)
    x = torch.randn(n, device="cuda").to(tdtype)
    y = torch.randn(n, device="cuda").to(tdtype)
    out = _poisoned(n, tdtype)
    add(x, y, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


@pytest.mark.parametrize("cols", [1, 200, 1024, 3000])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_softmax_matches_torch_and_interpreter(cols, dtype):
    from fused_softmax import softmax

    tdtype = getattr(torch, dtype)
    rows = 37
    x = torch.randn(rows, cols, device="cuda").to(tdtype)
    out = _poisoned((rows, cols), tdtype)
    softmax(x, out)
    torch.cuda.synchronize()
    ref = torch.softmax(x.double(), dim=1)
    tol = 1e-6 if dtype == "float32" else 1e-2
    assert (out.double() - ref).abs().max().item() < tol
    if dtype == "float32":
        x_np = x.cpu().numpy()
        out_np = np.full((rows, cols), np.nan, np.float32)
        _interpret(softmax, x_np, out_np)
        assert np.abs(out_np - out.cpu().numpy()).max() < 1e-6


def test_transpose_matches_torch():
    from transpose import transpose

    x = torch.randn(256, 192, device="cuda")
    out = _poisoned((192, 256), torch.float32)
    transpose(x, out)
    torch.cuda.synchronize()
    assert torch.equal(out, x.t())


@gluonkit.jit
def convert_kernel(in_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, src: gl.constexpr, dst: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, src))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, src))
    tile = gl.load(in_ptr + rows[:, None] * N + cols[None, :])
    moved = gl.convert_layout(tile, dst)
    rows2 = gl.arange(0, M, layout=gl.SliceLayout(1, dst))
    cols2 = gl.arange(0, N, layout=gl.SliceLayout(0, dst))
    gl.store(out_ptr + rows2[:, None] * N + cols2[None, :], moved)


def _blocked(draw, num_warps):
    spt = [draw(st.sampled_from([1, 2, 4])) for _ in range(2)]
    lanes0 = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    warps0 = draw(st.sampled_from([w for w in (1, 2, 4) if w <= num_warps]))
    order = draw(st.sampled_from([[0, 1], [1, 0]]))
    return gl.BlockedLayout(spt, [lanes0, 32 // lanes0], [warps0, num_warps // warps0], order)


@st.composite
def layout_pairs(draw):
    return _blocked(draw, 4), _blocked(draw, 4)


@settings(max_examples=25, deadline=None)
@given(layout_pairs())
def test_random_layout_conversions_round_trip_exactly(pair):
    src, dst = pair
    x = torch.randn(32, 64, device="cuda")
    out = _poisoned((32, 64), torch.float32)
    convert_kernel[(1,)](x, out, M=32, N=64, src=src, dst=dst, num_warps=4)
    torch.cuda.synchronize()
    assert torch.equal(out, x)


@gluonkit.jit
def reduce_kernel(in_ptr, sum_ptr, max_ptr, M: gl.constexpr, N: gl.constexpr, AXIS: gl.constexpr,
                  layout: gl.constexpr):
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, layout))
    tile = gl.load(in_ptr + rows[:, None] * N + cols[None, :])
    total = gl.sum(tile, axis=AXIS)
    biggest = gl.max(tile, axis=AXIS)
    if AXIS == 0:
        gl.store(sum_ptr + cols, total)
        gl.store(max_ptr + cols, biggest)
    else:
        gl.store(sum_ptr + rows, total)
        gl.store(max_ptr + rows, biggest)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("layout", [
    gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]),
    gl.BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1]),
    gl.BlockedLayout([2, 2], [2, 16], [2, 2], [1, 0]),
    gl.BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1]),
])
def test_reductions_over_every_axis_and_layout(axis, layout):
    M, N = 64, 32
    x = torch.randn(M, N, device="cuda")
    size = N if axis == 0 else M
    sums, maxes = _poisoned(size, torch.float32), _poisoned(size, torch.float32)
    reduce_kernel[(1,)](x, sums, maxes, M=M, N=N, AXIS=axis, layout=layout, num_warps=4)
    torch.cuda.synchronize()
    assert torch.allclose(sums, x.sum(dim=axis), atol=1e-5, rtol=1e-5)
    assert torch.equal(maxes, x.max(dim=axis).values)
    # The GPU combines in the interpreter's order: the float sums agree bit for bit.
    cpu_sums, cpu_maxes = np.full(size, np.nan, np.float32), np.full(size, np.nan, np.float32)
    _interpret(reduce_kernel[(1,)], x.cpu().numpy(), cpu_sums, cpu_maxes, M=M, N=N, AXIS=axis, layout=layout,
               num_warps=4)
    np.testing.assert_array_equal(sums.cpu().numpy(), cpu_sums)
    np.testing.assert_array_equal(maxes.cpu().numpy(), cpu_maxes)


def test_language_test_kernels_match_the_interpreter_on_the_gpu():
    """The end-to-end kernels of tests/test_launch.py: a 2-D softmax with ragged masks and a
    row loop with runtime bounds and a runtime branch."""
    sys.path.insert(0, os.path.dirname(__file__))
    import test_launch as kernels

    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((37, 200), dtype=np.float32)
    layout = gl.BlockedLayout([1, 4], [2, 16], [2, 2], [1, 0])
    gpu_out = _poisoned((37, 200), torch.float32)
    kernels.softmax_kernel[(10,)](gpu_out, torch.from_numpy(x_np).cuda(), 37, 200, 200, ROWS=4, BLOCK=256,
                                  layout=layout, num_warps=4)
    cpu_out = np.full((37, 200), np.nan, np.float32)
    _interpret(kernels.softmax_kernel[(10,)], cpu_out, x_np, 37, 200, 200, ROWS=4, BLOCK=256, layout=layout,
               num_warps=4)
    torch.cuda.synchronize()
    assert np.abs(gpu_out.cpu().numpy() - cpu_out).max() < 1e-6
    assert torch.allclose(gpu_out, torch.softmax(torch.from_numpy(x_np).cuda(), dim=1), atol=1e-6)

    rows = rng.integers(-8, 9, (5, 1000)).astype(np.float32)
    sums = _poisoned(5, torch.float32)
    kernels.row_sum_loop_kernel[(5,)](torch.from_numpy(rows).cuda(), sums, 1000, 1000, BLOCK=256, num_warps=2)
    torch.cuda.synchronize()
    s = rows.sum(axis=1)
    np.testing.assert_array_equal(sums.cpu().numpy(), np.where(s > 0, 2 * s, s))


def test_device_print_on_the_gpu_prints_what_the_interpreter_prints(capfd):
    @gluonkit.jit
    def k():
        gl.device_print("v:", gl.arange(0, 2, gl.BlockedLayout([1], [32], [1], [0])) * 10)

    k[(1, 2)](num_warps=1)
    torch.cuda.synchronize()
    gpu_lines = capfd.readouterr().out.splitlines()
    _interpret(k[(1, 2)], num_warps=1)
    cpu_lines = capfd.readouterr().out.splitlines()
    # Every thread prints the elements it holds: 32 lanes, each element held by 16 of them.
    assert sorted(set(gpu_lines)) == sorted(cpu_lines)
    assert len(gpu_lines) == 2 * 32


@pytest.mark.parametrize("cols", [1000, 50_000])
def test_cross_entropy_matches_torch_autograd(cols):
    from cross_entropy import cross_entropy

    rows = 64
    logits = (3 * torch.randn(rows, cols, device="cuda")).requires_grad_()
    targets = torch.randint(0, cols, (rows,), device="cuda", dtype=torch.int32)
    loss, grad = _poisoned(rows, torch.float32), _poisoned((rows, cols), torch.float32)
    cross_entropy(logits.detach(), targets, loss, grad)
    torch.cuda.synchronize()
    ref = torch.nn.functional.cross_entropy(logits.double(), targets.long(), reduction="none")
    ref.mean().backward()
    assert (loss.double() - ref.detach()).abs().max().item() < 1e-4
    assert (grad.double() - logits.grad.double()).abs().max().item() < 1e-6


@gluonkit.jit
def carried_halves_kernel(x_ptr, out_ptr, steps, BLOCK: gl.constexpr):
    """bf16 tensors carried by a ``for`` loop and merged by ``if`` s (their phis hold two registers each)."""
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    offsets = gl.arange(0, BLOCK, layout=layout)
    x = gl.load(x_ptr + offsets)
    for i in range(steps):
        x = (x.to(gl.float32) * 0.75 + 1.0).to(gl.bfloat16)
        if i % 3 == 0:
            x = (x.to(gl.float32) - 0.5).to(gl.bfloat16)
    if steps > 2:
        x = (x.to(gl.float32) * 2.0).to(gl.bfloat16)
    gl.store(out_ptr + offsets, x)


@pytest.mark.parametrize("steps", [0, 1, 7])
def test_carried_16_bit_tensors_match_the_interpreter(steps):
    """Loop-carried and if-merged bf16 tensors (two registers a phi in the lowering), bit for bit."""
    import ml_dtypes

    x_np = np.random.default_rng(steps).standard_normal(512).astype(ml_dtypes.bfloat16)
    out = _poisoned(512, torch.bfloat16)
    carried_halves_kernel[(1,)](torch.from_numpy(x_np.view(np.int16)).cuda().view(torch.bfloat16), out, steps,
                                BLOCK=512, num_warps=4)
    cpu_out = np.full(512, np.nan, ml_dtypes.bfloat16)
    _interpret(carried_halves_kernel[(1,)], x_np, cpu_out, steps, BLOCK=512, num_warps=4)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.view(torch.int16).cpu().numpy(), cpu_out.view(np.int16))
