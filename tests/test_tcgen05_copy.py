"""tcgen05_copy of 32-bit tiles into a TensorMemoryLayout (Gluon 3.9 tutorial 10): interpreter against numpy and
float64, planted protocol bugs, errors at the user's line, ptxas sm_100a.

``tests/test_triton39_crosscheck.py`` compares the copies' PTX (shape, count, descriptors) with Triton 3.9's.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.interpret import InterpreterError
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory, fence_async_shared,
                                                mbarrier, tcgen05_commit, tcgen05_copy, tcgen05_mma)
from interpreting import launch_interpreted
from kernel_checks import line_containing, needs_ptxas
from tcgen05_copy_kernels import tile_copy


def _layouts(block_n, swizzle):
    return (gl.NVMMASharedLayout(swizzle_byte_width=swizzle, element_bitwidth=32, rank=2),
            TensorMemoryLayout((128, block_n), col_stride=1))


def _run(m, n, block_n, swizzle, mma=False, twice=False, k=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, n)).astype(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    y = np.zeros((2 * m, n), np.float32)
    launch_interpreted(tile_copy, (1,), x, y, a, b, M=m, N=n, K=k, SMEM_LAYOUT=_layouts(block_n, swizzle)[0],
                       TMEM_LAYOUT=_layouts(block_n, swizzle)[1], MMA=mma, TWICE=twice, num_warps=4)
    return x, a, b, y


@pytest.mark.parametrize("m,n,block_n,swizzle", [
    (128, 16, 1, 32), (128, 64, 64, 128), (128, 32, 8, 64), (128, 128, 32, 128),
    (256, 16, 16, 64), (256, 64, 32, 128), (256, 32, 8, 32),
    (256, 16, 8, 64),  # block N below the swizzle width at M = 256: Triton 3.9 finds no copy, gluonkit does
])
def test_the_copy_moves_the_tile_exactly(m, n, block_n, swizzle):
    x, _, _, y = _run(m, n, block_n, swizzle, seed=m + n + block_n)
    np.testing.assert_array_equal(y[:m], x)


def test_a_second_copy_after_the_wait_replaces_the_tile():
    x, _, _, y = _run(128, 64, 64, 128, twice=True, seed=5)
    np.testing.assert_array_equal(y[:128], x)
    np.testing.assert_array_equal(y[128:], 2 * x)


@pytest.mark.parametrize("m,n,block_n,swizzle", [(128, 64, 64, 128), (128, 32, 16, 32)])
def test_copy_then_mma_accumulates_without_a_wait_between(m, n, block_n, swizzle):
    """D = C + A @ B: the copy and the MMA the same thread issues after it run in order (tutorial 10)."""
    x, a, b, y = _run(m, n, block_n, swizzle, mma=True, seed=11)
    ref = x.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(y[:m], ref.astype(np.float32), rtol=1e-6, atol=1e-5)


# ------------------------------------------------------------------------ planted bugs
@gluonkit.jit
def _protocol(x_ptr, y_ptr, BUG: gl.constexpr):
    """y = x through tcgen05_copy; BUG plants one mistake."""
    blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    offs = gl.arange(0, 128, gl.SliceLayout(1, blk))[:, None] * 32 + gl.arange(0, 32, gl.SliceLayout(0, blk))[None, :]
    smem_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    smem = gl.allocate_shared_memory(gl.float32, [128, 32], smem_layout, gl.load(x_ptr + offs))
    tmem = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout((128, 32), col_stride=1))
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    if BUG != "no_fence":
        fence_async_shared()
    tcgen05_copy(smem, tmem)  # (no_fence: BUG, the store above is not visible to the tensor cores)
    if BUG == "early_load":
        tmem.load(tmem.get_reg_layout())  # BUG: the copy is not known complete
    if BUG == "refill":
        smem.store(gl.load(x_ptr + offs))  # BUG: the copy may still read its source
    unset = gl.allocate_shared_memory(gl.float32, [128, 32], smem_layout)  # never written
    unset_tmem = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout((128, 32), col_stride=1))
    if BUG != "no_fence":
        tcgen05_copy(unset, unset_tmem)  # harmless while nothing reads unset_tmem (a predicated-off MMA's scales)
    tcgen05_commit(bar)
    mbarrier.wait(bar, 0)
    reg: gl.constexpr = tmem.get_reg_layout()
    if BUG == "undefined":
        unset_tmem.load(reg)  # BUG: the copy moved undefined contents
    gl.store(y_ptr + gl.convert_layout(offs, reg), tmem.load(reg))


def _protocol_run(bug):
    x = np.random.default_rng(2).standard_normal((128, 32)).astype(np.float32)
    y = np.zeros_like(x)
    launch_interpreted(_protocol, (1,), x, y, bug, num_warps=4)
    return x, y


def test_the_protocol_without_bugs_copies():
    x, y = _protocol_run("none")
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("bug,text,message", [
    ("early_load", "tmem.load(tmem.get_reg_layout())  # BUG", "tmem_load reads tensor memory that the tcgen05_copy "
                                                              "at line"),
    ("refill", "smem.store(gl.load(x_ptr + offs))  # BUG", "the tcgen05_copy at line"),
    ("no_fence", "tcgen05_copy(smem, tmem)", "with no fence_async_shared() since"),
    ("undefined", "unset_tmem.load(reg)  # BUG", "tmem_load reads TMEM lane 0 column 32 (thread 0 register 0), which "
                                               "nothing has written yet"),
])
def test_planted_protocol_bugs_are_reported_at_their_line(bug, text, message):
    with pytest.raises(InterpreterError) as info:
        _protocol_run(bug)
    assert message in str(info.value), str(info.value)
    assert f":{line_containing(_protocol, text)}:" in str(info.value), str(info.value)


# ------------------------------------------------------------------------ partitions
@gluonkit.jit
def _ws_copier(c_smem, acc, copied, COMMIT: gl.constexpr):
    tcgen05_copy(c_smem, acc)
    if COMMIT:
        tcgen05_commit(copied)  # arrives once the copy completed
    else:
        mbarrier.arrive(copied)  # BUG: says nothing about the copy


@gluonkit.jit
def _ws_mma(a, b, acc, copied, done):
    mbarrier.wait(copied, 0)
    tcgen05_mma(a, b, acc, use_acc=True, mbarriers=[done])


@gluonkit.jit
def _ws_accumulate(x_ptr, a_ptr, b_ptr, y_ptr, COMMIT: gl.constexpr):
    """y = x + a @ b: one partition copies x into the accumulator, the MMA warp accumulates onto it."""
    blk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    rows = gl.arange(0, 128, gl.SliceLayout(1, blk))
    cols = gl.arange(0, 32, gl.SliceLayout(0, blk))
    offs = rows[:, None] * 32 + cols[None, :]
    c_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    op_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([128, 32], gl.float16)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([32, 32], gl.float16)
    c_smem = gl.allocate_shared_memory(gl.float32, [128, 32], c_layout, gl.load(x_ptr + offs))
    a = gl.allocate_shared_memory(gl.float16, [128, 32], op_layout, gl.load(a_ptr + offs))
    b = gl.allocate_shared_memory(gl.float16, [32, 32], b_layout,
                                  gl.load(b_ptr + gl.arange(0, 32, gl.SliceLayout(1, blk))[:, None] * 32 + cols[None, :]))
    acc = allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout((128, 32), col_stride=1))
    copied = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(copied, count=1)
    mbarrier.init(done, count=1)
    fence_async_shared()
    gl.warp_specialize([(_ws_copier, (c_smem, acc, copied, COMMIT)), (_ws_mma, (a, b, acc, copied, done))],
                       [1], [24])
    mbarrier.wait(done, 0)
    reg: gl.constexpr = acc.get_reg_layout()
    gl.store(y_ptr + gl.convert_layout(offs, reg), acc.load(reg))


def _ws_run(commit):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((128, 32)).astype(np.float32)
    a = rng.standard_normal((128, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    y = np.zeros_like(x)
    launch_interpreted(_ws_accumulate, (1,), x, a, b, y, commit, num_warps=4)
    return x.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64), y


def test_a_tile_copied_by_another_partition_is_ordered_by_a_commit():
    ref, y = _ws_run(True)
    np.testing.assert_allclose(y, ref.astype(np.float32), rtol=1e-6, atol=1e-5)


def test_a_tile_copied_by_another_partition_without_a_commit_is_reported():
    with pytest.raises(InterpreterError) as info:
        _ws_run(False)
    text = str(info.value)
    assert "tcgen05_mma uses tensor memory that the tcgen05_copy at line" in text, text
    assert "(issued by another partition)" in text and f":{line_containing(_ws_mma, 'tcgen05_mma(')}:" in text


# ------------------------------------------------------------------------ errors
@gluonkit.jit
def _bad(BUG: gl.constexpr):
    """One bad call per BUG value (on the line that names it)."""
    sw128: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    tile: gl.constexpr = TensorMemoryLayout((128, 32), col_stride=1)
    src = gl.allocate_shared_memory(gl.float32, [128, 32], sw128)
    dst = allocate_tensor_memory(gl.float32, [128, 32], tile)
    if BUG == "fp16":
        tcgen05_copy(gl.allocate_shared_memory(gl.float16, [128, 64], gl.NVMMASharedLayout(128, 16, rank=2)),
                     allocate_tensor_memory(gl.float16, [128, 64], TensorMemoryLayout((128, 64), col_stride=2)))
    if BUG == "block_m":
        tcgen05_copy(src, allocate_tensor_memory(gl.float32, [128, 32], TensorMemoryLayout((64, 32), col_stride=1)))
    if BUG == "transposed":
        tcgen05_copy(gl.allocate_shared_memory(gl.float32, [128, 32], gl.NVMMASharedLayout(128, 32, rank=2,
                                                                                         transposed=True)), dst)
    if BUG == "unswizzled":
        tcgen05_copy(gl.allocate_shared_memory(gl.float32, [128, 32], gl.NVMMASharedLayout(0, 32, rank=2)), dst)
    if BUG == "shape":
        tcgen05_copy(src.slice(0, 16, dim=1), dst)
    if BUG == "narrow":  # M = 256 in blocks of 4 columns: no 128x256b copy reads 8 of them
        tcgen05_copy(gl.allocate_shared_memory(gl.float32, [256, 16], gl.NVMMASharedLayout(64, 32, rank=2)),
                     allocate_tensor_memory(gl.float32, [256, 16], TensorMemoryLayout((128, 4), col_stride=1)))
    if BUG == "row_major":
        tcgen05_copy(gl.allocate_shared_memory(gl.float32, [128, 32], gl.SwizzledSharedLayout(1, 1, 1, [1, 0])), dst)


@pytest.mark.parametrize("bug,text,message", [
    ("fp16", "tcgen05_copy(gl.allocate_shared_memory(gl.float16", "a copy into a TensorMemoryLayout moves 32-bit "
                                                                   "elements"),
    ("block_m", "TensorMemoryLayout((64, 32)", "dst's TensorMemoryLayout must have block M 128"),
    ("transposed", 'if BUG == "transposed"', "must be neither transposed nor padded"),
    ("unswizzled", "NVMMASharedLayout(0, 32", "NVMMASharedLayout must be swizzled"),
    ("shape", "src.slice(0, 16, dim=1)", "src is [128, 16] but dst is [128, 32]"),
    ("narrow", 'if BUG == "narrow"', "tcgen05.cp.128x256b cannot fill tensor memory columns 0..7"),
    ("row_major", "SwizzledSharedLayout(1, 1, 1, [1, 0])", "tcgen05.cp.128x256b cannot fill tensor memory columns"),
])
def test_bad_calls_are_errors_at_the_users_line(bug, text, message):
    with pytest.raises(CompilationError) as info:
        _bad.compile(target="sm_100a", num_warps=4, BUG=bug)
    assert message in str(info.value), str(info.value)
    line = line_containing(_bad, text) + (1 if text.startswith("if BUG") else 0)
    assert f":{line}:" in str(info.value), str(info.value)


# ------------------------------------------------------------------------ ptxas
def _compile(m, n, block_n, swizzle, mma=False, target="sm_100a"):
    smem_layout, tmem_layout = _layouts(block_n, swizzle)
    return tile_copy.compile("*fp32:16", "*fp32:16", "*fp16:16", "*fp16:16", target=target, num_warps=4, M=m, N=n,
                             K=32, SMEM_LAYOUT=smem_layout, TMEM_LAYOUT=tmem_layout, MMA=mma, TWICE=False)


@needs_ptxas
@pytest.mark.parametrize("m,n,block_n,swizzle,mma", [(128, 64, 64, 128, False), (128, 32, 8, 32, True),
                                                     (256, 64, 16, 64, False)])
def test_ptxas_accepts_sm_100a(m, n, block_n, swizzle, mma):
    kernel = _compile(m, n, block_n, swizzle, mma)
    assert kernel.asm["cubin"]
    ptx = kernel.asm["ptx"]
    assert ptx.count("tcgen05.cp.cta_group::1.128x256b ") == m * n // (128 * 8)  # 128 lanes x 8 columns each
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16 ") == (2 if mma else 0)


def test_sm_90a_is_an_error():
    with pytest.raises(CompilationError, match="sm_100a"):
        _compile(128, 64, 64, 128, target="sm_90a")
