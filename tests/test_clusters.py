"""CTA clusters (``num_ctas > 1``) on the CPU: the interpreter runs a cluster's CTAs together
(routed mbarrier arrivals land on the other CTAs' barriers, cluster barriers wait for every
CTA, deadlocks name the CTAs), the frontend's checks, and the PTX for sm_90a and sm_100a
(ptxas assembles it).  ``test_gpu_clusters.py`` runs the same kernels on the GPU."""

import re

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret.errors import InterpreterError
from gluonkit.ir.diagnostics import CompilationError
from gluonkit.lang.errors import ArgumentError
from gluonkit.language.nvidia.hopper import cluster, mbarrier, warpgroup_mma

from cluster_kernels import (cluster_ids, multicast_args, multicast_reference, multicast_sum, replicated, routed_arrivals,
                             ws_cluster_signal,
                             routed_reference)
from hopper_cluster_kernels import multicast_wgmma_layouts, multicast_wgmma_source
from interpreting import interpreter_on
from kernel_checks import marked_line, needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]


@pytest.fixture
def rng():
    return np.random.default_rng(12)


def _ids_expected(x, grid, num_ctas):
    pid = np.repeat(np.arange(grid), 128)
    return x * 2 + pid + 1000 * grid + 100000 * num_ctas


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_cluster_program_ids_and_one_atomic_per_cluster(rng, num_ctas):
    grid = 3
    x = rng.integers(-1000, 1000, grid * 128).astype(np.int32)
    out = np.full_like(x, -7)
    count = np.zeros(grid, np.int32)
    with interpreter_on():
        cluster_ids[(grid,)](x, out, count, replicated(num_ctas), num_ctas=num_ctas)
    np.testing.assert_array_equal(out, _ids_expected(x, grid, num_ctas))
    np.testing.assert_array_equal(count, np.ones(grid, np.int32))


@pytest.mark.parametrize("num_ctas,mask", [(2, 0), (2, 1), (4, 0), (4, 1), (4, 2), (4, 3), (8, 5)])
def test_routed_arrivals_complete_each_phase(rng, num_ctas, mask):
    x = rng.integers(-50, 50, 2 * 128).astype(np.int32)
    out = np.zeros_like(x)
    with interpreter_on():
        routed_arrivals[(2,)](x, out, replicated(num_ctas), FROM=mask, COUNT=2, ROUNDS=3, SYNC=True,
                                num_ctas=num_ctas)
    np.testing.assert_array_equal(out, routed_reference(x, 3))


def test_a_missing_remote_arrival_is_a_deadlock_naming_each_cta():
    x = np.zeros(128, np.int32)
    with interpreter_on(), pytest.raises(InterpreterError) as info:
        routed_arrivals[(1,)](x, x, replicated(2), FROM=0, COUNT=3, ROUNDS=1, SYNC=True, num_ctas=2)
    text = str(info.value)
    assert f":{marked_line(routed_arrivals, 'WAIT')}:" in text
    assert "deadlock: every CTA of the cluster of program (0, 0, 0)" in text
    assert "CTA 0 waits here" in text and "CTA 1 waits here" in text
    assert "arrivals so far came from CTA 0" in text  # CTA 1's barrier got CTA 0's routed arrivals


def test_a_sender_running_phases_ahead_of_a_receiver_is_caught():
    x = np.zeros(128, np.int32)
    with interpreter_on(), pytest.raises(InterpreterError) as info:
        routed_arrivals[(1,)](x, x, replicated(2), FROM=0, COUNT=2, ROUNDS=3, SYNC=False, num_ctas=2)
    text = str(info.value)
    assert "deadlock: every CTA of the cluster" in text
    assert "CTA 1 waits here: mbarrier.wait at line" in text and "for parity 1" in text


