"""Reductions along an axis split between the CTAs of a cluster (``cga_layout``): the interpreter
against float64 numpy for 2 and 4 CTAs (sums, maxima, 2-D tiles, a two-operand argmax, a row
softmax), the PTX for sm_90a and sm_100a (ptxas assembles it: partials through distributed
shared memory between cluster barriers), and the refusal inside a partition; likewise layout
conversions between different ``cga_layout``.  The GPU runs the
same kernels in ``tests/test_gpu_cta_reduce.py``."""

import re

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret.errors import InterpreterError
from gluonkit.ir.diagnostics import CompilationError

from cta_reduce_kernels import (CONVERSIONS, convert_tile, row_softmax, row_softmax_reference, row_sums_in_a_loop,
                                row_sums_in_a_loop_reference, split_1d, split_2d, tile_sum_max, tile_sum_max_reference,
                                vector_argmax, vector_sum_max, vector_sum_max_reference)
from cluster_kernels import multicast_args, multicast_reference
from gluonkit.language.nvidia.hopper import cluster, mbarrier, tma
from interpreting import interpreter_on
from kernel_checks import marked_line, needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]


@pytest.fixture
def rng():
    return np.random.default_rng(14)


@pytest.mark.parametrize("num_ctas", [2, 4])
@pytest.mark.parametrize("num_warps", [1, 4])
def test_vector_sum_and_max_over_the_cluster(rng, num_ctas, num_warps):
    n = 4 * 32 * num_warps * num_ctas * 2  # two registers' worth of chunks per thread
    x = rng.standard_normal((3, n)).astype(np.float32)
    out = np.full(6, np.nan, np.float32)
    with interpreter_on():
        vector_sum_max[(3,)](x, out, n, split_1d(num_ctas, num_warps), num_warps=num_warps, num_ctas=num_ctas)
    ref = vector_sum_max_reference(x)
    np.testing.assert_array_equal(out[1::2], ref[1::2])  # the max is exact
    np.testing.assert_allclose(out[0::2], ref[0::2], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_a_row_smaller_than_the_layout_tile(rng, num_ctas):
    """64 elements per CTA under a 512-element tile: lanes and warps hold copies, counted once."""
    n = 64 * num_ctas
    x = rng.standard_normal((2, n)).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    with interpreter_on():
        vector_sum_max[(2,)](x, out, n, split_1d(num_ctas), num_ctas=num_ctas)
    ref = vector_sum_max_reference(x)
    np.testing.assert_array_equal(out[1::2], ref[1::2])
    np.testing.assert_allclose(out[0::2], ref[0::2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("num_ctas, cga, axis", [
    (2, [[0, 1]], 1),             # columns over 2 CTAs, row sums cross CTAs and warps
    (4, [[0, 1], [0, 2]], 1),     # columns over 4 CTAs
    (4, [[1, 0], [0, 1]], 1),     # rows over bit 0 (kept), columns over bit 1: pairs of CTAs combine
    (4, [[0, 1], [1, 0]], 0),     # column sums: rows over bit 1
    (2, [[1, 0]], 1),             # rows split, the axis whole in each CTA: no exchange
    (4, [[0, 0], [0, 1]], 1),     # columns over bit 1, replicated over bit 0
])
def test_tile_reductions_along_a_split_axis(rng, num_ctas, cga, axis):
    m, n = 32, 256
    x = rng.standard_normal((m, n)).astype(np.float32)
    out = np.full((m, n)[1 - axis] * 2, np.nan, np.float32)
    with interpreter_on():
        tile_sum_max[(1,)](x, out, m, n, split_2d(cga), axis, num_ctas=num_ctas)
    ref = tile_sum_max_reference(x, axis)
    half = len(out) // 2
    np.testing.assert_array_equal(out[half:], ref[half:])
    np.testing.assert_allclose(out[:half], ref[:half], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_a_two_operand_argmax_over_the_cluster(rng, num_ctas):
    n = 1024
    x = rng.integers(-20, 20, (4, n)).astype(np.float32)  # ties: the first index must win
    x[1, 3] = x[1, n - 5] = 99.0  # a tie across the two halves
    values = np.full(4, np.nan, np.float32)
    index = np.full(4, -1, np.int32)
    with interpreter_on():
        vector_argmax[(4,)](x, values, index, n, split_1d(num_ctas), num_ctas=num_ctas)
    np.testing.assert_array_equal(values, x.max(1))
    np.testing.assert_array_equal(index, x.argmax(1))
    assert index[1] == 3


@pytest.mark.parametrize("num_ctas", [2, 4, 16])
def test_row_softmax_over_the_cluster(rng, num_ctas):
    n = 1024 * num_ctas
    x = (3 * rng.standard_normal((3, n))).astype(np.float32)
    y = np.full_like(x, np.nan)
    with interpreter_on():
        row_softmax[(3,)](x, y, n, split_1d(num_ctas), num_ctas=num_ctas)
    np.testing.assert_allclose(y, row_softmax_reference(x), rtol=1e-5, atol=1e-9)


# ----------------------------------------------------------------------------- PTX
def _lines(ptx: str, word: str):
    return [line.strip() for line in ptx.splitlines() if word in line]


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("num_ctas", [2, 4])
def test_partials_cross_ctas_through_distributed_shared_memory(target, num_ctas):
    c = vector_sum_max.compile("*fp32:16", "*fp32:16", N=4096, layout=split_1d(num_ctas), num_ctas=num_ctas,
                               target=target)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    # per reduce: store, cluster barrier, one remote load per CTA of the group, cluster barrier
    assert len(_lines(ptx, "mapa.shared::cluster.u32")) == 2 * num_ctas
    assert len(_lines(ptx, "ld.shared::cluster.b32")) == 2 * num_ctas
    assert len(_lines(ptx, "barrier.cluster.arrive.aligned;")) == 2 * 2 + 1  # and one before ret
    assert len(_lines(ptx, "barrier.cluster.wait.aligned;")) == 2 * 2 + 1


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_exchanges_in_a_loop_and_under_a_branch(rng, num_ctas):
    x = rng.standard_normal((5, 2048)).astype(np.float32)
    out = np.full(5, np.nan, np.float32)
    with interpreter_on():
        row_sums_in_a_loop[(1,)](x, out, 5, 2048, split_1d(num_ctas), num_ctas=num_ctas)
    np.testing.assert_allclose(out, row_sums_in_a_loop_reference(x), rtol=1e-5, atol=1e-4)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_the_deferred_cluster_wait_stays_in_its_block(target):
    """Each exchange arrives after its reads and waits later, but within its own block: the
    loop body's and the branch's waits come before the block's end, so every thread alternates
    arrive and wait on every path."""
    c = row_sums_in_a_loop.compile("*fp32:16", "*fp32:16", ROWS=5, N=2048, layout=split_1d(2), num_ctas=2,
                                   target=target)
    assert "cubin" in c.asm
    ptx = c.asm["ptx"]
    body = [line.strip() for line in ptx.splitlines()
            if "barrier.cluster" in line or re.match(r"(@%p\d+ )?bra\b|\$L__BB|ret;", line.strip())]
    pending = False
    for line in body:  # straight-line PTX between labels and branches: arrive and wait alternate
        if line.startswith("barrier.cluster.arrive"):
            assert not pending, body
            pending = True
        elif line.startswith("barrier.cluster.wait"):
            assert pending, body
            pending = False
        else:
            assert not pending, f"a pending cluster wait crosses {line!r}: {body}"
    assert len(_lines(ptx, "barrier.cluster.arrive.aligned;")) == 4 + 1  # 2 exchanges x 2, and before ret
    assert sum(line.endswith(":") for line in body) >= 2 and any("bra" in line for line in body)  # a loop, a branch


@needs_ptxas
def test_each_operand_of_a_multi_operand_reduce_crosses_ctas():
    ptx = vector_argmax.compile("*fp32:16", "*fp32:16", "*i32:16", N=1024, layout=split_1d(2), num_ctas=2,
                                target="sm_90a").asm["ptx"]
    assert len(_lines(ptx, "ld.shared::cluster.b32")) == 2 * 2  # value and index, from 2 CTAs


@needs_ptxas
def test_pairs_of_ctas_combine_only_with_each_other():
    """Rows over bit 0, columns over bit 1 of 4 CTAs: each row sum reads 2 CTAs (rank & ~2 | 0, | 2)."""
    c = tile_sum_max.compile("*fp32:16", "*fp32:16", M=32, N=256, layout=split_2d([[1, 0], [0, 1]]), AXIS=1,
                             num_ctas=4, target="sm_90a")
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    registers = len(_lines(ptx, "mapa.shared::cluster.u32")) // 2 // 2  # 2 reduces, 2 CTAs each
    assert registers >= 1 and len(_lines(ptx, "ld.shared::cluster.b32")) == 2 * 2 * registers
    rank = re.search(r"mov\.u32\s+(%r\d+), %cluster_ctarank;", ptx).group(1)
    # the group's ranks: rank & ~2 (LLVM knows rank < 4: rank & 1) and rank | 2
    assert re.search(rf"and\.b32\s+%r\d+, {rank}, 1;", ptx) and re.search(rf"or\.b32\s+%r\d+, {rank}, 2;", ptx)


def test_an_axis_whole_in_each_cta_needs_no_exchange():
    ptx = tile_sum_max.compile("*fp32:16", "*fp32:16", M=32, N=256, layout=split_2d([[1, 0]]), AXIS=1,
                               num_ctas=2, target="sm_90a").asm["ptx"]
    assert "shared::cluster" not in ptx and len(_lines(ptx, "barrier.cluster.arrive")) == 1


@gluonkit.jit
def _sum_in_partition(x_ptr, out_ptr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0], [[1]])
    gl.store(out_ptr, gl.sum(gl.load(x_ptr + gl.arange(0, 64, layout)), axis=0))  # IN_PARTITION


@gluonkit.jit
def _reduce_in_a_partition(x_ptr, out_ptr):
    gl.warp_specialize([(_sum_in_partition, (x_ptr, out_ptr)), (_sum_in_partition, (x_ptr, out_ptr))], [1])


def test_a_cross_cta_reduce_inside_a_partition_is_refused():
    with pytest.raises(CompilationError, match="inside a warp_specialize partition") as info:
        _reduce_in_a_partition.compile("*fp32:16", "*fp32:16", num_warps=1, num_ctas=2, target="sm_90a")
    assert f":{marked_line(_sum_in_partition, 'IN_PARTITION')}:" in str(info.value)
    assert "cga_layout splits the axis" in str(info.value)


# ----------------------------------------------------------------------------- conversions between CTAs
@pytest.mark.parametrize("case", range(len(CONVERSIONS)))
def test_conversions_between_cga_layouts(rng, case):
    num_ctas, src, dst = CONVERSIONS[case]
    x = rng.standard_normal((64, 128)).astype(np.float32)
    y = np.full_like(x, np.nan)
    with interpreter_on():
        convert_tile[(1,)](x, y, 64, 128, src, dst, num_ctas=num_ctas)
    np.testing.assert_array_equal(y, x * 2 + 1)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(CONVERSIONS)))
def test_a_conversion_between_ctas_reads_each_register_from_its_owner(target, case):
    num_ctas, src, dst = CONVERSIONS[case]
    c = convert_tile.compile("*fp32:16", "*fp32:16", M=64, N=128, SRC=src, DST=dst, num_ctas=num_ctas, target=target)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    registers = dst.to_linear_layout([64, 128]).in_dim_size("register")  # the destination's, per thread
    assert len(_lines(ptx, "ld.shared::cluster.b32")) == registers
    assert len(_lines(ptx, "barrier.cluster.arrive.aligned;")) == 2 + 1


@gluonkit.jit
def _store_partition(value, out_ptr):
    gl.store(out_ptr, value)


@gluonkit.jit
def _idle_partition(out_ptr):
    pass


@gluonkit.jit
def _reduce_before_a_fork(x_ptr, out_ptr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0], [[1]])
    total = gl.sum(gl.load(x_ptr + gl.arange(0, 64, layout)), axis=0)  # BEFORE_FORK
    gl.warp_specialize([(_store_partition, (total, out_ptr)), (_idle_partition, (out_ptr,))], [1])


