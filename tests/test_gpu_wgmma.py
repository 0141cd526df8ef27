"""Single-tile wgmma GEMMs on the GPU, against torch.matmul and the CPU interpreter.

The kernel is ``tests/test_wgmma.py``'s (global -> registers -> NVMMA shared memory ->
``fence_async_shared`` -> ``warpgroup_mma`` -> global); marked ``gpu`` (skipped without a
CUDA GPU and torch).  The tensor cores sum in float32 in their own order, so results agree
with float64 references to float32 accumulation error, not bit for bit.
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
