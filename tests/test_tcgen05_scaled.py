"""Block-scaled tcgen05 MMAs and tcgen05_copy: interpreter against float64, planted bugs, errors, ptxas sm_100a.

``tests/test_triton39_crosscheck.py`` compares the PTX (instructions, instruction descriptors,
copy descriptors) with Triton 3.9's for the same kernels.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, TensorMemoryScalesLayout, allocate_tensor_memory,
                                                fence_async_shared, mbarrier, tcgen05_commit, tcgen05_copy,
                                                tcgen05_mma_scaled)
from interpreting import launch_interpreted
from kernel_checks import line_containing, needs_ptxas
from tcgen05_scaled_kernels import mma_scaled, scale_smem_layout

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def _operand(fmt, rows, k, rng):
    """``(storage, float64 values [rows, k])`` of a random operand; e2m1 packs two per byte, lower nibble first."""
    if fmt == "e2m1":
        packed = rng.integers(0, 256, (rows, k // 2), dtype=np.uint8)
        values = np.stack([E2M1[packed & 15], E2M1[packed >> 4]], axis=2).reshape(rows, k)
        return packed, values
    stored = (rng.standard_normal((rows, k)) * 4).astype(FP8[fmt])
    return stored, stored.astype(np.float64)


def _scales(nvfp4, rows, sk, rng, extreme_rows=()):
    """``(storage, float64 values)``: UE8M0 exponents around 127 (or UE4M3 values), extreme rows as asked."""
    if nvfp4:
        stored = rng.uniform(0.01, 400, (rows, sk)).astype(ml_dtypes.float8_e4m3fn)
        stored[list(extreme_rows)] = np.array(2.0 ** -9, np.float32).astype(ml_dtypes.float8_e4m3fn)  # tiny
        return stored, stored.astype(np.float64)
    stored = rng.integers(100, 155, (rows, sk), dtype=np.uint8)
    for row, value in zip(extreme_rows, (254, 1, 255)):  # 2**127, 2**-126, NaN (one entry)
        if value == 255:
            stored[row, 0] = value
        else:
            stored[row] = value
    values = np.where(stored == 255, np.nan, np.ldexp(1.0, stored.astype(np.int64) - 127))
    return stored, values


def _layouts(copy, m, n, sk):
    """The scales' shared layouts (only used when they go through tcgen05_copy)."""
    return (scale_smem_layout(gl, m, sk), scale_smem_layout(gl, n, sk)) if copy else (None, None)


