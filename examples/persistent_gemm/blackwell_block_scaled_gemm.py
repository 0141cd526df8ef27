"""A persistent block-scaled Blackwell GEMM (mxfp8, mxfp4, nvfp4): TMA loads of the operands and of
their scales into a ring of shared stages, ``tcgen05_copy`` of the scales into tensor memory,
``tcgen05_mma_scaled`` into a tensor-memory accumulator, and the epilogue of
:mod:`blackwell_gemm` (tensor memory → registers → shared memory → TMA store).

``C = (A * A_scale) @ (B * B_scale).T``: A is ``M × K`` and B ``N × K`` (both K-major), in
``A_FMT``/``B_FMT`` — ``"e4m3"``/``"e5m2"`` (fp8, one byte each) or ``"e2m1"`` (fp4, two per
``uint8`` along K, the lower nibble first).  One scale covers ``VEC`` consecutive elements of
K: ``uint8`` UE8M0 scales with ``VEC = 32`` (mxfp8, mxfp4), or ``float8e4nv`` UE4M3 scales
with ``VEC = 16`` (nvfp4).  The scales live in global memory in the packed block order that
``tcgen05.cp`` reads (:func:`pack_scales`): each 128-row x 4-scale block is 512 contiguous
bytes, blocks ordered by rows, then scales.  A ``[REP_MN, REP_K, 2, 256]`` TMA box brings a
tile's scales; its shared buffer, seen as ``[BMN, BK / VEC]`` in
``SharedLinearLayout(scales_copy_bases(...))``, is what ``tcgen05_copy`` takes.

The protocol (docs/blackwell_block_scaled.rst draws it) is :mod:`blackwell_gemm`'s, with the
scales in each stage:

* ``ready[s]``: the four TMA loads of stage ``s`` landed (``expect`` of their bytes);
* after that wait, the issuing thread copies stage ``s``'s scales into stage ``s`` of the
  scale buffers in tensor memory and issues the MMA: no wait in between, since the PTX ISA
  orders a ``tcgen05.cp`` before the ``tcgen05.mma`` the same thread issues next;
* ``empty[s]``: the MMA of stage ``s`` completed (``mbarriers=[empty[s]]``; a commit covers
  the copies before it too), so both the shared stage and the tensor-memory scales of stage
  ``s`` may be overwritten: a copy into scales an MMA in flight reads would be a race
  (``tcgen05.mma`` → ``tcgen05.cp`` is not an ordered pair), hence one scale buffer per stage;
* ``acc_bar``: every MMA of the tile completed; the epilogue reads the accumulator.

Tensor memory: the accumulator takes ``BN`` columns; A's scales ``STAGES * BK / VEC / 4 * BM / 128``
columns and B's ``STAGES * BK / VEC / 4 * BN / 128``, each allocation rounded up to 32
columns — 320 of the 512 at ``BN = 256``.

Run: ``python examples/persistent_gemm/blackwell_block_scaled_gemm.py`` (no Blackwell GPU
here: it runs in the interpreter at a small size).
"""

import os
import sys

import ml_dtypes
import numpy as np

import gluonkit
import gluonkit.language as gl
from gluonkit.language.nvidia.blackwell import (TensorMemoryLayout, TensorMemoryScalesLayout, allocate_tensor_memory,
                                                fence_async_shared, mbarrier, tcgen05_commit, tcgen05_copy,
                                                tcgen05_mma_scaled, tma)
from gluonkit.layouts import scales_copy_bases
from gluonkit.nvidia.blackwell import TensorDescriptor

sys.path.insert(0, os.path.dirname(__file__))
from persistent_gemm import default_num_programs, element_dtype, grouped_tile, next_load  # noqa: E402

CHUNK_ROWS, CHUNK_SCALES = 128, 4  # one tcgen05.cp: 128 rows x 4 scales = 512 bytes


