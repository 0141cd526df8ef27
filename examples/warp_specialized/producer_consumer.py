"""Warp specialization, smallest form: a TMA load partition feeds a compute partition through an mbarrier ring.

``y = x * x + 1`` on an ``M × N`` fp16 matrix, fp32 out, one ``BM × N`` row tile at a time.
Each program walks the tiles ``pid, pid + num_programs, …`` with two partitions:

* a **load partition** (one worker warp, 24 registers per thread) copies each tile with TMA
  into the next of ``STAGES`` shared-memory buffers;
* the **compute partition** (the default one: the kernel's warps) reads a buffer, hands it
  back, computes, and writes the result with a TMA store.

Two mbarriers per stage carry the protocol.  ``ready[s]`` completes when the tile in
buffer ``s`` has landed (the loader's ``expect`` plus the copy's bytes); ``empty[s]`` when
the compute partition has finished reading buffer ``s``.  Both partitions count the
ring's laps: in lap ``j`` the compute partition waits for parity ``j & 1`` of ``ready[s]``,
and the loader waits for parity ``(j & 1) ^ 1`` of ``empty[s]`` — on a fresh barrier that
phase counts as already complete, so the first lap starts without waiting.  Before arriving
on ``empty[s]`` the compute partition's warps meet at ``gl.thread_barrier()`` (a named
barrier over that partition's threads only), so no thread still reads the buffer when
the loader may refill it.

Run: ``python examples/warp_specialized/producer_consumer.py`` (GPU if present, else the
CPU interpreter, which tries several interleavings of the partitions).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor


@gluonkit.jit
def _load_partition(x_desc, bufs, ready, empty, my_tiles, STAGES: gl.constexpr):
    BM: gl.constexpr = x_desc.block_type.shape[0]
    for i in range(my_tiles):
        tile = gl.program_id(0) + i * gl.num_programs(0)
        stage = i % STAGES
        lap = i // STAGES
        mbarrier.wait(empty.index(stage), (lap & 1) ^ 1)
        mbarrier.expect(ready.index(stage), x_desc.block_type.nbytes)
        tma.async_load(x_desc, [tile * BM, 0], ready.index(stage), bufs.index(stage))


@gluonkit.jit
def _compute_partition(y_desc, bufs, out, ready, empty, my_tiles, STAGES: gl.constexpr):
    BM: gl.constexpr = y_desc.block_type.shape[0]
    BN: gl.constexpr = y_desc.block_type.shape[1]
    layout: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])
    for i in range(my_tiles):
        tile = gl.program_id(0) + i * gl.num_programs(0)
        stage = i % STAGES
        mbarrier.wait(ready.index(stage), (i // STAGES) & 1)
        x = bufs.index(stage).load(layout).to(gl.float32)
        gl.thread_barrier()  # every thread of this partition has read the buffer
        mbarrier.arrive(empty.index(stage))
        y = x * x + 1.0
        tma.store_wait(0)  # the previous tile's store no longer reads `out`
        out.store(y)
        fence_async_shared()
        tma.async_store(y_desc, [tile * BM, 0], out)
    tma.store_wait(0)


@gluonkit.jit
def producer_consumer_kernel(x_desc, y_desc, M, STAGES: gl.constexpr):
    BM: gl.constexpr = x_desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(x_desc.dtype, [STAGES, BM, x_desc.block_type.shape[1]], x_desc.layout)
    out = gl.allocate_shared_memory(y_desc.dtype, y_desc.block_type.shape, y_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    my_tiles = gl.cdiv(gl.cdiv(M, BM) - gl.program_id(0), gl.num_programs(0))
    gl.warp_specialize([
        (_compute_partition, (y_desc, bufs, out, ready, empty, my_tiles, STAGES)),
        (_load_partition, (x_desc, bufs, ready, empty, my_tiles, STAGES)),
    ], [1], [24])
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))


def descriptors(x, y, BM: int):
    """The TMA descriptors of ``x`` (fp16) and ``y`` (fp32), one ``BM × N`` row tile per block."""
    N = x.shape[1]
    x_desc = TensorDescriptor.from_tensor(x, [BM, N], gl.NVMMASharedLayout.get_default_for([BM, N], gl.float16))
    y_desc = TensorDescriptor.from_tensor(y, [BM, N], gl.NVMMASharedLayout.get_default_for([BM, N], gl.float32))
    return x_desc, y_desc


def square_plus_one(x, y, BM: int = 64, STAGES: int = 3, programs: int = 2, num_warps: int = 4):
    """``y = x * x + 1`` (``x`` fp16 ``M × N``, ``N`` a power of two; ``y`` fp32)."""
    x_desc, y_desc = descriptors(x, y, BM)
    producer_consumer_kernel[(programs,)](x_desc, y_desc, x.shape[0], STAGES=STAGES, num_warps=num_warps)
    return y


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x * x + 1.0


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from _device import arrays_for_device, full_size, to_numpy

    big = full_size()
    M, N = (8192, 128) if big else (200, 32)
    x_np = np.random.default_rng(0).standard_normal((M, N)).astype(np.float16)
    x, y = arrays_for_device(x_np, np.full((M, N), np.nan, np.float32))
    square_plus_one(x, y, programs=132 if big else 2)
    err = np.abs(to_numpy(y) - reference(x_np)).max()
    print(f"producer_consumer: {M}x{N}, max error {err:.2e}")
    assert err < 1e-5, err


if __name__ == "__main__":
    main()
