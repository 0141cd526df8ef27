"""Bad-input catalogue, part 2 (issue 13): Blackwell, clusters, cluster launch control, limits.

Plausible mistakes with tensor memory (sizes, layouts, register layouts, views), tcgen05 MMAs
(operand kinds, shapes, dtypes, barriers, reading or writing what an MMA in flight uses),
clusters (``from_cta`` masks, barriers that never complete), cluster launch control (the
result buffer, the expected bytes), warp specialization (register budgets, the CTA's warp
limit, deadlocks between partitions), launch options and compile-time values past what the
hardware defines (unrolling, mbarrier counts, division by zero, shifts by the width).  Each one is a gluonkit error at the
marked line (``# CASE:<name>``) that says what to change; see ``bad_input.py`` for the check.
Static mistakes are compiled for sm_100a (ptxas need not run: the error comes first);
protocol mistakes run in the interpreter, whose checker reports them.
"""

from __future__ import annotations

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.language.nvidia.blackwell import (
    TensorMemoryLayout, allocate_tensor_memory, clc, fence_async_shared, mbarrier, tcgen05_commit, tcgen05_mma,
)
from gluonkit.language.nvidia.hopper import cluster
from bad_input import check_names_line_and_fix, compiled, interpreted, scratch

BLK = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
L1 = gl.BlockedLayout([1], [32], [4], [0])
A_LAYOUT = gl.NVMMASharedLayout.get_default_for([128, 64], gl.float16)
B_LAYOUT = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float16)
TMEM = TensorMemoryLayout([128, 64], 1)
RESULT = gl.SwizzledSharedLayout(1, 1, 1, [0])


# ============================================================================= kernels
# ---------------------------------------------------------------- tensor memory
@gluonkit.jit
def tmem_kernel(p, CASE: gl.constexpr):
    if CASE == "over_512":
        t = allocate_tensor_memory(gl.float32, [128, 1024], TensorMemoryLayout([128, 256], 1))  # CASE:over_512
        t.store(gl.full([128, 1024], 1.0, gl.float32, t.get_reg_layout()))
    elif CASE == "two_over_512":
        t = allocate_tensor_memory(gl.float32, [128, 256], TensorMemoryLayout([128, 256], 1))
        u = allocate_tensor_memory(gl.float32, [128, 512], TensorMemoryLayout([128, 256], 1))  # CASE:two_over_512
        t.store(gl.full([128, 256], 1.0, gl.float32, t.get_reg_layout()))
        u.store(gl.full([128, 512], 1.0, gl.float32, u.get_reg_layout()))
    elif CASE == "block_m_96":
        t = allocate_tensor_memory(gl.float32, [96, 64], TensorMemoryLayout([96, 64], 1))  # CASE:block_m_96
    elif CASE == "col_stride":
        t = allocate_tensor_memory(gl.float32, [128, 64], TensorMemoryLayout([128, 64], 2))  # CASE:col_stride
    elif CASE == "shared_layout":
        t = allocate_tensor_memory(gl.float32, [128, 64], A_LAYOUT)  # CASE:shared_layout
    elif CASE == "store_shape":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        t.store(gl.full([128, 32], 1.0, gl.float32, BLK))  # CASE:store_shape
    elif CASE == "store_dtype":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        t.store(gl.full([128, 64], 1.0, gl.float16, t.get_reg_layout()))  # CASE:store_dtype
    elif CASE == "store_scalar":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        t.store(1.0)  # CASE:store_scalar
    elif CASE == "load_blocked":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        x = t.load(BLK)  # CASE:load_blocked
    elif CASE == "store_blocked":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        t.store(gl.full([128, 64], 1.0, gl.float32, BLK))  # CASE:store_blocked
    elif CASE == "index_no_stages":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        u = t.index(0)  # CASE:index_no_stages
    elif CASE == "index_past_stages":
        t = allocate_tensor_memory(gl.float32, [2, 128, 64], TMEM)
        u = t.index(2)  # CASE:index_past_stages
    elif CASE == "slice_past_end":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        u = t.slice(32, 64)  # CASE:slice_past_end
    elif CASE == "rows_slice_reg_layout":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        u = t.slice(64, 64, dim=0)
        reg: gl.constexpr = u.get_reg_layout()  # CASE:rows_slice_reg_layout
    elif CASE == "instr_variant":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        reg: gl.constexpr = t.get_reg_layout(instr_variant="16x999b")  # CASE:instr_variant
    elif CASE == "reinterpret_bigger":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        u = t._reinterpret(gl.float32, [128, 128], TensorMemoryLayout([128, 128], 1))  # CASE:reinterpret_bigger
    elif CASE == "read_unwritten":
        t = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        x = t.load(t.get_reg_layout())  # CASE:read_unwritten
        gl.store(p + gl.arange(0, 128, gl.SliceLayout(1, t.get_reg_layout())), gl.sum(x, 1))
    gl.store(p, 1.0)


