"""Single-tile wgmma GEMMs on the GPU, against torch.matmul and the CPU interpreter.

The kernel is ``tests/test_wgmma.py``'s (global -> registers -> NVMMA shared memory ->
``fence_async_shared`` -> ``warpgroup_mma`` -> global); marked ``gpu`` (skipped without a
CUDA GPU and torch).  The tensor cores sum in float32 in their own order, so results agree
with float64 references to float32 accumulation error, not bit for bit.

tf32 (float32 inputs) and fp8 (e4m3, e5m2) read both operands K-major: A ``[M, K]`` and B
as the ``.permute((1, 0))`` of an ``[N, K]`` buffer, staged by ``local_store`` (the
``gemm_kernel`` configurations of ``test_wgmma.K_MAJOR_CONFIGS``) or by TMA
(``tma_gemm_kernel``).  The references are float64 products of the inputs as the tensor
cores read them (float32 truncated to tf32); outputs are poisoned with NaN first.  fp8
products are summed with reduced precision on Hopper, so fp8 tolerances scale with the sum
of |products| (see ``_assert_close``).
"""

import os
import sys

import numpy as np
import pytest

from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.dirname(__file__))

import test_wgmma as wg  # noqa: E402

torch = pytest.importorskip("torch") if has_gpu() else None
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")]

CONFIGS = [
    dict(m=64, n=64, k=64),
    dict(m=64, n=64, k=64, dtype="bfloat16", b_kmajor=True),
    dict(m=64, n=64, k=64, a_mode="regs", is_async=True),
    dict(m=64, n=64, k=64, dtype="bfloat16", a_mode="m", swizzle_a=64, swizzle_b=64),
    dict(m=64, n=128, k=32, a_mode="m", swizzle_a=64, swizzle_b=32),
    dict(m=64, n=32, k=64, swizzle_b=64, instr_n=32, b_kmajor=True, swizzle_a=32),
    dict(m=128, n=128, k=64, num_warps=8, instr_n=64, swizzle_a=64, swizzle_b=32, b_kmajor=True),
    dict(m=128, n=128, k=64, num_warps=8, dtype="bfloat16", a_mode="regs", is_async=True),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("use_acc", [1, 0])
def test_gemm_tile_matches_torch_and_the_interpreter(config, use_acc):
    config = dict(config)
    m, n, k = config.pop("m"), config.pop("n"), config.pop("k")
    dtype = config.get("dtype", "float16")
    a, b, c = wg.random_inputs(m, n, k, dtype, seed=m + n + k + use_acc)
    expected = c.copy()
    wg.interpret(wg.gemm_kernel, a, b, expected, use_acc, **wg.gemm_args(m, n, k, **config))

    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    ga = torch.from_numpy(a.astype(np.float32)).to(torch_dtype).cuda()
    gb = torch.from_numpy(b.astype(np.float32)).to(torch_dtype).cuda()
    gc = torch.from_numpy(c).cuda()
    wg.gemm_kernel[(1,)](ga, gb, gc, use_acc, **wg.gemm_args(m, n, k, **config))
    torch.cuda.synchronize()
    got = gc.cpu().numpy()
    ref = torch.matmul(ga.float(), gb.float()).cpu().numpy() + (c if use_acc else 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-3)


TORCH_DTYPES = {"float32": "float32", "float8e4nv": "float8_e4m3fn", "float8e5": "float8_e5m2"}


def _device(x, dtype):
    """A numpy input as a CUDA tensor of ``dtype`` (fp8 through float32: the values are exact)."""
    return torch.from_numpy(x.astype(np.float32)).to(getattr(torch, TORCH_DTYPES[dtype])).cuda()


def _assert_close(got, ref, a, b):
    """float32-accumulation tolerance; for fp8 one scaled by the sum of |products|.

    Hopper's fp8 wgmma adds its products with fewer bits than float32 (seen on an H100:
    errors up to about 2**-14 of sum_k |a_ik b_kj|, so 1.4 % of a K = 128 tile missed a
    1e-3 tolerance); the bound 2**-11 of that sum still exposes any misplaced element.
    """
    if a.dtype.itemsize == 1:
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        bad = np.abs(got - ref) > 2.0 ** -11 * scale + 1e-4 * np.abs(ref) + 1e-3
        assert not bad.any(), f"{bad.sum()} elements off, first at {np.argwhere(bad)[0]}"
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)


def _reference(a, b):
    """float64 product of the values the tensor cores multiply (float32 inputs truncated to tf32)."""
    if a.dtype == np.float32:
        a, b = wg.tf32(a), wg.tf32(b)
    return torch.from_numpy(a.astype(np.float64)) @ torch.from_numpy(b.astype(np.float64))


@pytest.mark.parametrize("config", wg.K_MAJOR_CONFIGS, ids=wg.config_id)
@pytest.mark.parametrize("use_acc", [1, 0])
def test_tf32_and_fp8_tiles_match_torch_and_the_interpreter(config, use_acc):
    config = dict(config)
    m, n, k = config.pop("m"), config.pop("n"), config.pop("k")
    dtype = config["dtype"]
    args = wg.gemm_args(m, n, k, b_kmajor=True, **config)
    a, b, c = wg.random_inputs(m, n, k, dtype, seed=m + n + k + use_acc)
    expected = c.copy()
    wg.interpret(wg.gemm_kernel, a, b, expected, use_acc, **args)

    gc = torch.from_numpy(c).cuda()
    if not use_acc:
        gc.fill_(float("nan"))  # every element must be written from the product alone
    wg.gemm_kernel[(1,)](_device(a, dtype), _device(b, dtype), gc, use_acc, **args)
    torch.cuda.synchronize()
    got = gc.cpu().numpy()
    ref = (_reference(a, b) + (torch.from_numpy(c).double() if use_acc else 0)).numpy()
    _assert_close(got, ref, a, b)
    _assert_close(got, expected, a, b)


@pytest.mark.parametrize("dtype, m, n, k", [("float32", 64, 64, 32), ("float32", 64, 128, 64),
                                           ("float8e4nv", 64, 64, 128), ("float8e5", 64, 32, 64),
                                           ("float8e4nv", 64, 256, 64)])
def test_tma_staged_tf32_and_fp8_tiles_match_torch(dtype, m, n, k):
    a, b, _ = wg.random_inputs(m, n, k, dtype, seed=k + n)
    bt = np.ascontiguousarray(b.T)
    out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    descs = wg.tma_descriptors(_device(a, dtype), _device(bt, dtype), dtype)
    wg.tma_gemm_kernel[(1,)](*descs, out, wg.acc_layout(4, n, dtype=dtype), wg.io_layout(4), num_warps=4)
    torch.cuda.synchronize()
    _assert_close(out.cpu().numpy(), _reference(a, b).numpy(), a, b)


def test_tf32_reads_float32_inputs_truncated():
    """1 + 3 * 2**-12 (0.75 tf32 ulp above 1) reads as 1: the hardware truncates, as the interpreter does."""
    m = n = 64
    k = 32
    a = np.full((m, k), 1 + 3 * 2.0 ** -12, np.float32)
    b = np.zeros((k, n), np.float32)
    b[0] = 1 + 2.0 ** -13
    out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    args = wg.gemm_args(m, n, k, dtype="float32", b_kmajor=True)
    wg.gemm_kernel[(1,)](_device(a, "float32"), _device(b, "float32"), out, 0, **args)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), 1.0)