@gluonkit.jit
def issue_scaled_loads(a_desc, b_desc, sa_desc, sb_desc, a_smem, b_smem, sa_smem, sb_smem, ready, stage, pid_m,
                       pid_n, k, pred):
    """Start the TMA loads of K-slice ``k`` of tile (pid_m, pid_n): A, B and both scale boxes, into ``stage``."""
    bar = ready.index(stage)
    nbytes: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes + sa_desc.block_type.nbytes
                            + sb_desc.block_type.nbytes)
    mbarrier.expect(bar, nbytes, pred=pred)
    tma.async_load(a_desc, [pid_m * a_desc.block_type.shape[0], k * a_desc.block_type.shape[1]], bar,
                   a_smem.index(stage), pred=pred)
    tma.async_load(b_desc, [pid_n * b_desc.block_type.shape[0], k * b_desc.block_type.shape[1]], bar,
                   b_smem.index(stage), pred=pred)
    tma.async_load(sa_desc, [pid_m * sa_desc.block_type.shape[0], k * sa_desc.block_type.shape[1], 0, 0], bar,
                   sa_smem.index(stage), pred=pred)
    tma.async_load(sb_desc, [pid_n * sb_desc.block_type.shape[0], k * sb_desc.block_type.shape[1], 0, 0], bar,
                   sb_smem.index(stage), pred=pred)


