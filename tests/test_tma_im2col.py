"""TMA im2col mode: ``TensorDescriptorIm2Col`` and ``tma.async_load_im2col``.

The interpreter's gather is checked against a numpy im2col written from the convolution's
definition (a zero-padded input, strides, dilations, filter taps), on random data, for
NWC, NHWC and NDHWC tensors; against the four loads of Gluon 3.9's im2col tutorial, whose
expected values the tutorial checks on the hardware; the lowering against ptxas for
sm_90a and sm_100a; the host checks and the frontend errors by message and line.  The
``gpu`` tests run the same kernels on the GPU and compare with numpy and the interpreter.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import math
import re
import struct

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError, ir
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from gluonkit.runtime.args import ArgPacker, ir_type_of
from gluonkit.runtime.driver import has_gpu
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

needs_gpu = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]
REG = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])


# --------------------------------------------------------------------------- kernels
@gluonkit.jit
def gather_kernel(desc, out_ptr, n, h, w, c, tap_h, tap_w, layout: gl.constexpr):
    """One im2col load of an NHWC tensor at runtime coordinates and offsets, stored row-major."""
    P: gl.constexpr = desc.block_shape[0]
    C: gl.constexpr = desc.block_shape[1]
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load_im2col(desc, [n, h, w, c], [tap_h, tap_w], bar, smem)  # LOAD
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)
    x = smem.load(layout)
    rows = gl.arange(0, P, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    gl.store(out_ptr + rows[:, None] * C + cols[None, :], x)


@gluonkit.jit
def conv_gather_kernel(desc, out_ptr, c0, OUT: gl.constexpr, STRIDE: gl.constexpr, PAD: gl.constexpr,
                       OFFSETS: gl.constexpr, layout: gl.constexpr):
    """Program i gathers output pixels [i * P, (i + 1) * P) of a convolution for every filter tap
    (one im2col load each, one barrier, alternating phases) into the im2col matrix
    ``out[pixel, tap * C + channel]``.  ``OUT`` are the output's spatial extents and ``OFFSETS``
    the taps' im2col offsets (dilation times tap index); the tile's first filter position comes
    from its first output pixel."""
    P: gl.constexpr = desc.block_shape[0]
    C: gl.constexpr = desc.block_shape[1]
    NT: gl.constexpr = len(OFFSETS)
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    m0 = gl.program_id(0) * P
    if len(OUT) == 1:  # NWC
        coord = [m0 // OUT[0], (m0 % OUT[0]) * STRIDE[0] - PAD[0], c0]
    elif len(OUT) == 2:  # NHWC
        coord = [m0 // (OUT[0] * OUT[1]), (m0 // OUT[1] % OUT[0]) * STRIDE[0] - PAD[0],
                 (m0 % OUT[1]) * STRIDE[1] - PAD[1], c0]
    else:  # NDHWC
        coord = [m0 // (OUT[0] * OUT[1] * OUT[2]), (m0 // (OUT[1] * OUT[2]) % OUT[0]) * STRIDE[0] - PAD[0],
                 (m0 // OUT[2] % OUT[1]) * STRIDE[1] - PAD[1], (m0 % OUT[2]) * STRIDE[2] - PAD[2], c0]
    rows = gl.arange(0, P, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    phase = 0
    for t in gl.static_range(NT):
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load_im2col(desc, coord, OFFSETS[t], bar, smem)
        mbarrier.wait(bar, phase)
        phase ^= 1
        x = smem.load(layout)
        gl.store(out_ptr + (m0 + rows)[:, None] * (NT * C) + (t * C + cols)[None, :], x)
    mbarrier.invalidate(bar)


@gluonkit.jit
def _tap_loader(desc, bufs, ready, empty, n, h, w, TAP_W: gl.constexpr, NT: gl.constexpr, STAGES: gl.constexpr):
    """Worker: one im2col load per filter tap (taps along W at runtime) through a ring of buffers."""
    for t in range(NT):
        stage = t % STAGES
        mbarrier.wait(empty.index(stage), ((t // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(stage), desc.block_type.nbytes)
        tma.async_load_im2col(desc, [n, h, w, 0], [0, t * TAP_W], ready.index(stage), bufs.index(stage))


@gluonkit.jit
def _tap_consumer(bufs, out_ptr, ready, empty, NT: gl.constexpr, STAGES: gl.constexpr):
    P: gl.constexpr = bufs.shape[1]
    C: gl.constexpr = bufs.shape[2]
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, P, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, C, layout=gl.SliceLayout(0, layout))
    for t in range(NT):
        stage = t % STAGES
        mbarrier.wait(ready.index(stage), (t // STAGES) & 1)
        x = bufs.index(stage).load(layout)
        gl.thread_barrier()
        mbarrier.arrive(empty.index(stage))
        gl.store(out_ptr + rows[:, None] * (NT * C) + (t * C + cols)[None, :], x)


@gluonkit.jit
def warp_specialized_taps_kernel(desc, out_ptr, n, h, w, TAP_W: gl.constexpr, NT: gl.constexpr,
                                 STAGES: gl.constexpr):
    """A loader partition feeds one consumer the taps of a 1 x NT filter (a convolution's producer)."""
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES, desc.block_shape[0], desc.block_shape[1]], desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    gl.warp_specialize([
        (_tap_consumer, (bufs, out_ptr, ready, empty, NT, STAGES)),
        (_tap_loader, (desc, bufs, ready, empty, n, h, w, TAP_W, NT, STAGES)),
    ], [1], [24])