def _run(a_fmt, b_fmt, m, n, k, nvfp4, copy, acc, seed, extreme=()):
    rng = np.random.default_rng(seed)
    vec = 16 if nvfp4 else 32
    (a, av), (b, bv) = _operand(a_fmt, m, k, rng), _operand(b_fmt, n, k, rng)
    (sa, sav), (sb, sbv) = _scales(nvfp4, m, k // vec, rng, extreme), _scales(nvfp4, n, k // vec, rng)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    c = c0.copy()
    launch_interpreted(mma_scaled, (1,), a, b, sa, sb, c, m, n, a.shape[1], b.shape[1], k // vec, a_fmt, b_fmt,
                       copy, acc, *_layouts(copy, m, n, k // vec), num_warps=4)
    ref = (av * np.repeat(sav, vec, axis=1)) @ (bv * np.repeat(sbv, vec, axis=1)).T + (c0 if acc else 0)
    with np.errstate(over="ignore"):  # extreme scales overflow float32 on purpose
        return c, ref.astype(np.float32)


@pytest.mark.parametrize("a_fmt,b_fmt,m,n,k,nvfp4,copy,acc", [
    ("e4m3", "e4m3", 128, 128, 128, False, True, False),   # mxfp8, scales by tcgen05_copy
    ("e5m2", "e4m3", 128, 64, 64, False, False, True),     # mixed fp8, scales stored from registers
    ("e4m3", "e5m2", 128, 256, 256, False, True, True),    # 2 x 2 copy chunks (N = 256, K = 256)
    ("e2m1", "e2m1", 128, 128, 128, False, True, False),   # mxfp4 (kind::mxf4)
    ("e2m1", "e2m1", 128, 32, 128, True, False, True),     # nvfp4 (kind::mxf4nvf4), UE4M3 scales
    ("e2m1", "e2m1", 128, 128, 256, True, True, False),    # nvfp4 with copies
])
def test_block_scaled_mma_matches_float64(a_fmt, b_fmt, m, n, k, nvfp4, copy, acc):
    c, ref = _run(a_fmt, b_fmt, m, n, k, nvfp4, copy, acc, seed=m + n + k + nvfp4)
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("nvfp4", [False, True])
def test_extreme_scale_exponents(nvfp4):
    """UE8M0 2**127 (the float32 result overflows), 2**-126 and NaN; UE4M3's smallest subnormal."""
    fmt = "e2m1" if nvfp4 else "e4m3"
    c, ref = _run(fmt, fmt, 128, 128, 128, nvfp4, True, False, seed=7, extreme=(0, 1, 2))
    np.testing.assert_allclose(c, ref, rtol=1e-6, atol=0)
    if not nvfp4:
        assert np.isinf(c[0]).any() and np.isnan(c[2]).all() and np.abs(c[1]).max() < 1e-20


# ------------------------------------------------------------------------ planted bugs
@gluonkit.jit
def _protocol(sa_ptr, sb_ptr, c_ptr, BUG: gl.constexpr, S_LAYOUT: gl.constexpr):
    """c = a @ b.T with all-ones mxfp8 operands (K = 128) and scales by tcgen05_copy; BUG plants one mistake."""
    blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    scale_offs = gl.arange(0, 128, gl.SliceLayout(1, blk))[:, None] * 4 + gl.arange(0, 4, gl.SliceLayout(0, blk))[None, :]
    op_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 128], gl.float8e4nv)
    ones = gl.full([128, 128], 1.0, gl.float8e4nv, blk)
    a = gl.allocate_shared_memory(gl.float8e4nv, [128, 128], op_layout, ones)
    b = gl.allocate_shared_memory(gl.float8e4nv, [128, 128], op_layout, ones)
    sa_smem = gl.allocate_shared_memory(gl.uint8, [128, 4], S_LAYOUT, gl.load(sa_ptr + scale_offs))
    sb_smem = gl.allocate_shared_memory(gl.uint8, [128, 4], S_LAYOUT, gl.load(sb_ptr + scale_offs))
    a_scale = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryScalesLayout())
    b_scale = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryScalesLayout())
    acc = allocate_tensor_memory(gl.float32, [128, 128], TensorMemoryLayout([128, 128], col_stride=1))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    tcgen05_copy(sa_smem, a_scale)
    tcgen05_copy(sb_smem, b_scale)
    if BUG == "read_scales":
        a_scale.load(a_scale.get_reg_layout())  # BUG: the copy is not known complete
    if BUG == "recopy":  # the copies are complete before the MMA here
        tcgen05_commit(bar)
        mbarrier.wait(bar, 0)
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, "e4m3", "e4m3", use_acc=False, mbarriers=[bar])
    if BUG == "recopy":
        tcgen05_copy(sb_smem, b_scale)  # BUG: overwrites scales the MMA may still read
    if BUG == "refill":
        sa_smem.store(gl.load(sa_ptr + scale_offs))  # BUG: the copy's source, before the commit is observed
    mbarrier.wait(bar, 1 if BUG == "recopy" else 0)
    reg: gl.constexpr = acc.get_reg_layout()
    rows = gl.arange(0, 128, gl.SliceLayout(1, reg))
    cols = gl.arange(0, 128, gl.SliceLayout(0, reg))
    gl.store(c_ptr + rows[:, None] * 128 + cols[None, :], acc.load(reg))


def _protocol_run(bug):
    rng = np.random.default_rng(3)
    sa, sb = (rng.integers(120, 135, (128, 4), dtype=np.uint8) for _ in range(2))
    c = np.zeros((128, 128), np.float32)
    launch_interpreted(_protocol, (1,), sa, sb, c, bug, scale_smem_layout(gl, 128, 4), num_warps=4)
    return sa, sb, c


