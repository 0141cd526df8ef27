"""CTA pairs: ``cta_group::2`` tcgen05 MMAs, ``two_ctas`` barriers and split operands (docs/blackwell_2cta.rst).

The interpreter runs the pair's MMA exactly (A's rows and B's columns from both CTAs' shared
memory, each CTA's accumulator rows in its own tensor memory) against float64 numpy; planted
protocol bugs are reported at their lines; ptxas assembles the kernel for sm_100a.  The PTX
is compared with Triton 3.9's in ``tests/test_triton39_crosscheck.py``.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import ir
from gluonkit.interpret.errors import InterpreterError
from gluonkit.language.nvidia import blackwell
from gluonkit.lang.errors import CompilationError
from gluonkit.layouts import scales_copy_bases
from gluonkit.nvidia.hopper import TensorDescriptor

import pair_kernels
from tcgen05_kernels import tensor_core_values
from interpreting import interpreter_on
from kernel_checks import line_containing, needs_ptxas

pair_mma = gluonkit.jit(pair_kernels.pair_mma_source(gl, blackwell))
_NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float8e4nv": ml_dtypes.float8_e4m3fn}


def _layouts(dtype, BN, BK, b_kmajor=False):
    element = getattr(gl, dtype)
    b_block, b_cga = ([BN, BK], [[1, 0]]) if b_kmajor else ([BK, BN], [[0, 1]])
    return (gl.NVMMASharedLayout.get_default_for([256, BK], element, cga_layout=[[1, 0]]),
            gl.NVMMASharedLayout.get_default_for(b_block, element, cga_layout=b_cga))


def _run(dtype, M, N, K, BN, BK, skip_ready_wait=False, early_load=False, done_count=1, b_kmajor=False):
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(_NP[dtype])
    b = rng.standard_normal((K, N)).astype(_NP[dtype])
    c = np.full((M, N), np.nan, np.float32)
    a_layout, b_layout = _layouts(dtype, BN, BK, b_kmajor)
    a_desc = TensorDescriptor(a, a.shape, [K, 1], [256, BK], a_layout)
    if b_kmajor:  # B stored [N, K]
        bt = np.ascontiguousarray(b.T)
        b_desc = TensorDescriptor(bt, bt.shape, [K, 1], [BN, BK], b_layout)
    else:
        b_desc = TensorDescriptor(b, b.shape, [N, 1], [BK, BN], b_layout)
    with interpreter_on():
        pair_mma[(M // 256, N // BN)](a_desc, b_desc, c, N, K, skip_ready_wait, early_load, done_count, b_kmajor,
                                      num_ctas=2)
    return a, b, c


@pytest.mark.parametrize("dtype, M, N, K, BN, BK, b_kmajor", [
    ("float16", 256, 128, 128, 128, 64, False),    # two K steps: the pair barrier's and done's phases flip
    ("bfloat16", 512, 128, 64, 64, 64, False),     # two pairs along M, two along N: program ids and offsets
    ("float8e4nv", 256, 64, 256, 64, 128, False),  # fp8 (kind::f8f6f4)
    ("float16", 256, 128, 128, 128, 64, True),     # B as [N, K], its split blocks permuted
])
def test_pair_mma_in_the_interpreter_is_exact(dtype, M, N, K, BN, BK, b_kmajor):
    a, b, c = _run(dtype, M, N, K, BN, BK, b_kmajor=b_kmajor)
    ref = np.zeros((M, N), np.float32)  # each K step: exact products and sum, rounded once into the fp32 acc
    for k in range(0, K, BK):
        ref = (ref + a[:, k:k + BK].astype(np.float64) @ b[k:k + BK].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("kwargs, message, line", [
    ({"skip_ready_wait": True}, "while the TMA load issued at line", "blackwell.tcgen05_mma("),
    # (the odd CTA runs ahead while the even one waits for its loads: its TMEM is not written yet)
    ({"early_load": True}, "tmem_load reads", "acc.load(acc.get_reg"),
    ({"done_count": 2}, "deadlock", "blackwell.mbarrier.wait(done, phase)"),  # a pair's commit arrives once per CTA
])
def test_pair_protocol_bugs_are_reported_at_their_line(kwargs, message, line):
    with pytest.raises(InterpreterError, match=re.escape(message)) as info:
        _run("float16", 256, 64, 64, 64, 64, **kwargs)
    source = open(pair_kernels.__file__).read().splitlines()
    assert line in source[info.value.loc.line - 1]


@gluonkit.jit
def _one_cta_acc_in_pair_kernel(a_ptr, MODE: gl.constexpr):
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16, cga_layout=[[1, 0]])
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 128], gl.float16, cga_layout=[[0, 1]])
    a = gl.allocate_shared_memory(gl.float16, [256, 64], a_layout)
    b = gl.allocate_shared_memory(gl.float16, [64, 128], b_layout)
    pair: gl.constexpr = blackwell.TensorMemoryLayout((128, 128), 1, cga_layout=[[1, 0]], two_ctas=True)
    acc = blackwell.allocate_tensor_memory(gl.float32, [256, 128], pair)
    if MODE == "sync":
        blackwell.tcgen05_mma(a, b, acc)  # ERROR
    elif MODE == "pair_barrier":
        bar = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
        blackwell.tcgen05_mma(a, b, acc, mbarriers=[bar])  # ERROR
    else:
        whole: gl.constexpr = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16)
        a2 = gl.allocate_shared_memory(gl.float16, [256, 64], whole)
        bar2 = blackwell.mbarrier.allocate_mbarrier()
        blackwell.tcgen05_mma(a2, b, acc, mbarriers=[bar2])  # ERROR


@pytest.mark.parametrize("mode, message", [
    ("sync", "must be asynchronous"),
    ("pair_barrier", "only exists in the even CTA"),
    ("whole_a", "split by rows and B by columns"),
])
def test_pair_mma_misuse_is_an_error_at_the_call(mode, message):
    with pytest.raises(CompilationError, match=message) as info:
        _one_cta_acc_in_pair_kernel.compile("*fp16:16", MODE=mode, num_ctas=2, target="sm_100a")
    source = open(__file__).read().splitlines()
    assert source[info.value.loc.line - 1].rstrip().endswith("# ERROR")


def test_two_ctas_tensor_memory_needs_a_pair():
    with pytest.raises(CompilationError, match="num_ctas=2"):
        _one_cta_acc_in_pair_kernel.compile("*fp16:16", MODE="sync", num_ctas=1, target="sm_100a")


def _compiled(dtype="float16", BN=128, BK=64, b_kmajor=False):
    a_layout, b_layout = _layouts(dtype, BN, BK, b_kmajor)
    element = getattr(ir, dtype)
    b_block = (BN, BK) if b_kmajor else (BK, BN)
    return pair_mma.compile(ir.TensorDescType((256, BK), element, a_layout),
                            ir.TensorDescType(b_block, element, b_layout), "*fp32:16", "i32", "i32",
                            SKIP_READY_WAIT=False, EARLY_LOAD=False, DONE_COUNT=1, B_KMAJOR=b_kmajor,
                            num_warps=4, num_ctas=2, target="sm_100a")


@needs_ptxas
@pytest.mark.parametrize("dtype, BN, BK, b_kmajor", [("float16", 128, 64, False), ("bfloat16", 64, 64, False),
                                                      ("float8e4nv", 128, 128, False), ("float16", 128, 64, True)])
def test_pair_mma_assembles_for_sm_100a(dtype, BN, BK, b_kmajor):
    compiled = _compiled(dtype, BN, BK, b_kmajor)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    assert re.search(rf"tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32 \[%r\d+\], {BN};", ptx)
    assert "tcgen05.mma.cta_group::2.kind::" in ptx and "tcgen05.mma.cta_group::1" not in ptx
    assert "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64" in ptx
    assert "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "mbarrier.arrive.expect_tx.shared::cluster.b64" in ptx  # onto the even CTA's barrier
    assert "tcgen05.dealloc.cta_group::2" in ptx


# ------------------------------------------------------------------ A from tensor memory in a pair
pair_tmem_a_mma = gluonkit.jit(pair_kernels.pair_tmem_a_mma_source(gl, blackwell))
_NP_ALL = {**_NP, "float32": np.float32, "float8e5": ml_dtypes.float8_e5m2}


def _b_desc(b, dtype, b_kmajor):
    """B's TMA descriptor: ``[K, BN]`` split by columns, or (K-major) ``[BN, K]`` split by rows."""
    element = getattr(gl, dtype)
    if b_kmajor:
        bt = np.ascontiguousarray(b.T)
        layout = gl.NVMMASharedLayout.get_default_for(list(bt.shape), element, cga_layout=[[1, 0]])
        return TensorDescriptor(bt, bt.shape, [bt.shape[1], 1], list(bt.shape), layout)
    layout = gl.NVMMASharedLayout.get_default_for(list(b.shape), element, cga_layout=[[0, 1]])
    return TensorDescriptor(b, b.shape, [b.shape[1], 1], list(b.shape), layout)