@gluonkit.jit
def _arrive_before_peers_init(layout: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    mbarrier.arrive(bar, from_cta=0)  # EARLY
    mbarrier.wait(bar, 0)


def test_arriving_on_a_barrier_another_cta_has_not_initialized_says_to_add_a_cluster_barrier():
    with interpreter_on(), pytest.raises(InterpreterError) as info:
        _arrive_before_peers_init[(1,)](replicated(2), num_ctas=2)
    text = str(info.value)
    assert f":{marked_line(_arrive_before_peers_init, 'EARLY')}:" in text
    assert "CTA 1 has not allocated the shared buffer [1] x int64" in text
    assert "CTA 0 arrives on the barrier of CTA 1" in text and "cluster.barrier() must follow" in text


@gluonkit.jit
def _barrier_in_one_cta_only(out_ptr, layout: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    cluster.barrier()
    mbarrier.arrive(bar, from_cta=0)  # only CTA 0 arrives, on every CTA's barrier
    mbarrier.wait(bar, 0)
    cluster.barrier()
    mbarrier.arrive(bar, from_cta=0)
    mbarrier.wait(bar, 1)
    gl.store(out_ptr + gl.arange(0, 128, layout), gl.full([128], 5, gl.int32, layout))


def test_cluster_barriers_and_phases_agree_under_both_cta_orders():
    out = np.zeros(128, np.int32)
    with interpreter_on():
        _barrier_in_one_cta_only[(1,)](out, replicated(2), num_ctas=2)
    np.testing.assert_array_equal(out, np.full(128, 5, np.int32))


# ----------------------------------------------------------------------------- frontend
def test_zero_cga_bases_replicate_and_splitting_ones_split():
    assert gl.BlockedLayout([1], [32], [4], [0], [[0]]) == gl.BlockedLayout([1], [32], [4], [0])
    split = gl.BlockedLayout([1], [32], [4], [0], [[1]])
    assert split != gl.BlockedLayout([1], [32], [4], [0])
    assert split.to_linear_layout([512]).bases["block"] == [[256]]  # CTA 1 holds the upper half
    acc = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16], [[1, 0]])  # a Hopper multicast GEMM's
    assert acc.to_linear_layout([128, 64]).bases["block"] == [[64, 0]]  # CTA 1 holds the lower 64 rows
    one_cta = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16]).to_linear_layout([64, 64])
    assert all(acc.to_linear_layout([128, 64]).bases[d] == one_cta.bases[d] for d in ("register", "lane", "warp"))
    with pytest.raises(ValueError, match=r"only version \[3, 0\] \(Hopper wgmma\) supports"):
        gl.NVMMADistributedLayout([2, 0], [4, 1], [16, 8], [[1, 0]])