def test_the_copy_is_ordered_before_the_mma_of_the_same_thread():
    sa, sb, c = _protocol_run("none")
    scale = np.ldexp(1.0, sa.astype(np.int64) - 127) @ np.ldexp(1.0, sb.astype(np.int64) - 127).T * 32
    np.testing.assert_allclose(c, scale, rtol=1e-6)


@pytest.mark.parametrize("bug,text,message", [
    ("read_scales", "a_scale.load(", "tmem_load reads tensor memory that the tcgen05_copy at line"),
    ("recopy", "tcgen05_copy(sb_smem, b_scale)  # BUG", "tcgen05_copy overwrites tensor memory that the "
                                                         "tcgen05_mma_scaled at line"),
    ("refill", "sa_smem.store(", "the tcgen05_copy at line"),
])
def test_planted_protocol_bugs_are_reported_at_their_line(bug, text, message):
    with pytest.raises(InterpreterError) as info:
        _protocol_run(bug)
    assert message in str(info.value), str(info.value)
    assert f":{line_containing(_protocol, text)}:" in str(info.value), str(info.value)


# ------------------------------------------------------------------------ frontend errors
@gluonkit.jit
def _bad(BUG: gl.constexpr):
    """One bad call per BUG value (on the line that names it)."""
    fp8_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 128], gl.float8e4nv)
    a = gl.allocate_shared_memory(gl.float8e4nv, [128, 128], fp8_layout)
    b = gl.allocate_shared_memory(gl.float8e4nv, [128, 128], fp8_layout)
    acc = allocate_tensor_memory(gl.float32, [128, 128], TensorMemoryLayout([128, 128], col_stride=1))
    scales = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryScalesLayout())
    plain = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryLayout([128, 4], col_stride=1))
    row_major = gl.allocate_shared_memory(gl.uint8, [128, 4], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    if BUG == "format":
        tcgen05_mma_scaled(a, b.permute((1, 0)), acc, scales, scales, "e3m2", "e4m3")
    if BUG == "mixed":
        tcgen05_mma_scaled(a, b.permute((1, 0)), acc, scales, scales, "e2m1", "e4m3")
    if BUG == "scale_shape":
        tcgen05_mma_scaled(a, b.permute((1, 0)), acc, scales.slice(0, 2), scales, "e4m3", "e4m3")
    if BUG == "plain_dst":
        tcgen05_copy(row_major, plain)
    if BUG == "row_major_src":
        tcgen05_copy(row_major, scales)


@pytest.mark.parametrize("bug,text,message", [
    ("format", '"e3m2"', "a_type must be one of ['e2m1', 'e4m3', 'e5m2'], got 'e3m2'"),
    ("mixed", '"e2m1", "e4m3"', "a holds e2m1 values, so it must be uint8"),
    ("scale_shape", "scales.slice(0, 2)", "a_scale has shape [128, 2]; with uint8 scales (one per 32 elements of K) "
                                          "it must be [128, 4] for K = 128"),
    ("plain_dst", "tcgen05_copy(row_major, plain)", "a copy into a TensorMemoryLayout moves 32-bit elements"),
    ("row_major_src", "tcgen05_copy(row_major, scales)", "does not hold rows 0..127, scales 0..3 as tcgen05.cp's"),
])
def test_bad_calls_are_errors_at_the_users_line(bug, text, message):
    with pytest.raises(CompilationError) as info:
        _bad.compile(target="sm_100a", num_warps=4, BUG=bug)
    assert message in str(info.value), str(info.value)
    assert f":{line_containing(_bad, text)}:" in str(info.value), str(info.value)


# ------------------------------------------------------------------------ ptxas
_CASES = [("e4m3", "e4m3", "u8", 128, 128), ("e5m2", "e4m3", "u8", 256, 256), ("e2m1", "e2m1", "u8", 128, 256),
          ("e2m1", "e2m1", "fp8e4nv", 256, 128)]


def _compile(a_fmt, b_fmt, scale, n, k, target="sm_100a", copy=True):
    storage = {"e4m3": "fp8e4nv", "e5m2": "fp8e5", "e2m1": "u8"}
    sk = k // (16 if scale == "fp8e4nv" else 32)
    ka, kb = (k // 2 if f == "e2m1" else k for f in (a_fmt, b_fmt))
    return mma_scaled.compile(f"*{storage[a_fmt]}:16", f"*{storage[b_fmt]}:16", f"*{scale}:16", f"*{scale}:16",
                              "*fp32:16", target=target, num_warps=4, M=128, N=n, KA=ka, KB=kb, SK=sk, A_FMT=a_fmt,
                              B_FMT=b_fmt, COPY=copy, ACC=True, SA_LAYOUT=_layouts(copy, 128, n, sk)[0],
                              SB_LAYOUT=_layouts(copy, 128, n, sk)[1])


@needs_ptxas
@pytest.mark.parametrize("a_fmt,b_fmt,scale,n,k", _CASES)
def test_ptxas_accepts_sm_100a(a_fmt, b_fmt, scale, n, k):
    kernel = _compile(a_fmt, b_fmt, scale, n, k)
    assert kernel.asm["cubin"]
    ptx = kernel.asm["ptx"]
    kind = {"u8": "mxf4.block_scale.block32", "fp8e4nv": "mxf4nvf4.block_scale.block16"}[scale] \
        if a_fmt == "e2m1" else "mxf8f6f4.block_scale.block32"
    per_step = 64 if a_fmt == "e2m1" else 32
    assert ptx.count(f"tcgen05.mma.cta_group::1.kind::{kind} ") == k // per_step  # one MMA per 32 bytes of K
    vec = 16 if scale == "fp8e4nv" else 32
    assert ptx.count("tcgen05.cp.cta_group::1.warpx4.32x128b ") == (128 + n) // 128 * (k // vec // 4)


@needs_ptxas
def test_ptxas_accepts_scales_stored_from_registers():
    assert _compile("e4m3", "e5m2", "u8", 64, 128, copy=False).asm["cubin"]


def test_sm_90a_is_an_error():
    with pytest.raises(CompilationError, match="sm_100a"):
        _compile("e4m3", "e4m3", "u8", 128, 128, target="sm_90a")


# ------------------------------------------------------------------------ TMEM budget
@gluonkit.jit
def _oversubscribed(c_ptr):
    """A double-buffered 128 x 256 accumulator takes all 512 columns: the scales do not fit."""
    accs = allocate_tensor_memory(gl.float32, [2, 128, 256], TensorMemoryLayout([128, 256], col_stride=1))
    a_scale = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryScalesLayout())
    b_scale = allocate_tensor_memory(gl.uint8, [256, 4], TensorMemoryScalesLayout())
    reg: gl.constexpr = accs.index(0).get_reg_layout()
    accs.index(0).store(gl.full([128, 256], 1.0, gl.float32, reg))
    _ = a_scale, b_scale
    rows = gl.arange(0, 128, gl.SliceLayout(1, reg))
    cols = gl.arange(0, 256, gl.SliceLayout(0, reg))
    gl.store(c_ptr + rows[:, None] * 256 + cols[None, :], accs.index(0).load(reg))


def _check_budget_error(err):
    text = str(err)
    assert "the kernel allocates 576 tensor-memory columns but a CTA has 512" in text, text
    for what in ("[2, 128, 256] float32 -> 512 columns", "[128, 4] uint8 -> 32 columns",
                 "[256, 4] uint8 -> 32 columns"):
        assert what in text, text


def test_scales_over_the_tmem_budget_are_a_compile_error():
    with pytest.raises(CompilationError) as info:
        _oversubscribed.compile("*fp32:16", target="sm_100a", num_warps=4)
    _check_budget_error(info.value)


def test_scales_over_the_tmem_budget_are_an_interpreter_error():
    with pytest.raises(InterpreterError) as info:
        launch_interpreted(_oversubscribed, (1,), np.zeros((128, 256), np.float32), num_warps=4)
    _check_budget_error(info.value)


# ------------------------------------------------------------------------ partitions
@gluonkit.jit
def _ws_copier(sa_smem, sb_smem, a_scale, b_scale, copied, COMMIT: gl.constexpr):
    fence_async_shared()  # the scales were stored through the generic proxy
    tcgen05_copy(sa_smem, a_scale)
    tcgen05_copy(sb_smem, b_scale)
    if COMMIT:
        tcgen05_commit(copied)  # arrives once the copies completed
    else:
        mbarrier.arrive(copied)  # BUG: says nothing about the copies


@gluonkit.jit
def _ws_mma(a, b, acc, a_scale, b_scale, copied, done):
    fence_async_shared()  # the operands were stored through the generic proxy
    mbarrier.wait(copied, 0)
    tcgen05_mma_scaled(a, b.permute((1, 0)), acc, a_scale, b_scale, "e4m3", "e4m3", use_acc=False, mbarriers=[done])


@gluonkit.jit
def _ws_scaled(sa_ptr, sb_ptr, c_ptr, COMMIT: gl.constexpr, S_LAYOUT: gl.constexpr):
    """The scales are copied by the default partition and used by the MMA warp's MMA."""
    blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    scale_offs = gl.arange(0, 128, gl.SliceLayout(1, blk))[:, None] * 4 + gl.arange(0, 4, gl.SliceLayout(0, blk))[None, :]
    op_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 128], gl.float8e4nv)
    ones = gl.full([128, 128], 1.0, gl.float8e4nv, blk)
    a = gl.allocate_shared_memory(gl.float8e4nv, [128, 128], op_layout, ones)
    b = gl.allocate_shared_memory(gl.float8e4nv, [128, 128], op_layout, ones)
    sa_smem = gl.allocate_shared_memory(gl.uint8, [128, 4], S_LAYOUT, gl.load(sa_ptr + scale_offs))
    sb_smem = gl.allocate_shared_memory(gl.uint8, [128, 4], S_LAYOUT, gl.load(sb_ptr + scale_offs))
    a_scale = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryScalesLayout())
    b_scale = allocate_tensor_memory(gl.uint8, [128, 4], TensorMemoryScalesLayout())
    acc = allocate_tensor_memory(gl.float32, [128, 128], TensorMemoryLayout([128, 128], col_stride=1))
    copied = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(copied, count=1)
    mbarrier.init(done, count=1)
    fence_async_shared()
    gl.warp_specialize([(_ws_copier, (sa_smem, sb_smem, a_scale, b_scale, copied, COMMIT)),
                        (_ws_mma, (a, b, acc, a_scale, b_scale, copied, done))], [1], [24])
    mbarrier.wait(done, 0)
    reg: gl.constexpr = acc.get_reg_layout()
    rows = gl.arange(0, 128, gl.SliceLayout(1, reg))
    cols = gl.arange(0, 128, gl.SliceLayout(0, reg))
    gl.store(c_ptr + rows[:, None] * 128 + cols[None, :], acc.load(reg))


def _ws_run(commit):
    rng = np.random.default_rng(4)
    sa, sb = (rng.integers(120, 135, (128, 4), dtype=np.uint8) for _ in range(2))
    c = np.zeros((128, 128), np.float32)
    launch_interpreted(_ws_scaled, (1,), sa, sb, c, commit, scale_smem_layout(gl, 128, 4), num_warps=4)
    return np.ldexp(1.0, sa.astype(np.int64) - 127) @ np.ldexp(1.0, sb.astype(np.int64) - 127).T * 32, c


def test_scales_copied_by_another_partition_are_ordered_by_a_commit():
    ref, c = _ws_run(True)
    np.testing.assert_allclose(c, ref, rtol=1e-6)


def test_scales_copied_by_another_partition_without_a_commit_are_reported():
    with pytest.raises(InterpreterError) as info:
        _ws_run(False)
    text = str(info.value)
    assert "tcgen05_mma_scaled reads scales that the tcgen05_copy at line" in text, text
    assert "(issued by another partition)" in text and f":{line_containing(_ws_mma, 'tcgen05_mma_scaled(')}:" in text