# ---------------------------------------------------------------- tcgen05 MMA
@gluonkit.jit
def mma_kernel(p, CASE: gl.constexpr):
    a = gl.allocate_shared_memory(gl.float16, [128, 64], A_LAYOUT)
    b = gl.allocate_shared_memory(gl.float16, [64, 64], B_LAYOUT)
    acc = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    if CASE != "no_fence":
        a.store(gl.full([128, 64], 1.0, gl.float16, BLK))
        b.store(gl.full([64, 64], 1.0, gl.float16, BLK))
        fence_async_shared()
    if CASE == "a_in_registers":
        tcgen05_mma(gl.full([128, 64], 1.0, gl.float16, BLK), b, acc, use_acc=False)  # CASE:a_in_registers
    elif CASE == "acc_in_smem":
        c = gl.allocate_shared_memory(gl.float32, [128, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        tcgen05_mma(a, b, c, use_acc=False)  # CASE:acc_in_smem
    elif CASE == "k_mismatch":
        b2 = gl.allocate_shared_memory(gl.float16, [32, 64], gl.NVMMASharedLayout.get_default_for([32, 64], gl.float16))
        tcgen05_mma(a, b2, acc, use_acc=False)  # CASE:k_mismatch
    elif CASE == "acc_rows":
        acc2 = allocate_tensor_memory(gl.float32, [64, 64], TensorMemoryLayout([64, 64], 1))
        tcgen05_mma(a, b, acc2, use_acc=False)  # CASE:acc_rows
    elif CASE == "acc_stages":
        acc3 = allocate_tensor_memory(gl.float32, [2, 128, 64], TMEM)
        tcgen05_mma(a, b, acc3, use_acc=False)  # CASE:acc_stages
    elif CASE == "mixed_dtypes":
        b3 = gl.allocate_shared_memory(gl.bfloat16, [64, 64], gl.NVMMASharedLayout.get_default_for([64, 64], gl.bfloat16))
        tcgen05_mma(a, b3, acc, use_acc=False)  # CASE:mixed_dtypes
    elif CASE == "int_acc":
        acc4 = allocate_tensor_memory(gl.int32, [128, 64], TMEM)
        tcgen05_mma(a, b, acc4, use_acc=False)  # CASE:int_acc
    elif CASE == "swizzled_operand":
        a2 = gl.allocate_shared_memory(gl.float16, [128, 64], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        a2.store(gl.full([128, 64], 1.0, gl.float16, BLK))
        fence_async_shared()
        tcgen05_mma(a2, b, acc, use_acc=False)  # CASE:swizzled_operand
    elif CASE == "barriers_not_a_list":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=bar)  # CASE:barriers_not_a_list
        mbarrier.wait(bar, 0)
    elif CASE == "barrier_is_a_buffer":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[a])  # CASE:barrier_is_a_buffer
    elif CASE == "preds_count":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar], mbarrier_preds=[True, True])  # CASE:preds_count
    elif CASE == "use_acc_tensor":
        tcgen05_mma(a, b, acc, use_acc=gl.full([4], 1, gl.int1, L1))  # CASE:use_acc_tensor
    elif CASE == "commit_buffer":
        tcgen05_mma(a, b, acc, use_acc=False)
        tcgen05_commit(a)  # CASE:commit_buffer
    elif CASE == "use_acc_unwritten":
        tcgen05_mma(a, b, acc, use_acc=True)  # CASE:use_acc_unwritten
    elif CASE == "read_acc_in_flight":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
        x = acc.load(acc.get_reg_layout())  # CASE:read_acc_in_flight
        mbarrier.wait(bar, 0)
    elif CASE == "store_acc_in_flight":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
        acc.store(gl.full([128, 64], 1.0, gl.float32, acc.get_reg_layout()))  # CASE:store_acc_in_flight
        mbarrier.wait(bar, 0)
    elif CASE == "overwrite_operand_in_flight":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
        a.store(gl.full([128, 64], 2.0, gl.float16, BLK))  # CASE:overwrite_operand_in_flight
        mbarrier.wait(bar, 0)
    elif CASE == "no_fence":
        a.store(gl.full([128, 64], 1.0, gl.float16, BLK))
        b.store(gl.full([64, 64], 1.0, gl.float16, BLK))
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])  # CASE:no_fence
        mbarrier.wait(bar, 0)
    elif CASE == "uninitialized_barrier":
        bar2 = mbarrier.allocate_mbarrier()
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar2])  # CASE:uninitialized_barrier
        mbarrier.wait(bar2, 0)
    elif CASE == "commit_count_two":
        bar3 = mbarrier.allocate_mbarrier()
        mbarrier.init(bar3, count=2)
        tcgen05_mma(a, b, acc, use_acc=False)
        tcgen05_commit(bar3)
        mbarrier.wait(bar3, 0)  # CASE:commit_count_two
    elif CASE == "wait_next_phase":
        tcgen05_mma(a, b, acc, use_acc=False, mbarriers=[bar])
        mbarrier.wait(bar, 0)
        mbarrier.wait(bar, 1)  # CASE:wait_next_phase
    gl.store(p, 1.0)


