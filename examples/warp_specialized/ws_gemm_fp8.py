"""fp8 GEMM with per-tensor scales on the warp-specialized Hopper kernel of ``ws_gemm.py``.

``C = (A @ B^T) * scale_a * scale_b`` with A ``[M, K]`` and B ``[N, K]`` (both row-major,
float8 e4m3 or e5m2, mixable), fp32 accumulation, C in bf16 (fp16 and fp32 work too).  This is
what ``torch._scaled_mm(a, b.t(), scale_a, scale_b, out_dtype=torch.bfloat16)`` computes.

wgmma reads fp8 operands from shared memory K-major only, so B comes as ``[N, K]``: the
producer loads ``[BN, BK]`` blocks and the consumers hand wgmma their transposed view.  The
scales are fp32 device scalars (one-element arrays), read once per consumer and applied to the
fp32 accumulator in the epilogue, so a scale computed on the device needs no host sync.

Everything else is ``ws_gemm.py``'s kernel (producer warp, cooperative or ping-pong consumers,
TMA store epilogue); only the K-slice is 128 elements (32 bytes per row per K step of the
instruction, as for 16-bit types at 64) and the tiles and ring depth are chosen for fp8 here.

Run: ``python examples/warp_specialized/ws_gemm_fp8.py`` (GPU if present, else the CPU
interpreter at a small ragged size).
"""

import os
import sys

import numpy as np

import gluonkit
import gluonkit.language as gl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ws_gemm  # noqa: E402
from persistent_gemm import default_num_programs, element_dtype  # noqa: E402  (ws_gemm put it on the path)

FP8_TYPES = (gl.float8e4nv, gl.float8e5)
OUT_TYPES = (gl.bfloat16, gl.float16, gl.float32)
SHARED_BYTES = 232448 - 1024  # the H100's 227 KB per block, less the mbarriers' and alignment's share


