"""Bad-input catalogue (issue 13): mistakes a user makes, each one a clear gluonkit error.

Every case is a small kernel (or host call) with one mistake.  The test runs it the way a
user would (building the IR, compiling for sm_90a, or launching in the CPU interpreter) and
checks that the error is a gluonkit error (never an internal ``AssertionError``,
``KeyError``, ``IndexError``, ``AttributeError`` or ``TypeError`` from inside gluonkit), that
its message says what is wrong, and, for mistakes inside a kernel, that it names the file
and line of the statement marked ``# BAD``.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor
from interpreting import interpreter_on
from kernel_checks import marked_line

F32P = gl.pointer_type(gl.float32)
I32P = gl.pointer_type(gl.int32)
L1 = gl.BlockedLayout([1], [32], [4], [0])
L2 = gl.BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])
SMEM = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
NVMMA = gl.NVMMASharedLayout(128, 16)


# ----------------------------------------------------------------------------- runners
def build(kernel, types, **constexprs):
    return lambda: kernel.build_ir(types, constexprs, constexprs.pop("num_warps", 4) if False else 4, {})


def compiled(kernel, *args, **kwargs):
    return lambda: kernel.compile(*args, target="sm_90a", **kwargs)


def interpreted(kernel, *args, grid=(1,), **kwargs):
    def run():
        with interpreter_on():
            kernel[grid](*args, **kwargs)
    return run


def _f32(n=128):
    return np.random.default_rng(0).standard_normal(n).astype(np.float32)


# ============================================================================= kernels
# ---------------------------------------------------------------- layout parameters
@gluonkit.jit
def layout_kernel(p, CASE: gl.constexpr):
    if CASE == "rank":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1, 1], [32], [4], [0]))  # BAD
    elif CASE == "threads":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [16], [4], [0]))  # BAD
    elif CASE == "warps":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [8], [0]))  # BAD
    elif CASE == "spt_pow2":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([3], [32], [4], [0]))  # BAD
    elif CASE == "order":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [1]))  # BAD
    elif CASE == "order_dup":
        x = gl.full([32, 32], 1.0, gl.float32, gl.BlockedLayout([1, 1], [4, 8], [4, 1], [0, 0]))  # BAD
    elif CASE == "zero_spt":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([0], [32], [4], [0]))  # BAD
    elif CASE == "rank2_on_1d":
        offs = gl.arange(0, 128, layout=L2)  # BAD
    elif CASE == "slice_dim":
        offs = gl.arange(0, 32, layout=gl.SliceLayout(2, L2))  # BAD
    elif CASE == "convert_shape":
        x = gl.convert_layout(gl.arange(0, 128, layout=L1), L2)  # BAD
    elif CASE == "not_a_layout":
        offs = gl.arange(0, 128, layout=4)  # BAD
    elif CASE == "threads_pow2":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [24], [4], [0]))  # BAD
    gl.store(p, 1.0)


# ---------------------------------------------------------------- shapes and broadcasting
@gluonkit.jit
def shape_kernel(p, n, CASE: gl.constexpr):
    a = gl.arange(0, 128, layout=L1)
    b = gl.arange(0, 64, layout=gl.BlockedLayout([1], [32], [4], [0]))
    if CASE == "add_mismatch":
        c = a + b  # BAD
    elif CASE == "broadcast_2d":
        x = gl.full([32, 16], 1.0, gl.float32, L2)
        y = gl.full([16, 32], 1.0, gl.float32, L2)
        z = x + y  # BAD
    elif CASE == "reshape_count":
        c = gl.reshape(a, [16, 16])  # BAD
    elif CASE == "reduce_axis":
        s = gl.sum(a, axis=1)  # BAD
    elif CASE == "expand_axis":
        e = gl.expand_dims(a, 3)  # BAD
    elif CASE == "full_not_pow2":
        x = gl.full([100], 1.0, gl.float32, L1)  # BAD
    elif CASE == "store_shape":
        gl.store(p + a, gl.full([64], 1.0, gl.float32, L1))  # BAD
    elif CASE == "mask_shape":
        x = gl.load(p + a, mask=b < n)  # BAD
    elif CASE == "permute_order":
        x = gl.permute(gl.full([32, 16], 1.0, gl.float32, L2), [0, 0])  # BAD
    elif CASE == "where_shape":
        x = gl.where(a < n, a, b)  # BAD
    elif CASE == "join_shape":
        x = gl.join(a, b)  # BAD
    elif CASE == "arange_order":
        x = gl.arange(64, 0, layout=L1)  # BAD
    elif CASE == "index_tensor":
        x = a[0]  # BAD
    gl.store(p, 1.0)


# ---------------------------------------------------------------- dtypes
@gluonkit.jit
def dtype_kernel(p, q, n, CASE: gl.constexpr):
    offs = gl.arange(0, 128, layout=L1)
    if CASE == "ptr_plus_ptr":
        r = p + q  # BAD
    elif CASE == "ptr_plus_float":
        r = p + 1.5  # BAD
    elif CASE == "store_to_int":
        gl.store(n + offs, 1.0)  # BAD
    elif CASE == "load_float":
        x = gl.load(offs.to(gl.float32))  # BAD
    elif CASE == "cast_ptr_to_float":
        x = p.to(gl.float32)  # BAD
    elif CASE == "bitcast_width":
        x = gl.load(p + offs).to(gl.int16, bitcast=True)  # BAD
    elif CASE == "float_shift":
        x = gl.load(p + offs) << 2  # BAD
    elif CASE == "float_mod_bitand":
        x = gl.load(p + offs) & 1  # BAD
    elif CASE == "mask_float":
        x = gl.load(p + offs, mask=gl.load(p + offs))  # BAD
    elif CASE == "cast_not_dtype":
        x = offs.to("float32x")  # BAD
    elif CASE == "where_ptr_float":
        x = gl.where(offs < n, p + offs, 1.0)  # BAD
    elif CASE == "store_value_ptr":
        gl.store(p + offs, q + offs)  # BAD
    elif CASE == "exp_int":
        x = gl.exp(offs)  # BAD
    gl.store(p, 1.0)


# ---------------------------------------------------------------- shared memory
@gluonkit.jit
def smem_kernel(p, CASE: gl.constexpr):
    if CASE == "over_limit":
        a = gl.allocate_shared_memory(gl.float32, [256, 256], SMEM)  # BAD
        a.store(gl.full([256, 256], 1.0, gl.float32, L2))
    elif CASE == "store_shape":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        a.store(gl.full([32, 16], 1.0, gl.float32, L2))  # BAD
    elif CASE == "store_dtype":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        a.store(gl.full([32, 32], 1, gl.int32, L2))  # BAD
    elif CASE == "index_rank":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        b = a.index(0).index(0)  # BAD
    elif CASE == "slice_past_end":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        b = a.slice(16, 32, dim=1)  # BAD
    elif CASE == "rank_mismatch_layout":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], gl.SwizzledSharedLayout(1, 1, 1, [0]))  # BAD
    elif CASE == "layout_not_shared":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], L2)  # BAD
    elif CASE == "shape_not_pow2":
        a = gl.allocate_shared_memory(gl.float32, [32, 30], SMEM)  # BAD
    elif CASE == "load_not_distributed":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        x = a.load(SMEM)  # BAD
    gl.store(p, 1.0)


# ---------------------------------------------------------------- barriers
@gluonkit.jit
def barrier_kernel(p, CASE: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    if CASE == "uninit_arrive":
        mbarrier.arrive(bar)  # BAD
    elif CASE == "uninit_wait":
        mbarrier.wait(bar, 0)  # BAD
    elif CASE == "never_completes":
        mbarrier.init(bar, count=2)
        mbarrier.arrive(bar)
        mbarrier.wait(bar, 0)  # BAD
    elif CASE == "expect_too_many_bytes":
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, 128)
        mbarrier.wait(bar, 0)  # BAD
    elif CASE == "count_zero":
        mbarrier.init(bar, count=0)  # BAD
    elif CASE == "not_a_barrier":
        a = gl.allocate_shared_memory(gl.float32, [32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        mbarrier.init(a, count=1)  # BAD
    elif CASE == "arrive_too_many":
        mbarrier.init(bar, count=1)
        mbarrier.arrive(bar)
        mbarrier.arrive(bar)  # BAD
        mbarrier.wait(bar, 0)
    elif CASE == "wait_wrong_phase":
        mbarrier.init(bar, count=1)
        mbarrier.arrive(bar)
        mbarrier.wait(bar, 0)
        mbarrier.wait(bar, 1)  # BAD
    gl.store(p, 1.0)


# ---------------------------------------------------------------- warp specialization
@gluonkit.jit
def _worker(out):
    gl.store(out, 2.0)


@gluonkit.jit
def _worker_two(out, x):
    gl.store(out, x)


@gluonkit.jit
def ws_kernel(p, CASE: gl.constexpr):
    if CASE == "not_list":
        gl.warp_specialize(_worker, [1])  # BAD
    elif CASE == "warps_count":
        gl.warp_specialize([(_worker, (p,)), (_worker, (p,))], [1, 2])  # BAD
    elif CASE == "arg_count":
        gl.warp_specialize([(_worker, (p,)), (_worker_two, (p,))], [1])  # BAD
    elif CASE == "not_jit":
        gl.warp_specialize([(_worker, (p,)), (print, (p,))], [1])  # BAD
    elif CASE == "zero_warps":
        gl.warp_specialize([(_worker, (p,)), (_worker, (p,))], [0])  # BAD
    gl.store(p, 1.0)


# ---------------------------------------------------------------- TMA in kernels
@gluonkit.jit
def tma_kernel(desc, p, CASE: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    if CASE == "coord_count":
        tma.async_load(desc, [0], bar, smem)  # BAD
    elif CASE == "wrong_smem_shape":
        other = gl.allocate_shared_memory(desc.dtype, [32, 32], desc.layout)
        tma.async_load(desc, [0, 0], bar, other)  # BAD
    elif CASE == "wrong_smem_dtype":
        other = gl.allocate_shared_memory(gl.float32, desc.block_type.shape, desc.layout)
        tma.async_load(desc, [0, 0], bar, other)  # BAD
    elif CASE == "float_coord":
        tma.async_load(desc, [0.5, 0], bar, smem)  # BAD
    elif CASE == "bytes_short":
        mbarrier.expect(bar, desc.block_type.nbytes // 2)
        tma.async_load(desc, [0, 0], bar, smem)
        mbarrier.wait(bar, 0)  # BAD
    elif CASE == "pointer_as_desc":
        tma.async_load(p, [0, 0], bar, smem)  # BAD
    gl.store(p, 1.0)