def test_a_cross_cta_reduce_in_a_kernel_with_warp_specialize_is_refused():
    # Outside partitions the workers' warps are parked at the fork and would never reach the
    # exchange's cluster barriers (they join only cluster.barrier(), counted at compile time).
    with pytest.raises(CompilationError, match="in a kernel with warp_specialize") as info:
        _reduce_before_a_fork.compile("*fp32:16", "*fp32:16", num_warps=1, num_ctas=2, target="sm_90a")
    assert f":{marked_line(_reduce_before_a_fork, 'BEFORE_FORK')}:" in str(info.value)


@gluonkit.jit
def _convert_in_partition(x_ptr):
    a: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0], [[1]])
    b: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0], [[0]])
    gl.convert_layout(gl.load(x_ptr + gl.arange(0, 64, a)), b)  # IN_PARTITION


@gluonkit.jit
def _conversion_in_a_partition(x_ptr):
    gl.warp_specialize([(_convert_in_partition, (x_ptr,)), (_convert_in_partition, (x_ptr,))], [1])


def test_a_conversion_between_ctas_inside_a_partition_is_refused():
    with pytest.raises(CompilationError, match="inside a warp_specialize partition") as info:
        _conversion_in_a_partition.compile("*fp32:16", num_warps=1, num_ctas=2, target="sm_90a")
    assert f":{marked_line(_convert_in_partition, 'IN_PARTITION')}:" in str(info.value)


