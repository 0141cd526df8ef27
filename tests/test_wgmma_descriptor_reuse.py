"""wgmma shared-memory descriptors are built once per operand and MMA call, then advanced by adds.

The persistent GEMM at 128x256x64 (fp16, two warpgroups) issues four ``m64n256k16`` wgmmas per
K step; each reads A and B through a 64-bit descriptor.  The descriptor of each operand's view
is formed once (the address field: ``bfe ... 4, 14``) and each instruction's is that plus a
constant (``add.s64``), so no shift/mask/or sequence runs between ``wgmma.fence`` and
``wgmma.commit_group``.
"""

import os
import re
import sys

import pytest

import gluonkit.language as gl
from gluonkit import ir
from gluonkit.ir.types import TensorDescType

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "persistent_gemm"))

import persistent_gemm  # noqa: E402
from kernel_checks import needs_ptxas

_ADDRESS_FIELD = re.compile(r"\bbfe\.u(32|64)\s+%\w+, %\w+, 4, 14;")


def _persistent_ptx() -> str:
    BM, BN, BK = 128, 256, 64
    layout = gl.NVMMASharedLayout.get_default_for
    acc = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1], instr_shape=[16, BN, 16])
    compiled = persistent_gemm.persistent_gemm_kernel.compile(
        TensorDescType((BM, BK), ir.float16, layout([BM, BK], ir.float16)),
        TensorDescType((BK, BN), ir.float16, layout([BK, BN], ir.float16)),
        TensorDescType((BM, BN), ir.float16, layout([BM, BN], ir.float16)), "i32", "i32", "i32",
        STAGES=3, GROUP_M=8, EPILOGUE_SPLIT=1, acc_layout=acc, ACTIVATION=persistent_gemm.relu,
        num_warps=8)
    return compiled.asm["ptx"]


@needs_ptxas
def test_one_descriptor_construction_per_operand_per_mma_call():
    ptx = _persistent_ptx()
    calls = ptx.count("wgmma.fence.sync.aligned;")
    instructions = ptx.count("wgmma.mma_async.sync.aligned.m64n256k16")
    assert (calls, instructions) == (1, 4)
    # A and B: one address-field extraction each for the whole call.
    assert len(_ADDRESS_FIELD.findall(ptx)) == 2 * calls
    body = ptx[ptx.index("wgmma.fence.sync.aligned;"):ptx.index("wgmma.commit_group.sync.aligned;")]
    assert "bfe." not in body and "or.b64" not in body and "shr." not in body
    # Instructions 2..4 each advance both descriptors by one 64-bit add of a constant.
    assert len(re.findall(r"\badd\.s64\s+%rd\d+, %rd\d+, \d+;", body)) == 2 * (instructions - 1)


_K_MAJOR = [(0, False), (1, True)]  # A [M, K] row-major; B the [K, N] view of an [N, K] buffer
_FORMS = [(ir.float16, *form) for form in _K_MAJOR + [(0, True), (1, False)]]  # 16-bit: MN-major too
_FORMS += [(dtype, *form) for dtype in (ir.float8e4nv, ir.float32) for form in _K_MAJOR]


@pytest.mark.parametrize("swizzle", [32, 64, 128])
@pytest.mark.parametrize("dtype, operand, transposed", _FORMS)
def test_adding_the_tile_offset_equals_building_the_descriptor(dtype, swizzle, operand, transposed):
    """For every instruction tile and every 1 KiB-aligned buffer start in 227 KiB of shared
    memory, ``descriptor(start) + (offset >> 4)`` is the descriptor of ``start + offset``."""
    from gluonkit.lower.nvidia.wgmma_descriptor import describe_operand

    e = dtype.itemsize
    k = 2 * swizzle // e
    mn, mn_inst, k_inst = 64, (64 if operand == 0 else 32), 32 // e
    shape = (mn, k) if operand == 0 else (k, mn)
    layout = gl.NVMMASharedLayout(swizzle, 8 * e, transposed=transposed)
    view = ir.SharedMemoryDescType(dtype, shape, layout, shape)
    plan = describe_operand(view, operand, 0, 1024, mn_inst, k_inst, ir.UNKNOWN_LOCATION)

    def built(address):
        return plan.base | ((address >> 4) & 0x3FFF)

    offsets = {plan.offset_of(m0, k0) for m0 in range(0, mn, mn_inst) for k0 in range(0, k, k_inst)}
    assert len(offsets) > 1
    for start in range(0, 227 * 1024 - mn * k * e + 1, 1024):
        for offset in offsets:
            assert offset % 16 == 0
            assert built(start) + (offset >> 4) == built(start + offset)
