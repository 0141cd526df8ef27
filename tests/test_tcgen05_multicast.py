"""Clusters of CTA pairs: multicast TMA of shared operands and multicast tcgen05 commits
(``docs/blackwell_2cta.rst``, "Clusters of pairs").

A cluster of 4 or 8 CTAs (2 or 4 pairs) computes one tile; an operand that a CTA-rank bit does
not move is loaded once per class of CTAs that share it and multicast to them, and each pair's
MMA commits to every CTA that shares an operand with it.  The interpreter runs it exactly
against float64 numpy; ptxas assembles it for sm_100a; the PTX (masks included) is compared
with Triton 3.9's in ``tests/test_triton39_crosscheck.py``.
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
from gluonkit.lang.errors import CompilationError
from gluonkit.language.nvidia import blackwell
from gluonkit.nvidia.hopper import TensorDescriptor

import pair_kernels
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

multicast_mma = gluonkit.jit(pair_kernels.multicast_mma_source(gl, blackwell))

#: name -> (num_ctas, BM, BN, A's cga_layout, B's, the accumulator's)
CLUSTERS = {
    "m-pairs": (4, 512, 128, [[1, 0], [2, 0]], [[0, 1], [0, 0]], [[1, 0], [2, 0]]),    # B shared by both pairs
    "n-pairs": (4, 256, 256, [[1, 0], [0, 0]], [[0, 1], [0, 2]], [[1, 0], [0, 1]]),    # A shared
    "2x2-pairs": (8, 512, 256, [[1, 0], [2, 0], [0, 0]], [[0, 1], [0, 0], [0, 2]], [[1, 0], [2, 0], [0, 1]]),
}
BK = 32


def _layouts(name):
    num_ctas, BM, BN, a_cga, b_cga, acc_cga = CLUSTERS[name]
    nvmma = gl.NVMMASharedLayout.get_default_for
    return (nvmma([BM, BK], gl.float16, cga_layout=a_cga), nvmma([BK, BN], gl.float16, cga_layout=b_cga),
            BN // (1 << sum(1 for v in acc_cga if v[1])))


def _run(name, M, N, K, multicast=True, commit_descs=False):
    num_ctas, BM, BN, _, _, acc_cga = CLUSTERS[name]
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    a_layout, b_layout, tmem_bn = _layouts(name)
    a_desc = TensorDescriptor(a, a.shape, [K, 1], [BM, BK], a_layout)
    b_desc = TensorDescriptor(b, b.shape, [N, 1], [BK, BN], b_layout)
    with interpreter_on():
        multicast_mma[(M // BM, N // BN)](a_desc, b_desc, c, N, K, multicast, gl.constexpr(acc_cga), tmem_bn,
                                          commit_descs, num_ctas=num_ctas)
    ref = np.zeros((M, N), np.float32)  # each K step: exact products and sum, rounded once into the fp32 acc
    for k in range(0, K, BK):
        ref = (ref + a[:, k:k + BK].astype(np.float64) @ b[k:k + BK].astype(np.float64)).astype(np.float32)
    return c, ref


@pytest.mark.parametrize("name, M, N, K, multicast, commit_descs", [
    ("m-pairs", 512, 128, 64, True, False),      # two K steps: every barrier's phase flips
    ("m-pairs", 512, 128, 32, False, False),     # each CTA loads its own copy of B; pair commits
    ("n-pairs", 512, 256, 64, True, True),       # two clusters along M; the commit through descs
    ("2x2-pairs", 512, 256, 64, True, False),    # 8 CTAs: A and B both multicast, 3 commits per barrier
])
def test_multicast_mma_in_the_interpreter_is_exact(name, M, N, K, multicast, commit_descs):
    c, ref = _run(name, M, N, K, multicast, commit_descs)
    np.testing.assert_array_equal(c, ref)


def _compiled(name, multicast=True, commit_descs=False):
    num_ctas, BM, BN, _, _, acc_cga = CLUSTERS[name]
    a_layout, b_layout, tmem_bn = _layouts(name)
    return multicast_mma.compile(ir.TensorDescType((BM, BK), ir.float16, a_layout),
                                 ir.TensorDescType((BK, BN), ir.float16, b_layout), "*fp32:16", "i32", "i32",
                                 MULTICAST=multicast, ACC_CGA=gl.constexpr(acc_cga), TMEM_BN=tmem_bn,
                                 COMMIT_DESCS=commit_descs, num_warps=4, num_ctas=num_ctas, target="sm_100a")


@needs_ptxas
@pytest.mark.parametrize("name, multicast, commit_descs", [("m-pairs", True, False), ("n-pairs", True, True),
                                                           ("2x2-pairs", True, False), ("m-pairs", False, False)])
def test_multicast_mma_assembles_for_sm_100a(name, multicast, commit_descs):
    compiled = _compiled(name, multicast, commit_descs)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    assert f".reqnctapercluster {CLUSTERS[name][0]}, 1, 1" in ptx
    copies = len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.cta_group::2\.shared::cluster\.global\.mbarrier::"
                            r"complete_tx::bytes\.multicast::cluster", ptx))
    assert copies == ({"m-pairs": 1, "n-pairs": 1, "2x2-pairs": 2}[name] if multicast else 0)
    assert "tcgen05.mma.cta_group::2.kind::f16" in ptx
    assert "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64" in ptx


@gluonkit.jit
def _bad_cluster(MODE: gl.constexpr):
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([512, 64], gl.float16, cga_layout=[[1, 0], [2, 0]])
    b_cga: gl.constexpr = [[0, 1], [0, 1]] if MODE == "b_moves" else [[0, 1], [0, 0]]
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 128], gl.float16, cga_layout=b_cga)
    a = gl.allocate_shared_memory(gl.float16, [512, 64], a_layout)
    b = gl.allocate_shared_memory(gl.float16, [64, 128], b_layout)
    acc_cga: gl.constexpr = [[2, 0], [1, 0]] if MODE == "pair_bit" else [[1, 0], [2, 0]]
    pairs: gl.constexpr = blackwell.TensorMemoryLayout((128, 128), 1, cga_layout=acc_cga, two_ctas=True)  # ERROR
    acc = blackwell.allocate_tensor_memory(gl.float32, [512, 128], pairs)  # ERROR num_ctas
    bar = blackwell.mbarrier.allocate_mbarrier()
    blackwell.tcgen05_mma(a, b, acc, mbarriers=[bar], multicast=True)  # ERROR b_moves


@pytest.mark.parametrize("mode, num_ctas, message", [
    ("b_moves", 4, "need cga_layout=[[1, 0], [2, 0]] and [[0, 1], [0, 0]]"),  # B must follow acc's bit 1 (or repeat)
    ("pair_bit", 4, "first basis is [1, 0]"),
    ("ok", 2, "num_ctas=4"),
])
def test_cluster_of_pairs_misuse_is_an_error_at_the_call(mode, num_ctas, message):
    with pytest.raises(CompilationError, match=re.escape(message)) as info:
        _bad_cluster.compile(MODE=mode, num_ctas=num_ctas, target="sm_100a")
    line = open(__file__).read().splitlines()[info.value.loc.line - 1]
    assert "# ERROR" in line


replicated_mma = gluonkit.jit(pair_kernels.replicated_mma_source(gl, blackwell))


@pytest.mark.parametrize("num_ctas, multicast", [(2, True), (4, True), (4, False)])
def test_one_cta_mmas_on_multicast_operands_in_the_interpreter(num_ctas, multicast):
    """cta_group::1 in a cluster: CTA 0 multicasts both operands, every CTA's commit reaches every CTA."""
    M, N, K, BM, BN = 256, 128, 96, 128, 64
    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    cga = [[0, 0]] * (num_ctas.bit_length() - 1)
    nvmma = gl.NVMMASharedLayout.get_default_for
    a_desc = TensorDescriptor(a, a.shape, [K, 1], [BM, BK], nvmma([BM, BK], gl.float16, cga_layout=cga))
    b_desc = TensorDescriptor(b, b.shape, [N, 1], [BK, BN], nvmma([BK, BN], gl.float16, cga_layout=cga))
    with interpreter_on():
        replicated_mma[(M // BM, N // BN)](a_desc, b_desc, c, N, K, multicast, len(cga), num_ctas=num_ctas)
    ref = np.zeros((M, N), np.float32)
    for k in range(0, K, BK):
        ref = (ref + a[:, k:k + BK].astype(np.float64) @ b[k:k + BK].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(c, ref)


@gluonkit.jit
def _b_on_a_cta_barrier(a_desc, b_desc, c_ptr, N, K):
    """A planted bug: B (multicast to both pairs) completes on a per-CTA barrier that each CTA waits
    on for itself, so the even CTA issues the pair's MMA knowing only that *its* share of B landed,
    not the odd CTA's (which a peer's multicast brings).  B must go to the pair barrier too."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    a_smem = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_type.shape, b_desc.layout)
    ready = blackwell.mbarrier.allocate_mbarrier(two_ctas=True)
    b_ready = blackwell.mbarrier.allocate_mbarrier()  # BUG: one per CTA, not the pair's
    done = blackwell.mbarrier.allocate_mbarrier()
    blackwell.mbarrier.init(ready, count=1)
    blackwell.mbarrier.init(b_ready, count=1)
    blackwell.mbarrier.init(done, count=blackwell.tcgen05_mma_barrier_count([a_smem, b_smem], True, True))
    tmem_layout: gl.constexpr = blackwell.TensorMemoryLayout((128, BN), col_stride=1, cga_layout=[[1, 0], [2, 0]],
                                                             two_ctas=True)
    acc = blackwell.allocate_tensor_memory(gl.float32, [BM, BN], tmem_layout)
    gl.barrier(cluster=True)
    blackwell.mbarrier.expect(ready, a_desc.nbytes_per_cta)
    blackwell.tma.async_load(a_desc, [0, 0], ready, a_smem)
    blackwell.mbarrier.expect(b_ready, b_desc.nbytes_per_cta)
    blackwell.tma.async_load(b_desc, [0, 0], b_ready, b_smem, multicast=True)  # LOAD
    blackwell.mbarrier.wait(ready, 0)
    blackwell.mbarrier.wait(b_ready, 0)
    blackwell.tcgen05_mma(a_smem, b_smem, acc, use_acc=False, mbarriers=[done], multicast=True)  # MMA
    blackwell.mbarrier.wait(done, 0)
    reg: gl.constexpr = acc.get_reg_layout()
    rows = gl.arange(0, BM, gl.SliceLayout(1, reg))
    cols = gl.arange(0, BN, gl.SliceLayout(0, reg))
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.load(reg))


def test_multicast_bytes_awaited_in_one_cta_of_the_pair_is_reported():
    """The pair's MMA reads the odd CTA's share of B, which only the odd CTA's own barrier tracks."""
    a = np.random.default_rng(1).standard_normal((512, BK)).astype(np.float16)
    b = np.random.default_rng(2).standard_normal((BK, 128)).astype(np.float16)
    a_layout, b_layout, _ = _layouts("m-pairs")
    a_desc = TensorDescriptor(a, a.shape, [BK, 1], [512, BK], a_layout)
    b_desc = TensorDescriptor(b, b.shape, [128, 1], [BK, 128], b_layout)
    # (reported as a race between the CTAs, or as the copy that may still be writing, by schedule)
    with interpreter_on(), pytest.raises(InterpreterError, match="race: tcgen05_mma|may still be writing") as info:
        _b_on_a_cta_barrier[(1,)](a_desc, b_desc, np.zeros((512, 128), np.float32), 128, BK, num_ctas=4)
    source = open(__file__).read().splitlines()
    assert source[info.value.loc.line - 1].rstrip().endswith("# MMA")
    load_line = next(i + 1 for i, s in enumerate(source) if s.rstrip().endswith("# LOAD"))
    assert f"line {load_line}" in str(info.value) or f":{load_line}:" in str(info.value)


# ------------------------------------------------------------------ block-scaled MMAs in clusters of pairs
multicast_mma_scaled = gluonkit.jit(pair_kernels.multicast_mma_scaled_source(gl, blackwell))

#: name -> (num_ctas, BM, BN, A's cga_layout, B's ([BN, BK], K-major), the accumulator's)
SCALED_CLUSTERS = {
    "m-pairs": (4, 512, 128, [[1, 0], [2, 0]], [[1, 0], [0, 0]], [[1, 0], [2, 0]]),  # B and its scales shared
    "n-pairs": (4, 256, 256, [[1, 0], [0, 0]], [[1, 0], [2, 0]], [[1, 0], [0, 1]]),  # A and its scales shared
    "2x2-pairs": (8, 512, 256, [[1, 0], [2, 0], [0, 0]], [[1, 0], [0, 0], [2, 0]], [[1, 0], [2, 0], [0, 1]]),
}
SCALED_BK = 128


def _scaled_args(name):
    """The layouts and constexprs of a cluster: A's scales move with A's rows, B's with the pair's columns."""
    num_ctas, BM, BN, a_cga, b_cga, acc_cga = SCALED_CLUSTERS[name]
    nvmma = gl.NVMMASharedLayout.get_default_for
    constexprs = {"ACC_CGA": gl.constexpr(acc_cga), "TMEM_BN": BN // (1 << sum(1 for v in acc_cga if v[1])),
                  "SA_CGA": gl.constexpr([[1, 0]] + [[r, 0] for r, _ in acc_cga[1:]]),
                  "SB_CGA": gl.constexpr([[0, 0]] + [[c, 0] for _, c in acc_cga[1:]])}
    return (nvmma([BM, SCALED_BK], gl.float8e4nv, cga_layout=a_cga),
            nvmma([BN, SCALED_BK], gl.float8e4nv, cga_layout=b_cga), constexprs)


@pytest.mark.parametrize("name", list(SCALED_CLUSTERS))
def test_block_scaled_mma_in_a_cluster_of_pairs_is_exact(name):
    num_ctas, BM, BN, *_ = SCALED_CLUSTERS[name]
    M, N = 2 * BM, BN  # two clusters along M
    rng = np.random.default_rng(BM + BN)
    a = (rng.standard_normal((M, SCALED_BK)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((N, SCALED_BK)) * 4).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(115, 140, (M, SCALED_BK // 32), dtype=np.uint8)
    sb = rng.integers(115, 140, (N, SCALED_BK // 32), dtype=np.uint8)
    c = np.full((M, N), np.nan, np.float32)
    a_layout, b_layout, constexprs = _scaled_args(name)
    with interpreter_on():
        multicast_mma_scaled[(M // BM, N // BN)](
            TensorDescriptor(a, a.shape, [SCALED_BK, 1], [BM, SCALED_BK], a_layout),
            TensorDescriptor(b, b.shape, [SCALED_BK, 1], [BN, SCALED_BK], b_layout), sa, sb, c, N, **constexprs,
            num_ctas=num_ctas)

    def scaled(x, s):
        return x.astype(np.float64) * np.repeat(np.ldexp(1.0, s.astype(np.int64) - 127), 32, axis=1)

    np.testing.assert_array_equal(c, (scaled(a, sa) @ scaled(b, sb).T).astype(np.float32))


def _compiled_scaled(name, **overrides):
    num_ctas, BM, BN, *_ = SCALED_CLUSTERS[name]
    a_layout, b_layout, constexprs = _scaled_args(name)
    return multicast_mma_scaled.compile(ir.TensorDescType((BM, SCALED_BK), ir.float8e4nv, a_layout),
                                        ir.TensorDescType((BN, SCALED_BK), ir.float8e4nv, b_layout), "*u8:16",
                                        "*u8:16", "*fp32:16", "i32", **{**constexprs, **overrides}, num_warps=4,
                                        num_ctas=num_ctas, target="sm_100a")


@needs_ptxas
@pytest.mark.parametrize("name", ["m-pairs", "2x2-pairs"])
def test_block_scaled_mma_in_a_cluster_assembles_for_sm_100a(name):
    compiled = _compiled_scaled(name)
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and compiled.metadata["spill_stores"] == 0
    assert ptx.count("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.block32") == SCALED_BK // 32
    assert "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64" in ptx


def test_block_scales_that_do_not_move_with_the_pairs_are_an_error_at_the_call():
    with pytest.raises(CompilationError, match=re.escape("a_scale must be in TensorMemoryScalesLayout(cga_layout="
                                                         "[[1, 0], [2, 0]])")) as info:
        _compiled_scaled("m-pairs", SA_CGA=gl.constexpr([[1, 0], [0, 0]]))
    assert "tcgen05_mma_scaled(" in str(info.value)
