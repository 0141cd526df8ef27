"""wgmma on a tile smaller than its accumulator layout's warps: warpgroups that hold the same
elements (zero warp bases) issue the same instructions, as in Gluon.

E.g. ``M = 64`` with ``warps_per_cta [8, 1]`` (both warpgroups compute all 64 rows) or
``N = 16`` with ``[4, 2]`` and ``instr_shape`` N 16.  The kernel is ``tests/test_wgmma.py``'s;
the interpreter is checked against float64 numpy, the PTX through ptxas for sm_90a, and the
GPU (``gpu`` marker) against the interpreter.  Shapes below one wgmma (M < 64, N below the
instruction's N) stay errors.
"""

import os
import sys

import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.runtime.driver import has_gpu

sys.path.insert(0, os.path.dirname(__file__))

import test_wgmma as wg  # noqa: E402
from kernel_checks import needs_ptxas  # noqa: E402


# (M, N, K, warps_per_cta, instr N, A mode)
CASES = [
    (64, 32, 32, [8, 1], 16, "k"),
    (64, 32, 32, [8, 1], 16, "regs"),
    (64, 16, 64, [4, 2], 16, "k"),
    (128, 16, 32, [4, 2], 16, "regs"),
    (64, 64, 32, [16, 1], 32, "k"),
]
IDS = [f"{m}x{n}x{k}-w{w[0]}x{w[1]}-n{i}-{a}" for m, n, k, w, i, a in CASES]


def _args(m, n, k, warps, instr_n, a_mode):
    num_warps = warps[0] * warps[1]
    args = wg.gemm_args(m, n, k, a_mode=a_mode, num_warps=num_warps)
    args["acc_layout"] = gl.NVMMADistributedLayout([3, 0], warps, [16, instr_n, 16])
    args["a_smem_layout"] = gl.NVMMASharedLayout.get_default_for([m, k], gl.float16)
    args["b_smem_layout"] = gl.NVMMASharedLayout.get_default_for([k, n], gl.float16)
    return args


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("use_acc", [1, 0])
def test_interpreter_matches_numpy(case, use_acc):
    m, n, k = case[:3]
    a, b, c = wg.random_inputs(m, n, k, "float16", seed=None)
    out = c.copy()
    wg.interpret(wg.gemm_kernel, a, b, out, use_acc, **_args(*case))
    np.testing.assert_allclose(out, wg.reference(a, b, c, use_acc), rtol=1e-5, atol=1e-4)


@needs_ptxas
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_warpgroup_issues_the_whole_tile(case):
    m, n, k, warps, instr_n, _ = case
    args = _args(*case)
    num_warps = args.pop("num_warps")
    c = wg.gemm_kernel.compile("*fp16:16", "*fp16:16", "*fp32:16", "i32", target="sm_90a", num_warps=num_warps,
                               **args)
    assert "cubin" in c.asm
    ptx = c.asm["ptx"]
    # warpgroups that hold different rows (columns): 4 warps along M make one, capped by the tile
    split_m, split_n = min(warps[0] // 4, m // 64), min(warps[1], n // instr_n)
    per_warpgroup = (m // split_m // 64) * (n // split_n // instr_n) * (k // 16)
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{instr_n}k16") == per_warpgroup


@pytest.mark.parametrize("m, n, warps, instr_n, fragment", [
    (64, 32, [4, 1], 64, "N = 32 must be a multiple of instr_shape N (64)"),
    (32, 32, [4, 1], 32, "M = 32 must be a multiple of 64"),
    (32, 32, [8, 1], 32, "M = 32 must be a multiple of 64"),
])
def test_tiles_below_one_instruction_are_refused(m, n, warps, instr_n, fragment):
    args = _args(m, n, 32, warps, instr_n, "k")
    with pytest.raises(CompilationError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        wg.gemm_kernel.build_ir([gl.pointer_type(gl.float16)] * 2 + [gl.pointer_type(gl.float32), gl.int32],
                                {k: v for k, v in args.items() if k != "num_warps"}, args["num_warps"], {})


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gpu_matches_the_interpreter(case):
    torch = pytest.importorskip("torch")
    m, n, k = case[:3]
    a, b, c = wg.random_inputs(m, n, k, "float16", seed=m * n + k)
    expected = c.copy()
    wg.interpret(wg.gemm_kernel, a, b, expected, 1, **_args(*case))
    gc = torch.from_numpy(c).cuda()
    wg.gemm_kernel[(1,)](torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), gc, 1, **_args(*case))
    torch.cuda.synchronize()
    np.testing.assert_allclose(gc.cpu().numpy(), expected, rtol=1e-3, atol=1e-2)