# ---------------------------------------------------------------- cluster launch control
@gluonkit.jit
def clc_kernel(p, CASE: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    result = gl.allocate_shared_memory(gl.int64, [2], RESULT)
    if CASE == "result_too_small":
        small = gl.allocate_shared_memory(gl.int64, [1], RESULT)
        mbarrier.expect(bar, 16)
        clc.try_cancel(small, bar)  # CASE:result_too_small
    elif CASE == "result_int32":
        words = gl.allocate_shared_memory(gl.int32, [4], RESULT)
        mbarrier.expect(bar, 16)
        clc.try_cancel(words, bar)  # CASE:result_int32
    elif CASE == "expect_8_bytes":
        mbarrier.expect(bar, 8)  # CASE:expect_8_bytes
        clc.try_cancel(result, bar)
        mbarrier.wait(bar, 0)
    elif CASE == "no_expect":
        clc.try_cancel(result, bar)
        mbarrier.wait(bar, 0)  # CASE:no_expect
    elif CASE == "program_id_dim":
        mbarrier.expect(bar, 16)
        clc.try_cancel(result, bar)
        mbarrier.wait(bar, 0)
        pid = clc.load_result(result).program_id(3)  # CASE:program_id_dim
    elif CASE == "load_result_of_tensor":
        response = clc.load_result(gl.arange(0, 128, L1))  # CASE:load_result_of_tensor
    gl.store(p, 1.0)


# ---------------------------------------------------------------- clusters
@gluonkit.jit
def cluster_kernel(p, CASE: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    if CASE == "from_cta_mask":
        mbarrier.init(bar, count=1)
        cluster.barrier()
        mbarrier.arrive(bar, from_cta=2)  # CASE:from_cta_mask
    elif CASE == "remote_arrivals_short":
        mbarrier.init(bar, count=2)
        cluster.barrier()
        mbarrier.arrive(bar, from_cta=1)
        mbarrier.wait(bar, 0)  # CASE:remote_arrivals_short
        cluster.barrier()
    gl.store(p, 1.0)


# ---------------------------------------------------------------- warp specialization limits
@gluonkit.jit
def _store_one(p):
    gl.store(p, 1.0)


@gluonkit.jit
def _wait_forever(bar, CASE: gl.constexpr):
    mbarrier.wait(bar, 0)  # CASE:partitions_deadlock


@gluonkit.jit
def _read_acc(acc):
    x = acc.load(acc.get_reg_layout())  # CASE:tmem_load_one_warp


@gluonkit.jit
def _idle(acc):
    pass


@gluonkit.jit
def ws_kernel(p, CASE: gl.constexpr):
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    if CASE == "too_many_warps":
        gl.warp_specialize([(_store_one, (p,)), (_store_one, (p,)), (_store_one, (p,))], [16, 16])  # CASE:too_many_warps
    elif CASE == "regs_not_multiple_of_8":
        gl.warp_specialize([(_store_one, (p,)), (_store_one, (p,))], [1], [25])  # CASE:regs_not_multiple_of_8
    elif CASE == "regs_over_256":
        gl.warp_specialize([(_store_one, (p,)), (_store_one, (p,))], [1], [512])  # CASE:regs_over_256
    elif CASE == "regs_count":
        gl.warp_specialize([(_store_one, (p,)), (_store_one, (p,))], [1], [24, 40])  # CASE:regs_count
    elif CASE == "tensor_to_worker":
        x = gl.arange(0, 128, L1)
        gl.warp_specialize([(_store_one, (p,)), (_store_one, (x,))], [1])  # CASE:tensor_to_worker
    elif CASE == "partitions_deadlock":
        gl.warp_specialize([(_wait_forever, (bar, CASE)), (_wait_forever, (bar, CASE))], [1])
    elif CASE == "tmem_load_one_warp":
        acc = allocate_tensor_memory(gl.float32, [128, 64], TMEM)
        gl.warp_specialize([(_idle, (acc,)), (_read_acc, (acc,))], [1])
    gl.store(p, 1.0)


@gluonkit.jit
def launch_kernel(p, CASE: gl.constexpr):  # CASE:num_warps_64
    gl.store(p, 1.0)


# ---------------------------------------------------------------- limits of compile-time values
@gluonkit.jit
def limits_kernel(p, CASE: gl.constexpr):
    offs = gl.arange(0, 128, L1)
    bar = mbarrier.allocate_mbarrier()
    if CASE == "static_range_huge":
        for i in gl.static_range(100000000):  # CASE:static_range_huge
            gl.store(p, 1.0)
    elif CASE == "arrival_count_over_20_bits":
        mbarrier.init(bar, count=1 << 21)  # CASE:arrival_count_over_20_bits
    elif CASE == "expect_over_20_bits":
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, 1 << 20)  # CASE:expect_over_20_bits
    elif CASE == "divide_by_zero":
        gl.store(p + offs, (offs // 0).to(gl.float32))  # CASE:divide_by_zero
    elif CASE == "modulo_zero":
        gl.store(p + offs, (offs % 0).to(gl.float32))  # CASE:modulo_zero
    elif CASE == "shift_past_width":
        gl.store(p + offs, (offs << 32).to(gl.float32))  # CASE:shift_past_width
    elif CASE == "negative_shift":
        gl.store(p + offs, (offs >> -1).to(gl.float32))  # CASE:negative_shift
    gl.store(p, 1.0)


# ============================================================================= the catalogue
def sm100(kernel, case, num_ctas=1):
    return compiled(kernel, "*fp32", target="sm_100a", CASE=case, num_ctas=num_ctas)


def interp(kernel, case, num_ctas=1):
    return interpreted(kernel, scratch(), grid=(num_ctas,), CASE=case, num_ctas=num_ctas)


# (id, kernel, how to run it, message fragment[, the function holding the marked line])
CASES = [
    ("tmem_over_512_columns", tmem_kernel, sm100(tmem_kernel, "over_512"), "1024 tensor-memory columns but a CTA has 512"),
    ("tmem_over_512_interpreted", tmem_kernel, interp(tmem_kernel, "over_512"), "smaller BLOCK_N"),
    ("tmem_two_buffers_over_512", tmem_kernel, sm100(tmem_kernel, "two_over_512"), "[128, 512] float32 -> 512 columns"),
    ("tmem_block_m_96", tmem_kernel, sm100(tmem_kernel, "block_m_96"), "M in (64, 128)"),
    ("tmem_col_stride_for_fp32", tmem_kernel, sm100(tmem_kernel, "col_stride"), "use col_stride=1"),
    ("tmem_shared_layout", tmem_kernel, sm100(tmem_kernel, "shared_layout"), "must be a TensorMemoryLayout"),
    ("tmem_store_shape", tmem_kernel, sm100(tmem_kernel, "store_shape"), "the tensor memory view has shape [128, 64]"),
    ("tmem_store_dtype", tmem_kernel, sm100(tmem_kernel, "store_dtype"), "convert it with .to(gl.float32)"),
    ("tmem_store_scalar", tmem_kernel, sm100(tmem_kernel, "store_scalar"), "must be a tensor"),
    ("tmem_load_blocked_layout", tmem_kernel, sm100(tmem_kernel, "load_blocked"), "lane-quarter rule"),
    ("tmem_store_blocked_layout", tmem_kernel, sm100(tmem_kernel, "store_blocked"), "lane-quarter rule"),
    ("tmem_index_without_stages", tmem_kernel, sm100(tmem_kernel, "index_no_stages"), "allocate [stages, M, N]"),
    ("tmem_index_past_stages", tmem_kernel, sm100(tmem_kernel, "index_past_stages"), "out of range for 2 stages"),
    ("tmem_slice_past_end", tmem_kernel, sm100(tmem_kernel, "slice_past_end"), "start + length at most"),
    ("tmem_rows_slice_register_layout", tmem_kernel, sm100(tmem_kernel, "rows_slice_reg_layout"),
     "smaller than one block 128 x 64"),
    ("tmem_instr_variant", tmem_kernel, sm100(tmem_kernel, "instr_variant"), "instr_variant must be one of"),
    ("tmem_reinterpret_bigger", tmem_kernel, sm100(tmem_kernel, "reinterpret_bigger"), "needs 128 TMEM columns"),
    ("tmem_read_before_write", tmem_kernel, interp(tmem_kernel, "read_unwritten"), "which nothing has written yet"),
    ("mma_a_in_registers", mma_kernel, sm100(mma_kernel, "a_in_registers"), "a must be one 2-D shared memory tile"),
    ("mma_acc_in_shared_memory", mma_kernel, sm100(mma_kernel, "acc_in_smem"), "allocate_tensor_memory"),
    ("mma_k_mismatch", mma_kernel, sm100(mma_kernel, "k_mismatch"), "[M, K] x [K, N] -> [M, N]"),
    ("mma_acc_rows", mma_kernel, sm100(mma_kernel, "acc_rows"), "acc is [64, 64]"),
    ("mma_acc_with_stages", mma_kernel, sm100(mma_kernel, "acc_stages"), "2-D tensor memory descriptor"),
    ("mma_mixed_dtypes", mma_kernel, sm100(mma_kernel, "mixed_dtypes"), "got float16 and bfloat16"),
    ("mma_int_accumulator", mma_kernel, sm100(mma_kernel, "int_acc"), "acc must be float32 or float16"),
    ("mma_swizzled_shared_operand", mma_kernel, sm100(mma_kernel, "swizzled_operand"),
     "tcgen05_mma: the shared memory view"),
    ("mma_barriers_not_a_list", mma_kernel, sm100(mma_kernel, "barriers_not_a_list"), "mbarriers=[bar]"),
    ("mma_barrier_is_a_buffer", mma_kernel, sm100(mma_kernel, "barrier_is_a_buffer"), "MBarrierLayout()"),
    ("mma_barrier_preds_count", mma_kernel, sm100(mma_kernel, "preds_count"), "1 mbarriers but 2 mbarrier_preds"),
    ("mma_use_acc_tensor", mma_kernel, sm100(mma_kernel, "use_acc_tensor"), "use_acc must be a scalar"),
    ("mma_commit_to_a_buffer", mma_kernel, sm100(mma_kernel, "commit_buffer"), "tcgen05_commit's barrier"),
    ("mma_use_acc_on_unwritten_tmem", mma_kernel, interp(mma_kernel, "use_acc_unwritten"), "use use_acc=False"),
    ("mma_read_acc_in_flight", mma_kernel, interp(mma_kernel, "read_acc_in_flight"), "may still be updating"),
    ("mma_store_acc_in_flight", mma_kernel, interp(mma_kernel, "store_acc_in_flight"), "may still be updating"),
    ("mma_overwrite_operand_in_flight", mma_kernel, interp(mma_kernel, "overwrite_operand_in_flight"),
     "is still reading it"),
    ("mma_without_fence", mma_kernel, interp(mma_kernel, "no_fence"), "call fence_async_shared()"),
    ("mma_uninitialized_barrier", mma_kernel, interp(mma_kernel, "uninitialized_barrier"),
     "used before mbarrier.init"),
    ("mma_commit_count_two", mma_kernel, interp(mma_kernel, "commit_count_two"), "1 of its 2 arrival(s)"),
    ("mma_wait_next_phase", mma_kernel, interp(mma_kernel, "wait_next_phase"), "can never complete"),
    ("clc_result_too_small", clc_kernel, sm100(clc_kernel, "result_too_small"), "must be a 16-byte buffer"),
    ("clc_result_int32", clc_kernel, sm100(clc_kernel, "result_int32"), "gl.int64, [2]"),
    ("clc_expect_8_bytes", clc_kernel, interp(clc_kernel, "expect_8_bytes"), "transaction bytes mismatch"),
    ("clc_no_expect", clc_kernel, interp(clc_kernel, "no_expect"), "that no mbarrier.expect announced"),
    ("clc_program_id_dim", clc_kernel, sm100(clc_kernel, "program_id_dim"), "must be 0, 1 or 2, got 3"),
    ("clc_load_result_of_tensor", clc_kernel, sm100(clc_kernel, "load_result_of_tensor"),
     "must be a shared memory descriptor"),
    ("cluster_from_cta_mask", cluster_kernel, sm100(cluster_kernel, "from_cta_mask", num_ctas=2), "[0, 1]"),
    ("cluster_remote_arrivals_short", cluster_kernel, interp(cluster_kernel, "remote_arrivals_short", num_ctas=2),
     "every CTA of the cluster"),
    ("ws_too_many_warps", ws_kernel, sm100(ws_kernel, "too_many_warps"), "at most 32 warps"),
    ("ws_regs_not_multiple_of_8", ws_kernel, sm100(ws_kernel, "regs_not_multiple_of_8"), "multiple of 8"),
    ("ws_regs_over_256", ws_kernel, sm100(ws_kernel, "regs_over_256"), "[24, 256]"),
    ("ws_regs_count", ws_kernel, sm100(ws_kernel, "regs_count"), "give one per worker"),
    ("ws_tensor_to_worker", ws_kernel, sm100(ws_kernel, "tensor_to_worker"), "gets a distributed tensor"),
    ("ws_partitions_deadlock", ws_kernel, interp(ws_kernel, "partitions_deadlock"), "deadlock", _wait_forever),
    ("ws_tmem_load_in_one_warp", ws_kernel, sm100(ws_kernel, "tmem_load_one_warp"), "power of two >= 4, got 1",
     _read_acc),
    ("static_range_too_long", limits_kernel, sm100(limits_kernel, "static_range_huge"), "use range()"),
    ("mbarrier_count_over_20_bits", limits_kernel, sm100(limits_kernel, "arrival_count_over_20_bits"),
     "[1, 1048575]"),
    ("mbarrier_expect_over_20_bits", limits_kernel, sm100(limits_kernel, "expect_over_20_bits"), "[0, 1048575]"),
    ("integer_divide_by_zero", limits_kernel, sm100(limits_kernel, "divide_by_zero"), "// by the constant 0"),
    ("integer_modulo_zero", limits_kernel, sm100(limits_kernel, "modulo_zero"), "% by the constant 0"),
    ("shift_by_the_width", limits_kernel, sm100(limits_kernel, "shift_past_width"), "must be in [0, 32)"),
    ("shift_by_a_negative", limits_kernel, sm100(limits_kernel, "negative_shift"), ">> by -1"),
    ("launch_num_warps_64", launch_kernel, compiled(launch_kernel, "*fp32", CASE="num_warps_64", num_warps=64),
     "at most 32 warps"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_blackwell_kernel_names_the_line_and_the_fix(case):
    _, kernel, run, fragment, *where = case
    check_names_line_and_fix(kernel, run, fragment, *where)


def test_tmem_over_the_limit_lists_every_allocation_with_its_line():
    """Like shared memory's, the tensor-memory budget error lists each buffer at its line, also when interpreted."""
    for run in (sm100(tmem_kernel, "two_over_512"), interp(tmem_kernel, "two_over_512")):
        with pytest.raises(CompilationError) as info:
            run()
        text = str(info.value)
        assert "allocates 768 tensor-memory columns but a CTA has 512" in text, text
        lines = [line for line in text.splitlines() if line.strip().startswith("line ")]
        assert [line.split("->")[1].strip() for line in lines] == ["256 columns", "512 columns"], text