# --------------------------------------------------------------------------- helpers
def _line(kernel, marker: str) -> int:
    lines, first = inspect.getsourcelines(kernel.fn)
    return first + next(i for i, text in enumerate(lines) if f"# {marker}" in text)


def _layout(block, dtype=gl.float16):
    return gl.NVMMASharedLayout.get_default_for(block, dtype)


def _im2col_desc(x, block, pad, stride, dil, taps, dtype=gl.float16, padding="zero"):
    """The descriptor a convolution with these parameters reads its input through."""
    lower = [-p for p in pad]
    upper = [p - (k - 1) * d for p, k, d in zip(pad, taps, dil)]
    return TensorDescriptorIm2Col.from_tensor(x, block, _layout(block, dtype), padding=padding,
                                              element_strides=[1, *stride, 1], pixel_box_lower_corner=lower,
                                              pixel_box_upper_corner=upper)


def _out_extents(spatial, pad, stride, dil, taps):
    return tuple((s + 2 * p - d * (k - 1) - 1) // st + 1 for s, p, st, d, k in zip(spatial, pad, stride, dil, taps))


def _reference(x, pad, stride, dil, taps, c0, channels, rows, fill=0.0):
    """The im2col matrix of a convolution, from its definition: row m is output pixel m (images,
    then output positions in raster order), columns tap-major then channel; rows past the last
    output pixel and channels past the tensor are ``fill``."""
    n_img, *spatial, n_chan = x.shape
    out = _out_extents(spatial, pad, stride, dil, taps)
    padded = np.full([n_img, *(s + 2 * p for s, p in zip(spatial, pad)), n_chan], fill, np.float64)
    padded[(slice(None), *(slice(p, p + s) for p, s in zip(pad, spatial)))] = x
    n_taps = math.prod(taps)
    ref = np.full((rows, n_taps * channels), fill, np.float64)
    total = n_img * math.prod(out)
    for m in range(rows):
        if m >= total:
            continue
        n, *pos = np.unravel_index(m, (n_img, *out))
        for t, tap in enumerate(itertools.product(*(range(k) for k in taps))):
            at = tuple(p * st + k * d for p, st, k, d in zip(pos, stride, tap, dil))
            chan = np.arange(c0, c0 + channels)
            ok = chan < n_chan
            ref[m, t * channels:(t + 1) * channels][ok] = padded[(n, *at)][chan[ok]]
    return ref


def _random_conv(rng, spatial_rank):
    """Random convolution parameters whose bounding box is non-empty and fits the corner range."""
    while True:
        spatial = tuple(int(s) for s in rng.integers(3, 10 if spatial_rank < 3 else 6, spatial_rank))
        taps = tuple(int(k) for k in rng.integers(1, 4, spatial_rank))
        pad = tuple(int(p) for p in rng.integers(0, 3, spatial_rank))
        stride = tuple(int(s) for s in rng.integers(1, 4, spatial_rank))
        dil = tuple(int(d) for d in rng.integers(1, 3, spatial_rank))
        out = _out_extents(spatial, pad, stride, dil, taps)
        upper = [p - (k - 1) * d for p, k, d in zip(pad, taps, dil)]
        if min(out) >= 1 and min(upper) >= -16:
            return spatial, taps, pad, stride, dil, out


def _interpret(kernel, grid, *args, seed=None, **kw):
    with interpreter_on(seed):
        kernel[grid](*args, **kw)


def _run_conv(x, block, c0, conv, padding="zero", seed=None, launch=None):
    spatial, taps, pad, stride, dil, out = conv
    desc = _im2col_desc(x, block, pad, stride, dil, taps, padding=padding)
    total = x.shape[0] * math.prod(out)
    programs = -(-total // block[0])
    result = np.full((programs * block[0], math.prod(taps) * block[1]), 7.0, np.float16)
    args = (desc, result, c0)
    offsets = tuple(tuple(k * d for k, d in zip(tap, dil)) for tap in itertools.product(*(range(k) for k in taps)))
    kw = dict(OUT=out, STRIDE=stride, PAD=pad, OFFSETS=offsets, layout=REG)
    if launch is None:
        _interpret(conv_gather_kernel, (programs,), *args, seed=seed, **kw)
        return result
    return launch(conv_gather_kernel, (programs,), args, kw, result)


# ----------------------------------------------------------------- the interpreter's gather
@pytest.mark.parametrize("seed", range(6))
def test_nhwc_convolution_gather_matches_numpy_im2col(seed):
    rng = np.random.default_rng(seed)
    conv = _random_conv(rng, 2)
    x = rng.standard_normal((2, *conv[0], 48)).astype(np.float16)
    c0 = int(rng.choice([0, 16, 32]))  # c0 = 32: the last 16 channels of the block are past the tensor
    result = _run_conv(x, [32, 32], c0, conv, seed=seed)
    expected = _reference(x.astype(np.float64), conv[2], conv[3], conv[4], conv[1], c0, 32, result.shape[0])
    np.testing.assert_array_equal(result.astype(np.float64), expected)


@pytest.mark.parametrize("spatial_rank", [1, 3])
@pytest.mark.parametrize("seed", range(2))
def test_nwc_and_ndhwc_gathers_match_numpy_im2col(spatial_rank, seed):
    rng = np.random.default_rng(100 + seed)
    conv = _random_conv(rng, spatial_rank)
    x = rng.standard_normal((2, *conv[0], 32)).astype(np.float16)
    result = _run_conv(x, [64, 32], 0, conv, seed=seed)
    expected = _reference(x.astype(np.float64), conv[2], conv[3], conv[4], conv[1], 0, 32, result.shape[0])
    np.testing.assert_array_equal(result.astype(np.float64), expected)


def test_nan_padding_fills_pixels_outside_the_image_with_nan():
    rng = np.random.default_rng(7)
    conv = ((5, 6), (3, 3), (1, 1), (1, 1), (1, 1), (5, 6))
    x = rng.standard_normal((1, 5, 6, 32)).astype(np.float16)
    result = _run_conv(x, [32, 32], 0, conv, padding="nan")
    expected = _reference(x.astype(np.float64), (1, 1), (1, 1), (1, 1), (3, 3), 0, 32, result.shape[0],
                          fill=np.nan)
    np.testing.assert_array_equal(result.astype(np.float64), expected)  # NaNs compare equal here
    assert np.isnan(result[0, :32]).all()  # tap (0, 0) of output (0, 0) reads pixel (-1, -1)


# Gluon 3.9's im2col tutorial: a [1 or 2, 4, 4, 32] float32 tensor whose pixels hold 1, 2, …,
# one load of 16 pixels; (corners, coordinates, offsets) -> the first channel of each pixel.
_TUTORIAL = [
    ("basic", 1, [0, 0], [0, 0], [0, 0, 0, 0], [0, 0], list(range(1, 17))),
    ("padded", 1, [-1, -1], [-1, -1], [0, -1, -1, 0], [0, 0], [0, 0, 0, 0, 0, 1, 2, 3, 0, 5, 6, 7, 0, 9, 10, 11]),
    ("shifted", 1, [-1, -1], [-1, -1], [0, -1, -1, 0], [1, 1], list(range(1, 17))),
    ("multi_batch", 2, [0, 0], [0, 0], [0, 1, 3, 0], [0, 0], list(range(8, 24))),
]


def _tutorial_input(images):
    return np.repeat(np.arange(1, 16 * images + 1, dtype=np.float32)[:, None], 32, 1).reshape(images, 4, 4, 32)


def _tutorial_desc(x, lower, upper):
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    return TensorDescriptorIm2Col(x, list(x.shape), [s // 4 for s in x.strides] if isinstance(x, np.ndarray)
                                  else list(x.stride()), [16, 32], layout, padding="zero",
                                  element_strides=[1, 1, 1, 1], pixel_box_lower_corner=lower,
                                  pixel_box_upper_corner=upper)


@pytest.mark.parametrize("name, images, lower, upper, coord, taps, expected", _TUTORIAL, ids=[c[0] for c in _TUTORIAL])
def test_the_gluon_tutorial_loads(name, images, lower, upper, coord, taps, expected):
    x = _tutorial_input(images)
    out = np.full((16, 32), np.nan, np.float32)
    _interpret(gather_kernel, (1,), _tutorial_desc(x, lower, upper), out, *coord, *taps, REG)
    np.testing.assert_array_equal(out, np.repeat(np.array(expected, np.float32)[:, None], 32, 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_warp_specialized_loader_feeds_the_taps(seed):
    rng = np.random.default_rng(50 + seed)
    conv = ((6, 9), (1, 3), (0, 1), (1, 1), (1, 2), _out_extents((6, 9), (0, 1), (1, 1), (1, 2), (1, 3)))
    x = rng.standard_normal((2, 6, 9, 32)).astype(np.float16)
    desc = _im2col_desc(x, [32, 32], conv[2], conv[3], conv[4], conv[1])
    out = np.full((32, 3 * 32), 7.0, np.float16)
    _interpret(warp_specialized_taps_kernel, (1,), desc, out, 0, 0, -1, TAP_W=2, NT=3, STAGES=2, seed=seed)
    expected = _reference(x.astype(np.float64), conv[2], conv[3], conv[4], conv[1], 0, 32, 32)
    np.testing.assert_array_equal(out.astype(np.float64), expected)


@needs_ptxas
def test_a_warp_specialized_loader_assembles():
    ty = ir.TensorDescIm2ColType((32, 32), ir.float16, _layout([32, 32]), 4)
    c = warp_specialized_taps_kernel.compile(ty, "*fp16", "i32", "i32", "i32", TAP_W=2, NT=3, STAGES=2)
    assert ".global.im2col.mbarrier::complete_tx::bytes" in c.asm["ptx"] and "cubin" in c.asm


# Walks measured on an H100 (the interpreter agreed on every element): pixel (n, h, w) channel c of a
# [N, H, W, 32] float32 tensor holds 1 + 100 n + 10 h + w + 1000 c; one load of 16 pixels.
# (name, (N, H, W), lower, upper, element_strides, coordinates, offsets) -> the pixels' values (0: outside).
_FULL = [1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24, 31, 32, 33, 34]
_MEASURED = [
    ("batch_stride_2", (3, 2, 3), [0, 0], [0, 0], [2, 1, 1, 1], [0, 0, 0, 0], [0, 0],
     [1, 2, 3, 11, 12, 13, 201, 202, 203, 211, 212, 213, 0, 0, 0, 0]),
    ("batch_stride_3", (7, 2, 2), [0, 0], [0, 0], [3, 1, 1, 1], [1, 0, 1, 0], [0, 0],
     [102, 111, 112, 401, 402, 411, 412] + [0] * 9),
    ("w_stride_2", (2, 3, 6), [-1, -1], [0, 0], [1, 1, 2, 1], [0, -1, -1, 0], [0, 0],
     [0, 0, 0, 0, 0, 2, 4, 6, 0, 12, 14, 16, 0, 22, 24, 26]),
    ("w_stride_2_off_lattice", (2, 3, 6), [-1, -1], [0, 0], [1, 1, 2, 1], [0, -1, 0, 0], [0, 0],
     [0, 0, 0, 0, 2, 4, 6, 0, 12, 14, 16, 0, 22, 24, 26, 0]),
    ("hw_strides_2_3", (2, 5, 7), [0, -1], [0, 0], [1, 2, 3, 1], [0, 0, -1, 0], [1, 1],
     [11, 14, 17, 31, 34, 37, 0, 0, 0, 111, 114, 117, 131, 134, 137, 0]),
    ("single_position_box", (2, 4, 4), [0, 0], [-3, 0], [1, 1, 1, 1], [0, 0, 0, 0], [0, 0],
     [1, 2, 3, 4, 101, 102, 103, 104] + [0] * 8),
    ("negative_image", (2, 4, 4), [0, 0], [0, 0], [1, 1, 1, 1], [-1, 2, 0, 0], [0, 0],
     [0] * 8 + [1, 2, 3, 4, 11, 12, 13, 14]),
    ("large_offsets", (1, 4, 4), [-3, -3], [-3, -3], [1, 1, 1, 1], [0, -3, -3, 0], [3, 2],
     [0, 1, 2, 3, 0, 11, 12, 13, 0, 21, 22, 23, 0, 31, 32, 33]),
    ("negative_channel", (1, 4, 4), [0, 0], [0, 0], [1, 1, 1, 1], [0, 0, 0, -8], [0, 0], _FULL),
    ("channels_past_the_end", (1, 4, 4), [0, 0], [0, 0], [1, 1, 1, 1], [0, 0, 0, 16], [0, 0], _FULL),
]


def _probe_input(shape):
    n, h, w = np.indices(shape)
    pixel = (1 + 100 * n + 10 * h + w).astype(np.float32)
    return pixel[..., None] + 1000 * np.arange(32, dtype=np.float32)


def _probe_expected(pixels, c0):
    pixels = np.array(pixels, np.float32)[:, None]
    channel = c0 + np.arange(32)
    return np.where((pixels > 0) & (channel >= 0) & (channel < 32), pixels + 1000 * channel, 0).astype(np.float32)


def _probe_desc(x, lower, upper, steps):
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    strides = [s // 4 for s in x.strides] if isinstance(x, np.ndarray) else list(x.stride())
    return TensorDescriptorIm2Col(x, list(x.shape), strides, [16, 32], layout, element_strides=steps,
                                  pixel_box_lower_corner=lower, pixel_box_upper_corner=upper)


@pytest.mark.parametrize("name, shape, lower, upper, steps, coord, taps, pixels", _MEASURED,
                         ids=[c[0] for c in _MEASURED])
def test_walks_measured_on_the_hardware(name, shape, lower, upper, steps, coord, taps, pixels):
    x = _probe_input(shape)
    out = np.full((16, 32), np.nan, np.float32)
    _interpret(gather_kernel, (1,), _probe_desc(x, lower, upper, steps), out, *coord, *taps, REG)
    np.testing.assert_array_equal(out, _probe_expected(pixels, coord[-1]))


def test_a_filter_position_outside_the_bounding_box_is_reported_at_the_load():
    """The hardware traps (an illegal instruction, seen on an H100 before and after the box)."""
    x = _tutorial_input(1)
    out = np.zeros((16, 32), np.float32)
    with pytest.raises(InterpreterError, match=r"outside the bounding box \[0, 3\]") as err:
        _interpret(gather_kernel, (1,), _tutorial_desc(x, [0, 0], [0, 0]), out, 0, 0, 4, 0, 0, 0, REG)
    assert f":{_line(gather_kernel, 'LOAD')}" in str(err.value)


def test_a_runtime_offset_out_of_range_is_reported_at_the_load():
    x = _tutorial_input(1)
    with pytest.raises(InterpreterError, match="at most 255") as err:
        _interpret(gather_kernel, (1,), _tutorial_desc(x, [0, 0], [0, 0]), np.zeros((16, 32), np.float32),
                   0, 0, 0, 0, 300, 0, REG)
    assert f":{_line(gather_kernel, 'LOAD')}" in str(err.value)


# ------------------------------------------------------------------------- lowering
@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("block, boxes", [([32, 32], 1), ([64, 128], 2), ([512, 64], 1)])
def test_lowering_assembles_with_the_im2col_instruction(target, block, boxes):
    ty = ir.TensorDescIm2ColType(block, ir.float16, _layout(block), 4)
    c = gather_kernel.compile(ty, "*fp16", "i32", "i32", "i32", "i32", "i32", "i32", layout=REG, target=target)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    assert ".param .align 64 .b8 gather_kernel_param_0[128]" in ptx
    lines = [s.strip() for s in ptx.splitlines()
             if "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes" in s]
    assert len(lines) == boxes
    for line in lines:  # coordinates innermost first, then the barrier, then the two 16-bit offsets
        assert re.fullmatch(r"@%p\d+ cp\.async\.bulk\.tensor\.4d\S+ \[%r\d+\], \[%rd\d+, \{%r\d+, %r\d+, %r\d+, "
                            r"%r\d+\}\], \[%r\d+\], \{%rs\d+, %rs\d+\};", line), line
    if boxes == 2:  # the second slice of channels: 64 channels further, 64 * 64 * 2 bytes further in shared memory
        assert re.search(r"add\.s32\s+%r\d+, %r\d+, 64;", ptx)


@gluonkit.jit
def order_kernel(desc, n, h, w, c, TAPS: gl.constexpr):
    """Just the copy (and its barrier), for reading the instruction's operands."""
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_load_im2col(desc, [n, h, w, c], TAPS, bar, smem)
    mbarrier.wait(bar, 0)
    mbarrier.invalidate(bar)


# Triton 3.9 compiles the same copy (a Gluon kernel with a
# tensordesc_im2col<fp16[64, 32],input_rank=4,...> argument, offsets [1, 2]) to
#   @%p3 cp.async.bulk.tensor.4d.shared::cta.global.im2col.mbarrier::complete_tx::bytes
#        [%r2], [%rd1, {%r3, %r4, %r5, %r6}], [%r1], {%rs1, %rs2};
# with %r3..%r6 = c, w, h, n and %rs1, %rs2 = 2, 1: coordinates and offsets innermost first.
# gluonkit's differs only in the destination's state space (.shared::cluster, docs/decisions.rst).
@needs_ptxas
def test_the_instruction_has_triton_39s_operands():
    ty = ir.TensorDescIm2ColType((64, 32), ir.float16, gl.NVMMASharedLayout(64, 16, rank=2), 4)
    ptx = order_kernel.compile(ty, "i32", "i32", "i32", "i32", TAPS=(1, 2)).asm["ptx"]
    params = dict(re.findall(r"ld\.param\.b32\s+(%r\d+), \[order_kernel_param_(\d+)\];", ptx))
    b16 = dict(re.findall(r"mov\.b16\s+(%rs\d+), (\d+);", ptx))
    found = re.search(r"@%p\d+ cp\.async\.bulk\.tensor\.4d\.shared::cluster\.global\.im2col\.mbarrier::complete_tx::"
                      r"bytes \[%r\d+\], \[%rd\d+, \{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}\], \[%r\d+\], "
                      r"\{(%rs\d+), (%rs\d+)\};", ptx)
    assert found, ptx
    # parameters: 0 the map, 1-4 its shape, 5-8 its strides, then n, h, w, c as 9, 10, 11, 12
    assert [params.get(r) for r in found.groups()[:4]] == ["12", "11", "10", "9"]
    assert [b16.get(r) for r in found.groups()[4:]] == ["2", "1"]


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("rank", [3, 5])
def test_convolution_gathers_of_rank_3_and_5_assemble(target, rank):
    block = [64, 32]
    spatial = rank - 2
    ty = ir.TensorDescIm2ColType(block, ir.float16, _layout(block), rank)
    offsets = tuple(itertools.product(*([(0, 1)] * spatial)))
    c = conv_gather_kernel.compile(ty, "*fp16", "i32", OUT=(4,) * spatial, STRIDE=(1,) * spatial, PAD=(1,) * spatial,
                                   OFFSETS=offsets, layout=REG, target=target)
    ptx = c.asm["ptx"]
    braces = ", ".join(["%rs\\d+"] * spatial)
    found = re.findall(rf"cp\.async\.bulk\.tensor\.{rank}d\.shared::cluster\.global\.im2col\S+ .*\{{{braces}\}};", ptx)
    assert len(found) == 2 ** spatial and "cubin" in c.asm


# -------------------------------------------------------------- frontend and verifier
_BAD_CASES = [
    ("tma.async_load(d, [0, 0, 0, 0], bar, s)", "is an im2col descriptor (TensorDescriptorIm2Col); copy through it "
                                                "with tma.async_load_im2col"),
    ("tma.async_load_im2col(d, [0, 0, 0], [0, 0], bar, s)", "one entry per dimension of the rank-4 tensor"),
    ("tma.async_load_im2col(d, [0, 0, 0, 0], [0], bar, s)", "must have 2 entries (one per spatial dimension"),
    ("tma.async_load_im2col(d, [0, 0, 0, 0], [0, -1], bar, s)", "im2col offset -1 is out of range"),
    ("tma.async_load_im2col(d, [0, 0, 0, 0], [256, 0], bar, s)", "unsigned and at most 255"),
    ("tma.async_load_im2col(d, [0, 0, 0, 0], [0, 1.5], bar, s)", "each im2col offset must be an int"),
    ("tma.async_load_im2col(d, [0, 0, 0, 0], [0, 0], bar, s, multicast=True)", "supports for tiled async_load only"),
    ("tma.async_load_im2col(d, [0, 0, 0, 0], [0, 0], bar, gl.allocate_shared_memory(gl.float16, [64, 32], "
     "d.layout))", "but the descriptor's block is [32, 32]"),
    ("tma.async_store(d, [0, 0, 0, 0], s)", "is an im2col descriptor"),
]


def _bad_module(tmp_path, body):
    source = ("import gluonkit, gluonkit.lang as gl\nfrom gluonkit.language.nvidia.hopper import mbarrier, tma\n"
              "@gluonkit.jit\ndef bad(d):\n"
              "    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())\n"
              "    s = gl.allocate_shared_memory(gl.float16, [32, 32], d.layout)\n"
              f"    {body}\n")
    path = tmp_path / "bad_im2col.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("bad_im2col", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.bad


@pytest.mark.parametrize("body, fragment", _BAD_CASES)
def test_frontend_errors_name_the_line_and_the_fix(tmp_path, body, fragment):
    bad = _bad_module(tmp_path, body)
    with pytest.raises(CompilationError) as err:
        bad.build_ir([ir.TensorDescIm2ColType((32, 32), ir.float16, _layout([32, 32]), 4)])
    assert fragment in str(err.value)
    assert "bad_im2col.py:7" in str(err.value)


def test_async_load_im2col_refuses_a_tiled_descriptor(tmp_path):
    bad = _bad_module(tmp_path, "tma.async_load_im2col(d, [0, 0], [0, 0], bar, s)")
    with pytest.raises(CompilationError, match="is a tiled descriptor \\(TensorDescriptor\\); build a "
                                               "TensorDescriptorIm2Col") as err:
        bad.build_ir([ir.TensorDescType((32, 32), ir.float16, _layout([32, 32]))])
    assert "bad_im2col.py:7" in str(err.value)


def test_the_ir_records_the_offsets_and_the_verifier_checks_them():
    from ir_helpers import KernelBuilder

    ty = ir.TensorDescIm2ColType((32, 32), ir.float16, _layout([32, 32]), 3)
    assert str(ty).startswith("!tma_im2col<32x32xfloat16") and ty.rank == 3
    assert ty.flat_arg_types() == (ty, ir.int32, ir.int32, ir.int32, ir.int64, ir.int64, ir.int64)
    assert ty != ir.TensorDescType((32, 32), ir.float16, _layout([32, 32]))
    assert (ty.max_offset, ir.TensorDescIm2ColType((32, 32), ir.float16, None, 5).max_offset) == (65535, 31)
    with pytest.raises(ValueError, match="2-D block \\[pixels, channels\\] from a tensor of rank 3, 4 or 5"):
        ir.TensorDescIm2ColType((32, 32), ir.float16, _layout([32, 32]), 2)
    k = KernelBuilder(args=[("d", ty), ("c", ir.int32), ("p", ir.int1)])
    d, c, p = k.args
    smem = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.float16, (32, 32), _layout([32, 32]), (32, 32)))
    bar = k.value("local_alloc", [], ir.SharedMemoryDescType(ir.int64, (1,), mbarrier.MBarrierLayout(), (1,)))
    k.op("async_tma_copy_global_to_shared", [d, smem, bar, p, c, c, c, c])  # an int32 where the int16 offset goes
    with pytest.raises(CompilationError, match="im2col offsets must be int16 scalars, got int32"):
        ir.verify(k.finish())


# --------------------------------------------------------------------- host descriptor
def _x(shape=(2, 8, 8, 64), dtype=np.float16):
    return np.zeros(shape, dtype)


_HOST_CASES = [
    (dict(x=_x((8, 64))), "shape: im2col mode reads a tensor of rank 3 (NWC), 4 (NHWC) or 5 (NDHWC), got rank 2"),
    (dict(block=[64, 64, 1]), "block_shape: im2col mode copies a 2-D block"),
    (dict(block=[48, 64]), "block_shape[0] (pixels per column) must be a positive power of two, got 48"),
    (dict(block=[2048, 64]), "one im2col copy moves at most 1024 pixels"),
    (dict(block=[64, 8]), "block_shape: [64, 8] does not fit the layout"),
    (dict(lower=None), "pixel_box_lower_corner: required in im2col mode: one offset per spatial dimension ([H, W]"),
    (dict(upper=[0]), "pixel_box_upper_corner: expected 2 offsets (spatial dimensions [H, W]"),
    (dict(lower=[0, -129]), "pixel_box_lower_corner[1] must be in [-128, 127] for a rank-4 tensor, got -129"),
    (dict(x=_x((2, 8, 8, 8, 64)), lower=[0, 0, 0], upper=[0, 0, 16]),
     "pixel_box_upper_corner[2] must be in [-16, 15] for a rank-5 tensor, got 16"),
    (dict(upper=[-9, 0]), "the bounding box of spatial dimension 0 is empty"),
    (dict(element_strides=[1, 2, 2]), "element_strides: expected 4"),
    (dict(element_strides=[1, 9, 1, 1]), "element_strides[1] must be in [1, 8], got 9"),
    (dict(element_strides=[1, 1, 1, 2]), "the channel dimension's stride (the last) must be 1"),
    (dict(padding="inf"), "padding: expected one of ['zero', 'nan'], got 'inf'"),
    (dict(x=_x(dtype=np.int16), padding="nan", layout=_layout([64, 64], gl.int16)), "padding: 'nan' needs a "
                                                                                     "floating-point tensor"),
    (dict(round_f32_to_tf32=True), "round_f32_to_tf32: only float32 tensors"),
    (dict(layout=_layout([64, 64], gl.float32)), "layout: element_bitwidth is 32 but the tensor's dtype float16"),
    (dict(layout=gl.NVMMASharedLayout(128, 16, rank=3)), "layout: has rank 3 but the im2col block [64, 64] has rank 2"),
    (dict(x=_x((2, 8, 8, 60))), "strides: stride 60 of dimension 2 is 120 bytes"),
]


@pytest.mark.parametrize("change, message", _HOST_CASES, ids=[m.split(":")[0] + str(i) for i, (_, m) in
                                                              enumerate(_HOST_CASES)])
def test_host_checks_raise_value_errors_naming_the_parameter(change, message):
    args = dict(x=_x(), block=[64, 64], layout=_layout([64, 64]), padding="zero", round_f32_to_tf32=False,
                element_strides=None, lower=[-1, -1], upper=[-1, -1])
    args.update(change)
    with pytest.raises(ValueError) as err:
        TensorDescriptorIm2Col.from_tensor(args["x"], args["block"], args["layout"], args["padding"],
                                           args["round_f32_to_tf32"], args["element_strides"], args["lower"],
                                           args["upper"])
    assert str(err.value).startswith("TensorDescriptorIm2Col: ") and message in str(err.value)


def test_host_checks_refuse_wrong_kinds_with_type_errors():
    with pytest.raises(TypeError, match="parameter 'layout' must be an NVMMASharedLayout"):
        TensorDescriptorIm2Col.from_tensor(_x(), [64, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]),
                                           pixel_box_lower_corner=[0, 0], pixel_box_upper_corner=[0, 0])
    with pytest.raises(TypeError, match="parameter 'pixel_box_lower_corner' must be a sequence of ints"):
        TensorDescriptorIm2Col.from_tensor(_x(), [64, 64], _layout([64, 64]), pixel_box_lower_corner=[0.5, 0],
                                           pixel_box_upper_corner=[0, 0])


def test_host_descriptor_has_gluons_parameters_attributes_and_type():
    x = _x()
    d = TensorDescriptorIm2Col(x, x.shape, [1024, 128, 64, 1], [64, 64], _layout([64, 64]), "zero", False,
                               [1, 2, 1, 1], [-1, 0], [0, -1])
    assert (d.mode, d.shape, d.strides, d.block_shape) == ("im2col", (2, 8, 8, 64), (1024, 128, 64, 1), (64, 64))
    assert (d.element_strides, d.traversal_strides) == ((1, 2, 1, 1), (1, 2, 1, 1))
    assert (d.pixel_box_lower_corner, d.pixel_box_upper_corner) == ((-1, 0), (0, -1))
    assert d.box_shape == (64, 64) and d.block_type.nbytes == 64 * 64 * 2
    assert ir_type_of(d) == ir.TensorDescIm2ColType((64, 64), ir.float16, _layout([64, 64]), 4)
    assert not isinstance(d, TensorDescriptor)
    wide = TensorDescriptorIm2Col.from_tensor(_x((1, 4, 4, 256)), [64, 256], _layout([64, 256]),
                                              pixel_box_lower_corner=[0, 0], pixel_box_upper_corner=[0, 0])
    assert wide.box_shape == (64, 64) and wide.element_strides is None and wide.traversal_strides == (1, 1, 1, 1)
    with pytest.raises(ValueError, match="only the interpreter"):
        d.kernel_arg_bytes()  # a numpy base: nothing to encode


def test_packer_places_the_map_then_the_tensors_shape_and_strides():
    x = np.zeros((2, 6, 10, 64), np.float16)
    d = TensorDescriptorIm2Col.from_tensor(x, [32, 64], _layout([32, 64]), pixel_box_lower_corner=[0, 0],
                                           pixel_box_upper_corner=[0, 0])
    d._encoded = bytes(range(128))  # what cuTensorMapEncodeIm2col would return (no GPU here)
    packer = ArgPacker([ir_type_of(d), ir.int32], ["d", "n"])
    block = packer.pack([d, 5])
    raw = bytes(block.buffer)[block.offset:block.offset + 128 + 16 + 32 + 4]
    assert raw[:128] == bytes(range(128))
    assert struct.unpack_from("<iiiiqqqqi", raw, 128) == (2, 6, 10, 64, 3840, 640, 64, 1, 5)


# ------------------------------------------------------------------------------- GPU
def _torch():
    return pytest.importorskip("torch")


def _gpu_launch(kernel, grid, args, kw, result):
    torch = _torch()
    desc, out, *rest = args
    gx = torch.from_numpy(np.ascontiguousarray(desc.base)).cuda()
    gdesc = TensorDescriptorIm2Col.from_tensor(gx, desc.block_shape, desc.layout, desc.padding,
                                               desc.round_f32_to_tf32, desc.element_strides,
                                               desc.pixel_box_lower_corner, desc.pixel_box_upper_corner)
    gout = torch.from_numpy(out).cuda()
    kernel[grid](gdesc, gout, *rest, **kw)
    torch.cuda.synchronize()
    return gout.cpu().numpy()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spatial_rank", [1, 2, 3])
def test_gpu_convolution_gather_matches_numpy_and_the_interpreter(seed, spatial_rank):
    rng = np.random.default_rng(1000 + 10 * spatial_rank + seed)
    conv = _random_conv(rng, spatial_rank)
    x = rng.standard_normal((2, *conv[0], 48)).astype(np.float16)
    c0 = int(rng.choice([0, 16, 32]))
    on_gpu = _run_conv(x, [32, 32], c0, conv, launch=_gpu_launch)
    expected = _reference(x.astype(np.float64), conv[2], conv[3], conv[4], conv[1], c0, 32, on_gpu.shape[0])
    np.testing.assert_array_equal(on_gpu.astype(np.float64), expected)
    np.testing.assert_array_equal(on_gpu, _run_conv(x, [32, 32], c0, conv))


@pytest.mark.parametrize("name, images, lower, upper, coord, taps, expected", _TUTORIAL, ids=[c[0] for c in _TUTORIAL])
def test_gpu_tutorial_loads(name, images, lower, upper, coord, taps, expected):
    torch = _torch()
    x = torch.from_numpy(_tutorial_input(images)).cuda()
    out = torch.full((16, 32), float("nan"), device="cuda")
    gather_kernel[(1,)](_tutorial_desc(x, lower, upper), out, *coord, *taps, REG)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), np.repeat(np.array(expected, np.float32)[:, None], 32, 1))


@pytest.mark.parametrize("name, shape, lower, upper, steps, coord, taps, pixels", _MEASURED,
                         ids=[c[0] for c in _MEASURED])
def test_gpu_walks(name, shape, lower, upper, steps, coord, taps, pixels):
    torch = _torch()
    x = torch.from_numpy(_probe_input(shape)).cuda()
    out = torch.full((16, 32), float("nan"), device="cuda")
    gather_kernel[(1,)](_probe_desc(x, lower, upper, steps), out, *coord, *taps, REG)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), _probe_expected(pixels, coord[-1]))


