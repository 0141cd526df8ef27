"""Kernels launched as CTA clusters (``num_ctas > 1``), shared by ``test_clusters.py`` (CPU:
interpreter, frontend, PTX) and ``test_gpu_clusters.py`` (the same kernels on the GPU).

Every tensor is replicated on each CTA of a cluster (zero ``cga_layout`` bases, as Gluon
requires for ``num_ctas=2``: ``[[0]]``); the CTAs differ only through routed mbarrier
arrivals, and rank 0 alone performs global stores and atomics.
"""

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import cluster, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor

BLOCK = 128


def replicated(num_ctas: int):
    """A 1-D blocked layout over 4 warps, replicated on each of ``num_ctas`` CTAs."""
    return gl.BlockedLayout([1], [32], [4], [0], [[0]] * (num_ctas.bit_length() - 1))


@gluonkit.jit
def cluster_ids(x_ptr, out_ptr, count_ptr, layout: gl.constexpr):
    """out[p] = x[p] * 2 + program id (axis 0) + 1000 * num_programs(0) + 100000 * num_ctas;
    count[p] += 1 once per program (an atomic: one CTA of the cluster performs it)."""
    pid = gl.program_id(0)
    offs = pid * 128 + gl.arange(0, 128, layout)
    cluster.barrier()
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, x * 2 + pid + 1000 * gl.num_programs(0) + 100000 * gl.num_ctas())
    gl.barrier(cluster=True)
    gl.atomic_add(count_ptr + pid, 1)  # ATOMIC
    cluster.barrier(relaxed=True)


@gluonkit.jit
def routed_arrivals(x_ptr, out_ptr, layout: gl.constexpr, FROM: gl.constexpr, COUNT: gl.constexpr,
                    ROUNDS: gl.constexpr, SYNC: gl.constexpr):
    """Each CTA's barrier expects COUNT arrivals per phase; every round, each CTA arrives
    routed by FROM (and expects 0 bytes, routed the same way), then waits for the phase.
    Any mask delivers each CTA one arrive and one expect per round (its sender is the CTA
    that agrees with it on the mask's bits and has zeros elsewhere), so COUNT=2 completes
    every phase and COUNT=3 never does.  Without SYNC (a cluster barrier ending each round)
    a sending CTA may run rounds ahead and complete phases of a receiver that has not waited
    for the earlier ones yet: the receiver then waits on a parity that has flipped past it."""
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=COUNT)
    cluster.barrier()  # every CTA's barrier is initialized before any arrives on it  # PUBLISH
    pid = gl.program_id(0)
    offs = pid * 128 + gl.arange(0, 128, layout)
    acc = gl.load(x_ptr + offs)
    for r in range(ROUNDS):
        mbarrier.arrive(bar, from_cta=FROM)  # ARRIVE
        mbarrier.expect(bar, 0, from_cta=FROM)
        mbarrier.wait(bar, r % 2)  # WAIT
        acc = acc * 3 + r
        if SYNC:
            cluster.barrier()  # no CTA arrives on a phase before every CTA has observed the previous one
    gl.store(out_ptr + offs, acc)
    cluster.barrier()  # no CTA invalidates a barrier others may still arrive on
    mbarrier.invalidate(bar)


@gluonkit.jit
def _signal(bar, FROM: gl.constexpr):
    """Worker partition of ``ws_cluster_signal``: one routed arrival (CTA 0's for ``FROM=0``: on every CTA)."""
    mbarrier.arrive(bar, from_cta=FROM)  # SIGNAL


@gluonkit.jit
def _receive(bar, x_ptr, out_ptr, layout: gl.constexpr):
    pid = gl.program_id(0)
    offs = pid * 128 + gl.arange(0, 128, layout)
    mbarrier.wait(bar, 0)  # RECEIVE
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) * 3 + 1)


@gluonkit.jit
def ws_cluster_signal(x_ptr, out_ptr, layout: gl.constexpr, FROM: gl.constexpr = 0, BEFORE: gl.constexpr = 2):
    """out = x * 3 + 1, after each CTA's default partition received one arrival routed by
    ``FROM`` from a one-warp worker partition (of CTA 0 for ``FROM=0``).  ``BEFORE`` cluster
    barriers come between the barrier's init and the fork, one after the join: on the GPU
    the parked worker warps must join the ones before the fork, or every warp hangs."""
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    for _ in gl.static_range(BEFORE):
        cluster.barrier()  # BEFORE_FORK
    gl.warp_specialize([(_receive, (bar, x_ptr, out_ptr, layout)), (_signal, (bar, FROM))], [1], [24])
    cluster.barrier()  # no CTA invalidates its barrier while another may still arrive on it
    mbarrier.invalidate(bar)


def routed_reference(x: np.ndarray, rounds: int) -> np.ndarray:
    acc = x.astype(np.int64)
    for r in range(rounds):
        acc = acc * 3 + r
    return acc.astype(x.dtype)



@gluonkit.jit
def multicast_sum(desc, out_ptr, layout: gl.constexpr, K_TILES: gl.constexpr, SYNC: gl.constexpr = True):
    """out[BM, BN] (of program p) = sum over k of the block (p * BM, k * BN) of the
    descriptor's tensor, each block loaded once per cluster by a multicast TMA copy
    (``SYNC=False`` drops the cluster barrier that protects the buffer: a race)."""
    BM: gl.constexpr = desc.block_type.shape[0]
    BN: gl.constexpr = desc.block_type.shape[1]
    smem = gl.allocate_shared_memory(desc.dtype, [BM, BN], desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    cluster.barrier()
    pid = gl.program_id(0)
    acc = gl.zeros([BM, BN], gl.float32, layout)
    for k in range(K_TILES):
        mbarrier.expect(bar, desc.nbytes_per_cta)  # this CTA's share: the whole block unless split
        tma.async_load(desc, [pid * BM, k * BN], bar, smem, multicast=True)  # MULTICAST
        mbarrier.wait(bar, k % 2)
        acc += smem.load(layout).to(gl.float32)
        if SYNC:
            cluster.barrier()  # every CTA has read the block before the next multicast overwrites it
    rows = gl.arange(0, BM, gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, gl.SliceLayout(0, layout))
    gl.store(out_ptr + (pid * BM + rows)[:, None] * BN + cols[None, :], acc)


def multicast_args(x: np.ndarray, num_ctas: int, BM=64, BN=64, split=False):
    """The descriptor (fp16 blocks [BM, BN], 128-byte swizzle) and blocked layout for multicast_sum.

    With ``split`` the block's rows are split between CTA-rank bit 0 and replicated over the other
    bits: CTAs 0 and 1 each multicast their half to the CTAs that differ from them in those bits."""
    cga = [[0, 0]] * (num_ctas.bit_length() - 1)
    if split:
        cga = [[1, 0]] + cga[1:]
    layout = gl.NVMMASharedLayout.get_default_for([BM, BN], gl.float16, cga_layout=cga or None)
    desc = TensorDescriptor.from_tensor(x, [BM, BN], layout)
    return desc, gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0], cga)


def multicast_reference(x: np.ndarray, BN=64) -> np.ndarray:
    """Each row block summed over its BN-wide column blocks (float64)."""
    m, k = x.shape
    return x.astype(np.float64).reshape(m, k // BN, BN).sum(axis=1)