@gluonkit.jit
def _scan_over_the_cluster(x_ptr, y_ptr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0], [[1]])
    offs = gl.arange(0, 1024, layout)
    gl.store(y_ptr + offs, gl.cumsum(gl.load(x_ptr + offs), axis=0))


def test_a_scan_along_a_split_axis_is_refused_in_both():
    with pytest.raises(CompilationError, match="scans across the CTAs of a cluster are not built"):
        _scan_over_the_cluster.compile("*fp32:16", "*fp32:16", num_ctas=2, target="sm_90a")
    x = np.ones(1024, np.float32)
    with interpreter_on(), pytest.raises(InterpreterError, match="scans across the CTAs of a cluster are not built"):
        _scan_over_the_cluster[(1,)](x, np.zeros_like(x), num_ctas=2)



@gluonkit.jit
def _multicast_then_reduce(desc, out_ptr, v_ptr, layout: gl.constexpr, vec: gl.constexpr, N: gl.constexpr,
                           K_TILES: gl.constexpr, SYNC: gl.constexpr):
    """cluster_kernels.multicast_sum with the cluster barrier after each read replaced by a reduction
    across the CTAs (SYNC) or by nothing: the exchange orders every CTA's read before CTA 0's next
    multicast into that buffer."""
    BM: gl.constexpr = desc.block_type.shape[0]
    BN: gl.constexpr = desc.block_type.shape[1]
    smem = gl.allocate_shared_memory(desc.dtype, [BM, BN], desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    cluster.barrier()
    acc = gl.zeros([BM, BN], gl.float32, layout)
    total = gl.to_tensor(0.0)
    for k in range(K_TILES):
        mbarrier.expect(bar, desc.nbytes_per_cta)
        tma.async_load(desc, [0, k * BN], bar, smem, multicast=True)  # MULTICAST
        mbarrier.wait(bar, k % 2)
        acc += smem.load(layout).to(gl.float32)
        if SYNC:
            total += gl.sum(gl.load(v_ptr + k * N + gl.arange(0, N, vec)), axis=0)
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    gl.store(out_ptr + rows[:, None] * BN + cols[None, :], acc)
    gl.store(out_ptr + BM * BN, total)


@pytest.mark.parametrize("sync", [True, False])
def test_the_exchange_orders_the_ctas_like_a_cluster_barrier(rng, sync):
    x = rng.standard_normal((64, 256)).astype(np.float16)
    v = rng.standard_normal((4, 1024)).astype(np.float32)
    out = np.zeros(64 * 64 + 1, np.float32)
    desc, layout = multicast_args(x, 2)
    run = lambda: _multicast_then_reduce[(1,)](desc, out, v, layout, split_1d(2), 1024, 4, sync,  # noqa: E731
                                               num_ctas=2)
    if not sync:
        # CTA 0 runs ahead: its next multicast lands in CTA 1's buffer while CTA 1 may still use it
        with interpreter_on(), pytest.raises(InterpreterError, match="may still") as info:
            run()
        assert f":{marked_line(_multicast_then_reduce, 'MULTICAST')}:" in str(info.value)
        return
    with interpreter_on():
        run()
    np.testing.assert_allclose(out[:-1].reshape(64, 64), multicast_reference(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[-1], v.astype(np.float64).sum(), rtol=1e-5)