def test_gpu_warp_specialized_loader_feeds_the_taps():
    rng = np.random.default_rng(51)
    conv = ((6, 9), (1, 3), (0, 1), (1, 1), (1, 2), _out_extents((6, 9), (0, 1), (1, 1), (1, 2), (1, 3)))
    x = rng.standard_normal((2, 6, 9, 32)).astype(np.float16)
    desc = _im2col_desc(x, [32, 32], conv[2], conv[3], conv[4], conv[1])
    out = np.full((32, 3 * 32), 7.0, np.float16)
    on_gpu = _gpu_launch(warp_specialized_taps_kernel, (1,), (desc, out, 0, 0, -1), dict(TAP_W=2, NT=3, STAGES=2),
                         out)
    expected = _reference(x.astype(np.float64), conv[2], conv[3], conv[4], conv[1], 0, 32, 32)
    np.testing.assert_array_equal(on_gpu.astype(np.float64), expected)


def test_gpu_wide_blocks_take_one_copy_per_swizzle_of_channels():
    rng = np.random.default_rng(5)
    conv = ((6, 7), (2, 2), (1, 0), (2, 1), (1, 1), _out_extents((6, 7), (1, 0), (2, 1), (1, 1), (2, 2)))
    x = rng.standard_normal((3, 6, 7, 128)).astype(np.float16)
    on_gpu = _run_conv(x, [64, 128], 0, conv, launch=_gpu_launch)
    expected = _reference(x.astype(np.float64), conv[2], conv[3], conv[4], conv[1], 0, 128, on_gpu.shape[0])
    np.testing.assert_array_equal(on_gpu.astype(np.float64), expected)


for _name in [n for n in list(globals()) if n.startswith("test_gpu_")]:
    globals()[_name] = needs_gpu[1](needs_gpu[0](globals()[_name]))