@gluonkit.jit
def _bad_mask(layout: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    mbarrier.arrive(bar, from_cta=2)  # MASK


def test_from_cta_must_be_a_mask_below_num_ctas():
    with pytest.raises(CompilationError, match=r"from_cta is a mask of CTA-rank bits in \[0, num_ctas - 1\] = "
                                               r"\[0, 1\] \(the kernel runs with num_ctas=2\), got 2") as info:
        _bad_mask.compile(target="sm_90a", num_ctas=2, layout=replicated(2))
    assert f":{marked_line(_bad_mask, 'MASK')}:" in str(info.value)


def test_an_atomic_whose_result_is_used_in_a_cluster_is_refused():
    @gluonkit.jit
    def used(p_ptr, out_ptr):
        old = gl.atomic_add(p_ptr, 1)  # USED
        gl.store(out_ptr, old)

    with pytest.raises(CompilationError, match="performed once, by CTA rank 0") as info:
        used.compile("*i32", "*i32", target="sm_90a", num_ctas=2)
    assert f":{marked_line(used, 'USED')}:" in str(info.value)


def test_num_ctas_reaches_the_ir_text():
    func = cluster_ids.build_ir([gl.pointer_type(gl.int32)] * 3, {"layout": replicated(2)}, 4, {}, num_ctas=2)
    assert "num_warps=4 num_ctas=2" in gluonkit.ir.print_function(func)


def test_bad_num_ctas():
    with pytest.raises(ArgumentError, match="num_ctas must be a positive power of two"):
        cluster_ids.compile("*i32", "*i32", "*i32", target="sm_90a", num_ctas=6, layout=replicated(2))


# ----------------------------------------------------------------------------- PTX
def _lines(ptx: str, *words):
    return [line.strip() for line in ptx.splitlines() if any(w in line for w in words)]


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_cluster_ptx_assembles_and_shapes_the_launch(target):
    c = cluster_ids.compile("*i32", "*i32", "*i32", target=target, num_ctas=4, layout=replicated(4))
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm and c.metadata["num_ctas"] == 4
    assert ".explicitcluster" in ptx and ".reqnctapercluster 4, 1, 1" in ptx
    assert "shr.u32" in "\n".join(_lines(ptx, "shr.u32"))  # program_id(0) = ctaid.x >> 2, as Triton 3.9 does
    assert "%cluster_ctarank" in ptx  # stores and the atomic are left to rank 0
    arrives = _lines(ptx, "barrier.cluster.arrive")
    assert arrives.count("barrier.cluster.arrive.relaxed.aligned;") == 1
    assert arrives.count("barrier.cluster.arrive.aligned;") == 3  # two in the source, one before ret
    assert len(_lines(ptx, "barrier.cluster.wait.aligned")) == 4


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_routed_arrivals_use_mapa_and_cluster_scope(target):
    c = routed_arrivals.compile("*i32", "*i32", target=target, num_ctas=4, layout=replicated(4), FROM=1, COUNT=2,
                                ROUNDS=1, SYNC=True)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    assert "fence.mbarrier_init.release.cluster;" in ptx
    # mask 1 of 4 CTAs: each sender (ranks 0, 1) arrives on itself and on rank | 2
    assert len(_lines(ptx, "mapa.shared::cluster.u32")) == 4
    assert len(_lines(ptx, "mbarrier.arrive.shared::cluster.b64 _, [remote]")) == 2
    assert len(_lines(ptx, "mbarrier.arrive.expect_tx.shared::cluster.b64 _, [remote]")) == 2


@needs_ptxas
@pytest.mark.parametrize("num_ctas, before", [(1, 1), (2, 2), (4, 3)])
def test_worker_warps_join_the_cluster_barriers_before_the_fork(num_ctas, before):
    # barrier.cluster waits for every non-exited thread of the cluster, the parked workers'
    # too: their chain (after setmaxnreg.dec) passes as many before the fork (barrier.sync 1)
    # as the kernel's warps, or both sides wait for each other forever (the H100 hang of the
    # CLUSTER_M=2 WS GEMM, 2026-11-25).  After the join the workers return.
    c = ws_cluster_signal.compile("*i32", "*i32", target="sm_90a", num_ctas=num_ctas, layout=replicated(num_ctas),
                                  BEFORE=before)
    assert "cubin" in c.asm
    lines = [line.strip() for line in c.asm["ptx"].splitlines()]
    workers = next(i for i, line in enumerate(lines) if line.startswith("setmaxnreg.dec"))
    fork = next(i for i in range(workers, len(lines)) if lines[i].startswith("barrier.sync 1,"))
    assert lines[workers:fork].count("barrier.cluster.arrive.aligned;") == before
    assert lines[workers:fork].count("barrier.cluster.wait.aligned;") == before
    after = 1 + (num_ctas > 1)  # the source's, and the one before ret
    assert lines.count("barrier.cluster.arrive.aligned;") == 2 * before + after


@pytest.mark.parametrize("num_ctas, mask", [(1, 0), (2, 0), (4, 0), (4, 1)])
def test_a_worker_partition_signals_every_cta_in_the_interpreter(rng, num_ctas, mask):
    x = rng.integers(-1000, 1000, 2 * 128).astype(np.int32)
    out = np.zeros_like(x)
    with interpreter_on():
        ws_cluster_signal[(2,)](x, out, replicated(num_ctas), FROM=mask, num_ctas=num_ctas)
    np.testing.assert_array_equal(out, x * 3 + 1)


@gluonkit.jit
def _wait_partition(bar):
    mbarrier.wait(bar, 0)


@gluonkit.jit
def _arrive_partition(bar):
    mbarrier.arrive(bar)


@gluonkit.jit
def _cluster_barrier_in_a_branch_before_the_fork(x_ptr, n):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    if n > 0:
        cluster.barrier()  # IN_BRANCH
    gl.warp_specialize([(_wait_partition, (bar,)), (_arrive_partition, (bar,))], [1], [24])
    mbarrier.invalidate(bar)


def test_a_cluster_barrier_under_a_branch_before_a_fork_is_refused_at_its_line():
    # The workers join the cluster barriers before the fork by number; a runtime branch makes it unknown.
    with pytest.raises(CompilationError, match="must be at the kernel's top level") as info:
        _cluster_barrier_in_a_branch_before_the_fork.compile("*i32", "i32", target="sm_90a", num_ctas=2)
    assert f":{marked_line(_cluster_barrier_in_a_branch_before_the_fork, 'IN_BRANCH')}:" in str(info.value)


def test_one_cta_kernels_have_no_cluster_shape_and_no_rank_masks():
    ptx = cluster_ids.compile("*i32", "*i32", "*i32", target="sm_90a", layout=replicated(1)).asm["ptx"]
    assert "reqnctapercluster" not in ptx and "ctarank" not in ptx and "%ctaid.x" in ptx
    # the two cluster.barrier() (of a one-CTA cluster); gl.barrier(cluster=True) is bar.sync there, as in Gluon;
    # none is added before ret
    assert len(_lines(ptx, "barrier.cluster.wait")) == 2


# ----------------------------------------------------------------------------- TMA multicast
@pytest.mark.parametrize("num_ctas, split", [(2, False), (4, False), (4, True), (8, True)])
def test_multicast_tma_reduction_over_a_cluster(rng, num_ctas, split):
    x = rng.standard_normal((128, 256)).astype(np.float16)
    out = np.zeros((128, 64), np.float32)
    desc, layout = multicast_args(x, num_ctas, split=split)
    with interpreter_on():
        multicast_sum[(2,)](desc, out, layout, K_TILES=4, num_ctas=num_ctas)
    np.testing.assert_allclose(out, multicast_reference(x), rtol=1e-5, atol=1e-5)


def test_a_multicast_into_a_buffer_another_cta_still_reads_is_a_race(rng):
    # CTA 0 alone issues the multicast, at its own pace: without the cluster barrier its next
    # block lands in CTA 1's buffer while the previous one may still be landing there, unread.
    x = rng.standard_normal((128, 256)).astype(np.float16)
    desc, layout = multicast_args(x, 2)
    line = marked_line(multicast_sum, "MULTICAST")
    with interpreter_on(), pytest.raises(InterpreterError, match=f"copies into the shared buffer .* while the TMA "
                                                                 f"load issued at line {line} may still be writing it"):
        multicast_sum[(1,)](desc, np.zeros((128, 64), np.float32), layout, K_TILES=2, SYNC=False, num_ctas=2)


def test_wgmma_on_rows_split_between_ctas_with_b_multicast(rng):
    from gluonkit.language.nvidia import hopper
    from gluonkit.nvidia.hopper import TensorDescriptor

    kernel = gluonkit.jit(multicast_wgmma_source(gl, hopper))
    a = rng.standard_normal((128, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    c = np.full((128, 64), np.nan, np.float16)
    a_layout, b_layout, c_layout, acc = multicast_wgmma_layouts(gl, gl.float16, 128, 64, 32)
    descs = [TensorDescriptor.from_tensor(x, list(x.shape), layout)
             for x, layout in ((a, a_layout), (b, b_layout), (c, c_layout))]
    with interpreter_on():
        kernel[(1,)](*descs, acc, num_ctas=2)  # each CTA stores its 64 rows of C
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-3, atol=2e-2)


@gluonkit.jit
def _split_mma(a_layout: gl.constexpr, b_layout: gl.constexpr, acc_layout: gl.constexpr):
    a = gl.allocate_shared_memory(gl.float16, [128, 64], a_layout)
    b = gl.allocate_shared_memory(gl.float16, [64, 64], b_layout)
    warpgroup_mma(a, b, gl.zeros([128, 64], gl.float32, acc_layout))


@needs_ptxas
def test_wgmma_operands_must_be_split_as_the_accumulator():
    rows = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 64, 16], [[1, 0]])  # CTA r: rows 64 r ...
    split_a = gl.NVMMASharedLayout.get_default_for([128, 64], gl.float16, cga_layout=[[1, 0]])
    whole = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16)
    ok = _split_mma.compile(a_layout=split_a, b_layout=whole, acc_layout=rows, num_ctas=2, target="sm_90a")
    assert len(_lines(ok.asm["ptx"], "wgmma.mma_async.sync.aligned.m64n64k16")) == 4  # each CTA: its 64 rows
    with pytest.raises(CompilationError, match=r"a's cga_layout \[\[0, 0\]\] does not match the accumulator's "
                                               r"\[\[1, 0\]\]"):
        _split_mma.compile(a_layout=whole, b_layout=whole, acc_layout=rows, num_ctas=2, target="sm_90a")


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_multicast_copies_are_issued_by_rank_0_for_every_cta(target):
    x = np.zeros((128, 256), np.float16)
    desc, layout = multicast_args(x, 4)
    c = multicast_sum.compile(desc, "*fp32", target=target, num_ctas=4, layout=layout, K_TILES=2)
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    copies = _lines(ptx, "cp.async.bulk.tensor.2d")
    assert copies and all("mbarrier::complete_tx::bytes.multicast::cluster" in line for line in copies)
    for line in copies:  # the CTA mask, a constant: all 4 CTAs, 0b1111 (however often LLVM unrolls the loop)
        mask = re.search(r", (%rs\d+);$", line).group(1)
        assert re.search(rf"mov\.b16\s+{mask}, 15;", ptx), line


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_multicast_of_a_split_block_is_issued_per_class_of_replicas(target):
    """Rows split over CTA bit 0, replicated over bit 1: CTAs 0 and 1 (no replicated bit) each copy
    their half to themselves and the CTA two ranks up, ``ctaMask = 0b0101 << (rank & 1)``."""
    x = np.zeros((128, 256), np.float16)
    desc, layout = multicast_args(x, 4, split=True)
    ptx = multicast_sum.compile(desc, "*fp32", target=target, num_ctas=4, layout=layout, K_TILES=2).asm["ptx"]
    copies = _lines(ptx, "cp.async.bulk.tensor.2d")
    assert copies and all("mbarrier::complete_tx::bytes.multicast::cluster" in line for line in copies)
    rank = re.search(r"mov\.u32\s+(%r\d+), %cluster_ctarank;", ptx).group(1)
    # the issuers: rank bit 1 clear (O3 wrote it rank < 2)
    assert re.search(rf"and\.b32\s+%r\d+, {rank}, 2;", ptx) or re.search(rf"setp\.lt\.u32\s+%p\d+, {rank}, 2;", ptx)
    assert re.search(r"mov\.b16\s+%rs\d+, 5;", ptx) and re.search(rf"and\.b32\s+%r\d+, {rank}, 1;", ptx)