@pytest.mark.parametrize("dtype, K, BN, b_kmajor", [
    ("float16", 64, 128, False), ("float32", 32, 64, True), ("float8e4nv", 128, 64, False),
    ("float8e5", 64, 128, True),
])
def test_pair_mma_with_a_from_tensor_memory_is_exact(dtype, K, BN, b_kmajor):
    rng = np.random.default_rng(K + BN)
    a = rng.standard_normal((256, K)).astype(_NP_ALL[dtype])
    b = rng.standard_normal((K, BN)).astype(_NP_ALL[dtype])
    c = np.full((256, BN), np.nan, np.float32)
    with interpreter_on():
        pair_tmem_a_mma[(1,)](_b_desc(b, dtype, b_kmajor), a, c, BN, b_kmajor, False, num_ctas=2)
    ref = tensor_core_values(a) @ tensor_core_values(b)  # each CTA's rows of A from its own tensor memory
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_a_store_under_a_pair_mma_is_reported():
    b = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float16)
    c = np.zeros((256, 128), np.float32)
    with pytest.raises(InterpreterError, match=r"tmem_store writes tensor memory that the tcgen05_mma at line \d+ "
                                               r"may still be reading \(its A operand\)") as info:
        with interpreter_on():
            pair_tmem_a_mma[(1,)](_b_desc(b, "float16", False), np.ones((256, 64), np.float16), c, 128, False, True,
                                  num_ctas=2)
    line = line_containing(pair_kernels.pair_tmem_a_mma_source(gl, blackwell), "if STORE_EARLY:") + 1
    assert f"pair_kernels.py:{line}" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("dtype, K, BN, b_kmajor", [("float16", 64, 128, False), ("float32", 32, 64, True),
                                                    ("float8e4nv", 128, 64, False)])