def choose_config(M: int, N: int, K: int, out_bytes: int, sm_count: int) -> dict:
    """Variant, tiles and ring depth for an fp8 shape (from ``bench_ws_gemm_fp8.py`` on the H100).

    Ping-pong 128 × 128 by ``ws_gemm.shallow_or_narrow`` (shallow K or too few tiles), else
    cooperative; bf16's other rules (ping-pong from many waves, 256 × 128 tiles for odd B
    strides, split-K of a wave tail) were not measured on fp8 and are not applied.  Cooperative
    tiles are 128 × 256 or 256 × 128, whichever needs fewer waves of tiles over the SMs (a
    ragged N just above a multiple of 256 wastes a wave on 128 × 256 tiles).  ``GROUP_M=8``
    (3% faster than 16 at 8192³), ``BK = 128`` and as many stages as fit beside C's buffer(s).
    """
    pingpong = ws_gemm.shallow_or_narrow(M, N, K, sm_count)
    if pingpong:
        BM, BN = 128, 128
    else:
        tiles = ((128, 256), (256, 128))
        waves = [gluonkit.cdiv(gluonkit.cdiv(M, BM) * gluonkit.cdiv(N, BN), sm_count) for BM, BN in tiles]
        BM, BN = tiles[waves.index(min(waves))]
    c_bytes = (2 if pingpong else 1) * BM * (BN // 2) * out_bytes
    stages = min(6, (SHARED_BYTES - c_bytes) // ((BM + BN) * 128))
    return dict(BM=BM, BN=BN, BK=128, STAGES=stages, EPILOGUE_SPLIT=2, PINGPONG=pingpong, GROUP_M=8)


def _fail(what: str) -> None:
    raise ValueError(f"ws_gemm_fp8: {what}")


def _check(a, b, c, scale_a, scale_b) -> None:
    """Clear errors for inputs the kernel cannot take (before any descriptor is built)."""
    if len(a.shape) != 2 or len(b.shape) != 2 or len(c.shape) != 2:
        _fail(f"a, b and c must be 2-D, got shapes {tuple(a.shape)}, {tuple(b.shape)}, {tuple(c.shape)}")
    names = {"a": a, "b": b}
    for name, x in names.items():
        dtype = _dtype_or_none(x)
        if dtype not in FP8_TYPES:
            _fail(f"{name} must be float8_e4m3fn or float8_e5m2, got {x.dtype}")
    if _dtype_or_none(c) not in OUT_TYPES:
        _fail(f"c must be bfloat16, float16 or float32, got {c.dtype}")
    M, K = a.shape
    if b.shape[1] != K:
        _fail(f"b must be given as [N, K] (K-major, as torch._scaled_mm's b.t()): a is {tuple(a.shape)} "
              f"but b is {tuple(b.shape)}; pass b.T of a [K, N] matrix as a contiguous copy")
    if tuple(c.shape) != (M, b.shape[0]):
        _fail(f"c must be [M, N] = {(M, b.shape[0])}, got {tuple(c.shape)}")
    for name, x in (("a", a), ("b", b), ("c", c)):
        if _strides(x)[1] != 1:
            hint = " (b must be [N, K] row-major: wgmma reads fp8 K-major only)" if name == "b" else ""
            _fail(f"{name} must be row-major (unit stride along its last dimension), got strides "
                  f"{_strides(x)}{hint}; pass a contiguous copy")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if str(s.dtype).replace("torch.", "") != "float32" or int(np.prod(s.shape)) != 1:
            _fail(f"{name} must be a one-element float32 array or tensor (a per-tensor scale), got "
                  f"dtype {s.dtype} and shape {tuple(s.shape)}")


def _dtype_or_none(x):
    try:
        return element_dtype(x)
    except KeyError:
        return None


def _strides(x) -> tuple:
    """Strides in elements of a numpy array or torch tensor."""
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def prepare(a, b, c, scale_a, scale_b, **config):
    """A function of no arguments that computes ``c = (a @ b.T) * scale_a * scale_b``.

    ``a`` is ``[M, K]`` and ``b`` ``[N, K]``, row-major fp8; ``scale_a``/``scale_b`` are
    one-element fp32 arrays (read by the kernel on each call); ``config`` is
    ``ws_gemm.prepare``'s keywords (``BN``, ``STAGES``, ``PINGPONG``, …), by default
    :func:`choose_config`'s for the shape.
    """
    _check(a, b, c, scale_a, scale_b)
    if not config:
        config = choose_config(a.shape[0], b.shape[0], a.shape[1], element_dtype(c).itemsize, default_num_programs())
    config = dict(dict(BK=128), **config)
    return ws_gemm.prepare(a, b, c, b_kmajor=True, scales=(scale_a.reshape(1), scale_b.reshape(1)), **config)


def gemm(a, b, c, scale_a, scale_b, **config):
    """``c = (a @ b.T) * scale_a * scale_b`` in one call (see :func:`prepare`)."""
    return prepare(a, b, c, scale_a, scale_b, **config)()


def main() -> None:
    import ml_dtypes
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from _device import gpu_available, to_numpy

    on_gpu = gpu_available()
    if on_gpu:
        import torch
        if torch.cuda.get_device_capability() != (9, 0):
            print(f"ws_gemm_fp8: {torch.cuda.get_device_name()} is not a Hopper (sm_90) GPU: using the interpreter")
            on_gpu = False
    M, N, K = (4096, 4096, 4096) if on_gpu else (200, 136, 272)
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((M, K)).astype(ml_dtypes.float8_e4m3fn)
    b_np = rng.standard_normal((N, K)).astype(ml_dtypes.float8_e4m3fn)
    scales = np.array([0.5], np.float32), np.array([0.25], np.float32)
    if on_gpu:  # torch.from_numpy takes no ml_dtypes arrays: move the bits
        a, b = (torch.from_numpy(x.view(np.uint8)).cuda().view(torch.float8_e4m3fn) for x in (a_np, b_np))
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        gemm(a, b, c, *(torch.from_numpy(s).cuda() for s in scales))
    else:
        os.environ["GLUONKIT_INTERPRET"] = "1"
        c = np.full((M, N), np.nan, ml_dtypes.bfloat16)
        gemm(a_np, b_np, c, *scales, BN=64, STAGES=2, num_programs=2)
    ref = (a_np.astype(np.float64) @ b_np.astype(np.float64).T) * 0.125
    err = np.linalg.norm(to_numpy(c).astype(np.float64) - ref) / np.linalg.norm(ref)
    where = "on the GPU" if on_gpu else "in the interpreter"
    print(f"ws_gemm_fp8: {M}x{N}x{K} e4m3 -> bf16 {where}, relative error {err:.2e}")
    assert err < 8e-3, err


if __name__ == "__main__":
    main()