def test_multicast_with_one_cta_is_the_plain_copy():
    x = np.zeros((128, 256), np.float16)
    desc, layout = multicast_args(x, 1)
    ptx = multicast_sum.compile(desc, "*fp32", target="sm_90a", layout=layout, K_TILES=2).asm["ptx"]
    assert "multicast::cluster" not in ptx and "cp.async.bulk.tensor.2d" in ptx


@gluonkit.jit
def _cluster_fence():
    gluonkit.language.nvidia.hopper.fence_async_shared(cluster=True)
    gluonkit.language.nvidia.hopper.fence_async_shared()


@needs_ptxas
def test_fence_async_shared_at_cluster_scope():
    ptx = _cluster_fence.compile(target="sm_90a", num_ctas=2).asm["ptx"]
    assert _lines(ptx, "fence.proxy.async") == ["fence.proxy.async.shared::cluster;", "fence.proxy.async.shared::cta;"]
    with interpreter_on():
        _cluster_fence[(1,)](num_ctas=2)


@gluonkit.jit
def _cluster_barrier_in_a_partition_body():
    cluster.barrier()  # IN_PARTITION


@gluonkit.jit
def _cluster_barrier_in_a_partition():
    gl.warp_specialize([(_cluster_barrier_in_a_partition_body, ()), (_cluster_barrier_in_a_partition_body, ())], [1])


def test_a_cluster_barrier_inside_a_partition_is_refused():
    with pytest.raises(CompilationError, match="inside a warp_specialize partition") as info:
        _cluster_barrier_in_a_partition.compile(target="sm_90a", num_ctas=2)
    assert f":{marked_line(_cluster_barrier_in_a_partition_body, 'IN_PARTITION')}:" in str(info.value)