def test_pair_mma_with_a_from_tensor_memory_assembles_for_sm_100a(dtype, K, BN, b_kmajor):
    element = getattr(ir, dtype)
    block = (BN, K) if b_kmajor else (K, BN)
    layout = gl.NVMMASharedLayout.get_default_for(list(block), getattr(gl, dtype),
                                                  cga_layout=[[1, 0]] if b_kmajor else [[0, 1]])
    ptr = {"float16": "fp16", "float32": "fp32", "float8e4nv": "fp8e4nv"}[dtype]
    compiled = pair_tmem_a_mma.compile(ir.TensorDescType(block, element, layout), f"*{ptr}:16", "*fp32:16", "i32",
                                       B_KMAJOR=b_kmajor, STORE_EARLY=False, num_warps=4, num_ctas=2,
                                       target="sm_100a")
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    kind = {"float16": "f16", "float32": "tf32"}.get(dtype, "f8f6f4")
    steps = re.findall(rf"tcgen05\.mma\.cta_group::2\.kind::{kind} \[%r\d+\], \[%r\d+\], %rd\d+, %r\d+, %p\d+;",
                       compiled.asm["ptx"])
    assert len(steps) == K * np.dtype(_NP_ALL[dtype]).itemsize // 32

# ------------------------------------------------------------------ block-scaled MMA of a pair
pair_mma_scaled = gluonkit.jit(pair_kernels.pair_mma_scaled_source(gl, blackwell))