@gluonkit.jit
def block_scaled_gemm_kernel(a_desc, b_desc, sa_desc, sb_desc, c_desc, M, N, K, A_FMT: gl.constexpr,
                             B_FMT: gl.constexpr, SA_LAYOUT: gl.constexpr, SB_LAYOUT: gl.constexpr,
                             STAGES: gl.constexpr, GROUP_M: gl.constexpr, EPILOGUE_SPLIT: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[0]
    SKT: gl.constexpr = sa_desc.block_type.shape[1] * 4  # scales per row of one K-slice
    scale_dtype: gl.constexpr = sa_desc.dtype
    num_pid_m = gl.cdiv(M, BM)
    num_pid_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, a_desc.block_type.shape[1])  # K in bytes of A
    num_tiles = num_pid_m * num_pid_n
    my_tiles = gl.cdiv(num_tiles - gl.program_id(0), gl.num_programs(0))

    a_smem = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_smem = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    sa_smem = gl.allocate_shared_memory(scale_dtype, [STAGES] + sa_desc.block_type.shape, sa_desc.layout)
    sb_smem = gl.allocate_shared_memory(scale_dtype, [STAGES] + sb_desc.block_type.shape, sb_desc.layout)
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    acc_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    mbarrier.init(acc_bar, count=1)
    acc = allocate_tensor_memory(gl.float32, [BM, BN], TensorMemoryLayout([BM, BN], col_stride=1))
    sa_tmem = allocate_tensor_memory(scale_dtype, [STAGES, BM, SKT], TensorMemoryScalesLayout())
    sb_tmem = allocate_tensor_memory(scale_dtype, [STAGES, BN, SKT], TensorMemoryScalesLayout())
    EPI_N: gl.constexpr = BN // EPILOGUE_SPLIT
    reg_layout: gl.constexpr = acc.slice(0, EPI_N).get_reg_layout()

    load_tile = gl.program_id(0)
    load_m, load_n = grouped_tile(load_tile, num_pid_m, num_pid_n, GROUP_M)
    load_k = 0
    for s in gl.static_range(STAGES - 1):
        issue_scaled_loads(a_desc, b_desc, sa_desc, sb_desc, a_smem, b_smem, sa_smem, sb_smem, ready, s, load_m,
                           load_n, load_k, load_tile < num_tiles)
        load_k, load_tile, load_m, load_n = next_load(load_k, load_tile, load_m, load_n, k_tiles, num_pid_m,
                                                      num_pid_n, GROUP_M)
    for t in range(my_tiles):
        pid_m, pid_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_tiles):
            step = t * k_tiles + k
            stage = step % STAGES
            mbarrier.wait(ready.index(stage), (step // STAGES) & 1)
            # The scale boxes seen as [rows, scales]: the same bytes, in tcgen05.cp's placement.
            tcgen05_copy(sa_smem.index(stage)._reinterpret(scale_dtype, [BM, SKT], SA_LAYOUT), sa_tmem.index(stage))
            tcgen05_copy(sb_smem.index(stage)._reinterpret(scale_dtype, [BN, SKT], SB_LAYOUT), sb_tmem.index(stage))
            tcgen05_mma_scaled(a_smem.index(stage), b_smem.index(stage).permute((1, 0)), acc, sa_tmem.index(stage),
                               sb_tmem.index(stage), A_FMT, B_FMT, use_acc=k > 0, mbarriers=[empty.index(stage)])
            # Refill the stage of step - 1 once its MMA (and the copies before it) completed.
            prev = step + STAGES - 1
            mbarrier.wait(empty.index(prev % STAGES), ((step - 1) // STAGES) & 1, pred=step > 0)
            issue_scaled_loads(a_desc, b_desc, sa_desc, sb_desc, a_smem, b_smem, sa_smem, sb_smem, ready,
                               prev % STAGES, load_m, load_n, load_k, load_tile < num_tiles)
            load_k, load_tile, load_m, load_n = next_load(load_k, load_tile, load_m, load_n, k_tiles, num_pid_m,
                                                          num_pid_n, GROUP_M)
        tcgen05_commit(acc_bar)
        mbarrier.wait(acc_bar, t & 1)
        for j in gl.static_range(EPILOGUE_SPLIT):
            out = acc.slice(j * EPI_N, EPI_N).load(reg_layout)
            tma.store_wait(0)  # the previous slice's store has read c_smem
            c_smem.store(out.to(c_desc.dtype))
            fence_async_shared()
            tma.async_store(c_desc, [pid_m * BM, pid_n * BN + j * EPI_N], c_smem)
    tma.store_wait(0)
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    mbarrier.invalidate(acc_bar)


def pack_scales(scales: np.ndarray) -> np.ndarray:
    """``[MN, SK]`` scales → ``[MN/128, SK/4, 2, 256]`` in tcgen05.cp's packed block order (zero padded).

    Byte ``16r + 4g + c`` of block ``(i, j)`` is scale ``(128i + 32g + r, 4j + c)``.
    """
    mn, sk = scales.shape
    rows, cols = -(-mn // CHUNK_ROWS), -(-sk // CHUNK_SCALES)
    padded = np.zeros((rows * CHUNK_ROWS, cols * CHUNK_SCALES), scales.dtype)
    padded[:mn, :sk] = scales
    blocks = padded.reshape(rows, 4, 32, cols, CHUNK_SCALES)  # (i, g, r, j, c)
    return np.ascontiguousarray(blocks.transpose(0, 3, 2, 1, 4)).reshape(rows, cols, 2, 256)


def _packed(scales):
    """:func:`pack_scales` of a numpy array, or of a torch tensor (packed on the host, returned on its device)."""
    if isinstance(scales, np.ndarray):
        return pack_scales(scales)
    import torch
    raw = pack_scales(scales.view(torch.uint8).cpu().numpy())
    return torch.from_numpy(raw).to(scales.device).view(scales.dtype)


def prepare(a, b, a_scale, b_scale, c, a_fmt: str, b_fmt: str, BN: int = 256, BK: int = 128, STAGES: int = 3,
            GROUP_M: int = 16, EPILOGUE_SPLIT: int = 4, num_warps: int = 4, num_programs: int = None):
    """A function of no arguments that computes ``c = (a * a_scale) @ (b * b_scale).T`` (one launch per call).

    ``a``/``b`` hold ``M × K`` / ``N × K`` elements (``uint8`` with K/2 bytes per row for e2m1);
    ``a_scale``/``b_scale`` are ``M × K/VEC`` / ``N × K/VEC`` (``uint8`` UE8M0: VEC = 32,
    ``float8_e4m3fn`` UE4M3: VEC = 16).  BM is 128; ``BN`` is 128 or 256 and ``BK`` (elements)
    a multiple of ``4 * VEC`` that divides K.
    """
    vec = 32 if str(a_scale.dtype).replace("torch.", "") == "uint8" else 16
    M, N = a.shape[0], b.shape[0]
    K = a.shape[1] * (2 if a_fmt == "e2m1" else 1)
    BM = CHUNK_ROWS
    if K % BK or BK % (CHUNK_SCALES * vec) or BN % CHUNK_ROWS:
        raise ValueError(f"BK={BK} must divide K={K} and be a multiple of {CHUNK_SCALES * vec}; BN={BN} of 128")
    nvmma = gl.NVMMASharedLayout.get_default_for
    a_block = [BM, BK // (2 if a_fmt == "e2m1" else 1)]
    b_block = [BN, BK // (2 if b_fmt == "e2m1" else 1)]
    c_block = [BM, BN // EPILOGUE_SPLIT]
    skt = BK // vec
    scale_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=4)
    descs = [TensorDescriptor.from_tensor(a, a_block, nvmma(a_block, element_dtype(a))),
             TensorDescriptor.from_tensor(b, b_block, nvmma(b_block, element_dtype(b))),
             TensorDescriptor.from_tensor(_packed(a_scale), [BM // CHUNK_ROWS, skt // CHUNK_SCALES, 2, 256],
                                          scale_layout),
             TensorDescriptor.from_tensor(_packed(b_scale), [BN // CHUNK_ROWS, skt // CHUNK_SCALES, 2, 256],
                                          scale_layout),
             TensorDescriptor.from_tensor(c, c_block, nvmma(c_block, element_dtype(c)))]
    layouts = [gl.SharedLinearLayout(scales_copy_bases(rows, skt), alignment=128) for rows in (BM, BN)]
    tiles = gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN)
    launch = block_scaled_gemm_kernel[(min(tiles, num_programs or default_num_programs()),)]

    def run():
        launch(*descs, M, N, K, A_FMT=a_fmt, B_FMT=b_fmt, SA_LAYOUT=layouts[0], SB_LAYOUT=layouts[1],
               STAGES=STAGES, GROUP_M=GROUP_M, EPILOGUE_SPLIT=EPILOGUE_SPLIT, num_warps=num_warps)
        return c
    return run


def gemm(a, b, a_scale, b_scale, c, a_fmt: str, b_fmt: str, **config):
    """``c = (a * a_scale) @ (b * b_scale).T``; ``config`` as for :func:`prepare`."""
    return prepare(a, b, a_scale, b_scale, c, a_fmt, b_fmt, **config)()


def main() -> None:
    os.environ["GLUONKIT_INTERPRET"] = "1"  # no Blackwell GPU to run on: the interpreter checks the protocol
    M, N, K = 200, 136, 256
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn)
    a_scale = rng.integers(120, 135, (M, K // 32), dtype=np.uint8)
    b_scale = rng.integers(120, 135, (N, K // 32), dtype=np.uint8)
    c = np.full((M, N), np.nan, np.float32)
    gemm(a, b, a_scale, b_scale, c, "e4m3", "e4m3", BN=128, BK=128, STAGES=2, EPILOGUE_SPLIT=1)
    unscale = [np.repeat(np.ldexp(1.0, s.astype(np.int64) - 127), 32, axis=1) for s in (a_scale, b_scale)]
    ref = (a.astype(np.float64) * unscale[0]) @ (b.astype(np.float64) * unscale[1]).T
    err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    print(f"blackwell_block_scaled_gemm: {M}x{N}x{K} mxfp8 -> fp32 in the interpreter, relative error {err:.2e}")
    assert err < 1e-6, err


if __name__ == "__main__":
    main()
