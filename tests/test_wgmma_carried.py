"""An asynchronous wgmma's accumulator carried through runtime loops and aggregates, as in Gluon.

``acc = warpgroup_mma(a, b, acc, is_async=True)`` inside a ``for`` loop, with the wait at the
top of the next iteration, is how Gluon kernels overlap the MMA with the next loads.  The
accumulator is a runtime value: it is loop-carried, and a carried variable keeps the kind it
had before the loop (a tensor stays a tensor, ``warpgroup_mma_init``'s token stays a token),
also inside an aggregate.  Checked in the interpreter against float64 numpy and through
ptxas for sm_90a.
"""

from typing import Union

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.language.nvidia.hopper import (fence_async_shared, warpgroup_mma, warpgroup_mma_accumulator,
                                             warpgroup_mma_init, warpgroup_mma_wait)
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

M, N, BK = gl.constexpr(64), gl.constexpr(32), gl.constexpr(32)
IO = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
ACC = gl.NVMMADistributedLayout([3, 0], [4, 1], [16, 32, 16])


@gluonkit.aggregate
class Acc:
    value: Union[warpgroup_mma_accumulator, gl.tensor]
    steps: gl.tensor

    @gluonkit.jit
    def issue(self, a, b):
        return Acc(warpgroup_mma(a, b, self.value, is_async=True), self.steps + 1)

    @gluonkit.jit
    def settle(self):
        return Acc(warpgroup_mma_wait(0, deps=(self.value,)), self.steps)


@gluonkit.jit
def _tile(ptr, ROWS: gl.constexpr, COLS: gl.constexpr, stride):
    rows = gl.arange(0, ROWS, layout=gl.SliceLayout(1, IO))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, IO))
    return gl.load(ptr + rows[:, None] * stride + cols[None, :])


@gluonkit.jit
def k_loop_kernel(a_ptr, b_ptr, c_ptr, steps_ptr, kt, KT: gl.constexpr, START: gl.constexpr):
    """C = A[:, :kt*BK] @ B[:kt*BK]: the K blocks staged in shared memory, one async wgmma per
    runtime iteration, waited for at the top of the next one."""
    a_bufs = gl.allocate_shared_memory(gl.float16, [KT, M, BK], gl.NVMMASharedLayout.get_default_for([M, BK],
                                                                                                     gl.float16))
    b_bufs = gl.allocate_shared_memory(gl.float16, [KT, BK, N], gl.NVMMASharedLayout.get_default_for([BK, N],
                                                                                                     gl.float16))
    for s in gl.static_range(KT):
        a_bufs.index(s).store(_tile(a_ptr + s * BK, M, BK, KT * BK))
        b_bufs.index(s).store(_tile(b_ptr + s * BK * N, BK, N, N))
    fence_async_shared()
    zero = gl.zeros([M, N], gl.float32, ACC)
    if START == "tensor":
        acc = zero
    else:
        acc = warpgroup_mma_init(zero)
    state = Acc(warpgroup_mma_init(zero), gl.to_tensor(0))
    for i in range(kt):
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        acc = warpgroup_mma(a_bufs.index(i), b_bufs.index(i), acc, is_async=True)
        state = state.settle()
        state = state.issue(a_bufs.index(i), b_bufs.index(i))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    state = state.settle()
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, IO))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, IO))
    total = gl.convert_layout(acc, IO) + gl.convert_layout(state.value, IO)
    gl.store(c_ptr + rows[:, None] * N + cols[None, :], total)
    gl.store(steps_ptr, state.steps)


@gluonkit.jit
def unwaited_kernel(a_ptr, b_ptr, c_ptr, kt):
    a = gl.allocate_shared_memory(gl.float16, [M, BK], gl.NVMMASharedLayout.get_default_for([M, BK], gl.float16),
                                  _tile(a_ptr, M, BK, BK))
    b = gl.allocate_shared_memory(gl.float16, [BK, N], gl.NVMMASharedLayout.get_default_for([BK, N], gl.float16),
                                  _tile(b_ptr, BK, N, N))
    fence_async_shared()
    acc = warpgroup_mma_init(gl.zeros([M, N], gl.float32, ACC))
    for i in range(kt):
        acc = warpgroup_mma(a, b, acc, is_async=True)
    c = acc + 1.0  # <- still a token


@pytest.mark.parametrize("start", ["tensor", "token"])
@pytest.mark.parametrize("kt", [0, 1, 3])
def test_a_carried_async_accumulator_sums_every_k_block(start, kt):
    rng = np.random.default_rng()
    m, n, bk = M.value, N.value, BK.value
    a = rng.standard_normal((m, 3 * bk)).astype(np.float16)
    b = rng.standard_normal((3 * bk, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    steps = np.zeros(1, np.int32)
    with interpreter_on():
        k_loop_kernel[(1,)](a, b, c, steps, kt, KT=3, START=start)
    ref = a[:, :kt * bk].astype(np.float64) @ b[:kt * bk].astype(np.float64)
    np.testing.assert_allclose(c, 2 * ref, rtol=1e-5, atol=1e-3)
    assert steps[0] == kt


def test_a_token_carried_out_of_a_loop_is_still_a_token():
    with pytest.raises(CompilationError) as info:
        unwaited_kernel.build_ir([gl.pointer_type(gl.float16)] * 2 + [gl.pointer_type(gl.float32), gl.int32], {},
                                 4, {})
    assert "warpgroup_mma_accumulator" in str(info.value) and "# <- still a token" in str(info.value)


@needs_ptxas
@pytest.mark.parametrize("start", ["tensor", "token"])
def test_the_carried_accumulator_assembles_for_sm90a(start):
    c = k_loop_kernel.compile("*fp16:16", "*fp16:16", "*fp32:16", "*i32", "i32", KT=3, START=start,
                              target="sm_90a")
    ptx = c.asm["ptx"]
    assert "cubin" in c.asm
    assert "wgmma.mma_async.sync.aligned.m64n32k16" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    assert ".local" not in ptx  # the carried accumulator stays in registers