def _scaled_layouts(BN, BK):
    return (gl.NVMMASharedLayout.get_default_for([256, BK], gl.float8e4nv, cga_layout=[[1, 0]]),
            gl.NVMMASharedLayout.get_default_for([BN, BK], gl.float8e4nv, cga_layout=[[1, 0]]))


def _scale_smem_layouts(BN, SK):
    """The pair's scale buffers for tcgen05_copy: A's split by rows between the CTAs, B's whole in both."""
    return (gl.SharedLinearLayout(scales_copy_bases(128, SK), block_bases=[[128, 0]], alignment=128),
            gl.SharedLinearLayout(scales_copy_bases(BN, SK), block_bases=[[0, 0]], alignment=128))


@pytest.mark.parametrize("BN, BK, copy", [(128, 128, False), (256, 128, False), (64, 256, False), (128, 128, True),
                                          (256, 256, True)])
def test_pair_block_scaled_mma_in_the_interpreter_is_exact(BN, BK, copy):
    """A's scales from each CTA's rows, B's from both CTAs (the same), products exact, one rounding into fp32;
    stored from registers, or (copy) through shared memory and the pair's tcgen05_copy."""
    rng = np.random.default_rng(BN + BK)
    a = (rng.standard_normal((256, BK)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((BN, BK)) * 4).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(115, 140, (256, BK // 32), dtype=np.uint8)
    sb = rng.integers(115, 140, (BN, BK // 32), dtype=np.uint8)
    c = np.full((256, BN), np.nan, np.float32)
    a_layout, b_layout = _scaled_layouts(BN, BK)
    with interpreter_on():
        pair_mma_scaled[(1, 1)](TensorDescriptor(a, a.shape, [BK, 1], [256, BK], a_layout),
                                TensorDescriptor(b, b.shape, [BK, 1], [BN, BK], b_layout), sa, sb, c, False,
                                *(_scale_smem_layouts(BN, BK // 32) if copy else (None, None)), num_ctas=2)

    def scaled(x, s):
        return x.astype(np.float64) * np.repeat(np.ldexp(1.0, s.astype(np.int64) - 127), 32, axis=1)

    np.testing.assert_array_equal(c, (scaled(a, sa) @ scaled(b, sb).T).astype(np.float32))


def _compiled_scaled(BN=128, BK=128, b_scale_split=False):
    a_layout, b_layout = _scaled_layouts(BN, BK)
    return pair_mma_scaled.compile(ir.TensorDescType((256, BK), ir.float8e4nv, a_layout),
                                   ir.TensorDescType((BN, BK), ir.float8e4nv, b_layout), "*u8:16", "*u8:16",
                                   "*fp32:16", B_SCALE_SPLIT=b_scale_split, SA_SMEM=None, SB_SMEM=None, num_warps=4,
                                   num_ctas=2, target="sm_100a")


def test_pair_b_scales_split_between_the_ctas_are_an_error():
    with pytest.raises(CompilationError, match=re.escape("b_scale must be in TensorMemoryScalesLayout(cga_layout="
                                                         "[[0, 0]]) for a two_ctas MMA")) as info:
        _compiled_scaled(b_scale_split=True)
    assert f":{line_containing(pair_kernels.pair_mma_scaled_source(gl, blackwell), 'tcgen05_mma_scaled(')}:" \
        in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("BN, BK", [(128, 128), (64, 256)])
def test_pair_block_scaled_mma_assembles_for_sm_100a(BN, BK):
    compiled = _compiled_scaled(BN, BK)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    assert ptx.count("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.block32 ") == BK // 32
    assert "tcgen05.mma.cta_group::1" not in ptx
    assert "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64" in ptx


@needs_ptxas
def test_pair_scale_copy_assembles_for_sm_100a():
    a_layout, b_layout = _scaled_layouts(128, 128)
    sa_smem, sb_smem = _scale_smem_layouts(128, 4)
    compiled = pair_mma_scaled.compile(ir.TensorDescType((256, 128), ir.float8e4nv, a_layout),
                                       ir.TensorDescType((128, 128), ir.float8e4nv, b_layout), "*u8:16", "*u8:16",
                                       "*fp32:16", B_SCALE_SPLIT=False, SA_SMEM=sa_smem, SB_SMEM=sb_smem, num_warps=4,
                                       num_ctas=2, target="sm_100a")
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    # one 32x128b copy per 128-row x 4-scale block of each CTA's share: A's 128 rows, B's 128 rows
    assert ptx.count("tcgen05.cp.cta_group::2.warpx4.32x128b") == 2 and "tcgen05.cp.cta_group::1" not in ptx

@gluonkit.jit
def _pair_copy_rounds(sa_ptr, out_ptr, EARLY: gl.constexpr):
    """Two rounds of a pair's scale copy from one split buffer, each CTA rewriting its share in between (after
    its own wait for the copy, or, with EARLY, before it: a planted bug); the second round's scales read back.
    The even CTA's copy reads both CTAs' shares, so a cluster barrier orders the rewrites before it."""
    acc_layout: gl.constexpr = blackwell.TensorMemoryLayout((128, 64), col_stride=1, cga_layout=[[1, 0]], two_ctas=True)
    acc = blackwell.allocate_tensor_memory(gl.float32, [256, 64], acc_layout)  # (makes the kernel a pair's)
    a_scale = blackwell.allocate_tensor_memory(gl.uint8, [256, 4], blackwell.TensorMemoryScalesLayout([[1, 0]]))
    blk: gl.constexpr = gl.BlockedLayout([1, 4], [32, 1], [4, 1], [1, 0], cga_layout=[[1, 0]])
    offs = gl.arange(0, 256, gl.SliceLayout(1, blk))[:, None] * 4 + gl.arange(0, 4, gl.SliceLayout(0, blk))[None, :]
    split: gl.constexpr = gl.SharedLinearLayout(scales_copy_bases(128, 4), block_bases=[[128, 0]], alignment=128)
    sa_smem = gl.allocate_shared_memory(gl.uint8, [256, 4], split, gl.load(sa_ptr + offs))
    bar = blackwell.mbarrier.allocate_mbarrier()
    blackwell.mbarrier.init(bar, count=1)
    gl.barrier(cluster=True)
    blackwell.fence_async_shared()
    blackwell.tcgen05_copy(sa_smem, a_scale)
    blackwell.tcgen05_commit(bar)
    if EARLY:
        sa_smem.store((gl.load(sa_ptr + offs) + 1).to(gl.uint8))  # BUG
    blackwell.mbarrier.wait(bar, 0)
    sa_smem.store((gl.load(sa_ptr + offs) + 1).to(gl.uint8))
    blackwell.fence_async_shared()
    gl.barrier(cluster=True)  # both shares rewritten before the even CTA copies them (without: a race, reported)
    blackwell.tcgen05_copy(sa_smem, a_scale)
    blackwell.tcgen05_commit(bar)
    blackwell.mbarrier.wait(bar, 1)
    reg: gl.constexpr = a_scale.get_reg_layout()
    rows = gl.arange(0, 256, gl.SliceLayout(1, reg))[:, None] * 4 + gl.arange(0, 4, gl.SliceLayout(0, reg))[None, :]
    gl.store(out_ptr + rows, a_scale.load(reg))
    _ = acc


def test_pair_scale_copies_are_released_per_cta_and_early_rewrites_reported():
    sa = np.random.default_rng(7).integers(0, 200, (256, 4), dtype=np.uint8)
    out = np.zeros_like(sa)
    with interpreter_on():
        _pair_copy_rounds[(1,)](sa, out, False, num_ctas=2)
    np.testing.assert_array_equal(out, sa + 1)  # each CTA's rows, copied from its own share
    with pytest.raises(InterpreterError, match="tcgen05_copy") as info:  # (the copy reads the share the odd CTA
        with interpreter_on():                                               # rewrote early: both lines named)
            _pair_copy_rounds[(1,)](sa, out, True, num_ctas=2)
    assert f":{line_containing(_pair_copy_rounds, '# BUG')}:" in str(info.value), str(info.value)

@gluonkit.jit
def _pair_copy(BUG: gl.constexpr):
    """A CTA pair's kernel (two_ctas accumulator) copying block scales; each BUG is refused at its line."""
    acc_layout: gl.constexpr = blackwell.TensorMemoryLayout((128, 64), col_stride=1, cga_layout=[[1, 0]], two_ctas=True)
    acc = blackwell.allocate_tensor_memory(gl.float32, [256, 64], acc_layout)
    if BUG == "unsplit_source":  # A's scales split by rows, but one whole buffer in each CTA
        whole_a: gl.constexpr = gl.SharedLinearLayout(scales_copy_bases(256, 4), alignment=128)
        blackwell.tcgen05_copy(gl.allocate_shared_memory(gl.uint8, [256, 4], whole_a),
                               blackwell.allocate_tensor_memory(gl.uint8, [256, 4], blackwell.TensorMemoryScalesLayout(
                                   cga_layout=[[1, 0]])))
    if BUG == "one_cta":
        whole: gl.constexpr = gl.SharedLinearLayout(scales_copy_bases(128, 4), alignment=128)
        blackwell.tcgen05_copy(gl.allocate_shared_memory(gl.uint8, [128, 4], whole),
                               blackwell.allocate_tensor_memory(gl.uint8, [128, 4], blackwell.TensorMemoryScalesLayout()))
    _ = acc


@pytest.mark.parametrize("bug, message", [
    ("unsplit_source", "a CTA pair's scale copy into TensorMemoryScalesLayout(cga_layout=[[1, 0]]) reads each CTA's "
                       "share of a whole [256, 4] buffer in SharedLinearLayout(offset_bases=scales_copy_bases(128, 4), "
                       "block_bases=[[128, 0]])"),
    ("one_cta", "every tcgen05 instruction of a kernel uses one cta_group (PTX ISA); this kernel's is 2"),
])
def test_bad_copies_in_a_pair_kernel_are_refused_at_their_line(bug, message):
    with pytest.raises(CompilationError, match=re.escape(message)) as info:
        _pair_copy.compile(BUG=bug, num_warps=4, num_ctas=2, target="sm_100a")
    size = "256" if bug == "unsplit_source" else "128"
    assert f":{line_containing(_pair_copy, 'tcgen05_copy(gl.allocate_shared_memory(gl.uint8, [' + size)}:" in str(info.value)


@gluonkit.jit
def _split_scale_box():
    """Gluon 3.9's 2-CTA block-scaled example reshapes a scale box split between the pair: not built yet."""
    box: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=5,
                                             cga_layout=[[0, 1, 0, 0, 0]])
    smem = gl.allocate_shared_memory(gl.uint8, [1, 2, 1, 2, 256], box)
    smem.reshape((2, 1, 32, 4, 4))


def test_views_of_a_split_buffer_are_refused_at_their_line():
    with pytest.raises(CompilationError, match="the buffer is split between the CTAs of a cluster") as info:
        _split_scale_box.compile(num_warps=4, num_ctas=2, target="sm_100a")
    assert f":{line_containing(_split_scale_box, 'smem.reshape(')}:" in str(info.value)
