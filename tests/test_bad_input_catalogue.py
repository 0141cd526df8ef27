"""Bad-input catalogue (issue 13): mistakes a user makes, each one a clear gluonkit error.

Every case is a small kernel (or host call) with one mistake.  The test runs it the way a
user would (building the IR, compiling for sm_90a, or launching in the CPU interpreter) and
checks that the error is a gluonkit error (never an internal ``AssertionError``,
``KeyError``, ``IndexError``, ``AttributeError`` or ``TypeError`` from inside gluonkit), that
its message says what is wrong, and, for mistakes inside a kernel, that it names the file
and line of the statement marked ``# CASE:<name>``.  The runners and the check are in
``bad_input.py``; Blackwell (tensor memory, tcgen05), cluster, cluster-launch-control and
warp-specialization limits are in ``test_bad_input_blackwell.py``.
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
from bad_input import INTERNAL, as_case, build, check_names_line_and_fix, compiled, interpreted
from interpreting import interpreter_on
from kernel_checks import marked_line

F32P = gl.pointer_type(gl.float32)
I32P = gl.pointer_type(gl.int32)
L1 = gl.BlockedLayout([1], [32], [4], [0])
L2 = gl.BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])
SMEM = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
NVMMA = gl.NVMMASharedLayout(128, 16)


# ----------------------------------------------------------------------------- runners
def tma_case(case):
    """``tma_kernel`` with a fresh descriptor of a 64x64 float16 array, in the interpreter."""
    return as_case(lambda: interpreted(tma_kernel, _desc(), np.zeros(4, np.float32), CASE=case)(), case)


def _f32(n=128):
    return np.random.default_rng(0).standard_normal(n).astype(np.float32)


# ============================================================================= kernels
# ---------------------------------------------------------------- layout parameters
@gluonkit.jit
def layout_kernel(p, CASE: gl.constexpr):
    if CASE == "rank":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1, 1], [32], [4], [0]))  # CASE:rank
    elif CASE == "threads":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [16], [4], [0]))  # CASE:threads
    elif CASE == "warps":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [8], [0]))  # CASE:warps
    elif CASE == "spt_pow2":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([3], [32], [4], [0]))  # CASE:spt_pow2
    elif CASE == "order":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [32], [4], [1]))  # CASE:order
    elif CASE == "order_dup":
        x = gl.full([32, 32], 1.0, gl.float32, gl.BlockedLayout([1, 1], [4, 8], [4, 1], [0, 0]))  # CASE:order_dup
    elif CASE == "zero_spt":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([0], [32], [4], [0]))  # CASE:zero_spt
    elif CASE == "rank2_on_1d":
        offs = gl.arange(0, 128, layout=L2)  # CASE:rank2_on_1d
    elif CASE == "slice_dim":
        offs = gl.arange(0, 32, layout=gl.SliceLayout(2, L2))  # CASE:slice_dim
    elif CASE == "convert_shape":
        x = gl.convert_layout(gl.arange(0, 128, layout=L1), L2)  # CASE:convert_shape
    elif CASE == "not_a_layout":
        offs = gl.arange(0, 128, layout=4)  # CASE:not_a_layout
    elif CASE == "threads_pow2":
        offs = gl.arange(0, 128, layout=gl.BlockedLayout([1], [24], [4], [0]))  # CASE:threads_pow2
    gl.store(p, 1.0)


# ---------------------------------------------------------------- shapes and broadcasting
@gluonkit.jit
def shape_kernel(p, n, CASE: gl.constexpr):
    a = gl.arange(0, 128, layout=L1)
    b = gl.arange(0, 64, layout=gl.BlockedLayout([1], [32], [4], [0]))
    if CASE == "add_mismatch":
        c = a + b  # CASE:add_mismatch
    elif CASE == "broadcast_2d":
        x = gl.full([32, 16], 1.0, gl.float32, L2)
        y = gl.full([16, 32], 1.0, gl.float32, L2)
        z = x + y  # CASE:broadcast_2d
    elif CASE == "reshape_count":
        c = gl.reshape(a, [16, 16])  # CASE:reshape_count
    elif CASE == "reduce_axis":
        s = gl.sum(a, axis=1)  # CASE:reduce_axis
    elif CASE == "expand_axis":
        e = gl.expand_dims(a, 3)  # CASE:expand_axis
    elif CASE == "full_not_pow2":
        x = gl.full([100], 1.0, gl.float32, L1)  # CASE:full_not_pow2
    elif CASE == "store_shape":
        gl.store(p + a, gl.full([64], 1.0, gl.float32, L1))  # CASE:store_shape
    elif CASE == "mask_shape":
        x = gl.load(p + a, mask=b < n)  # CASE:mask_shape
    elif CASE == "permute_order":
        x = gl.permute(gl.full([32, 16], 1.0, gl.float32, L2), [0, 0])  # CASE:permute_order
    elif CASE == "where_shape":
        x = gl.where(a < n, a, b)  # CASE:where_shape
    elif CASE == "join_shape":
        x = gl.join(a, b)  # CASE:join_shape
    elif CASE == "arange_order":
        x = gl.arange(64, 0, layout=L1)  # CASE:arange_order
    elif CASE == "index_tensor":
        x = a[0]  # CASE:index_tensor
    gl.store(p, 1.0)


# ---------------------------------------------------------------- dtypes
@gluonkit.jit
def dtype_kernel(p, q, n, CASE: gl.constexpr):
    offs = gl.arange(0, 128, layout=L1)
    if CASE == "ptr_plus_ptr":
        r = p + q  # CASE:ptr_plus_ptr
    elif CASE == "ptr_plus_float":
        r = p + 1.5  # CASE:ptr_plus_float
    elif CASE == "store_to_int":
        gl.store(n + offs, 1.0)  # CASE:store_to_int
    elif CASE == "load_float":
        x = gl.load(offs.to(gl.float32))  # CASE:load_float
    elif CASE == "cast_ptr_to_float":
        x = p.to(gl.float32)  # CASE:cast_ptr_to_float
    elif CASE == "bitcast_width":
        x = gl.load(p + offs).to(gl.int16, bitcast=True)  # CASE:bitcast_width
    elif CASE == "float_shift":
        x = gl.load(p + offs) << 2  # CASE:float_shift
    elif CASE == "float_mod_bitand":
        x = gl.load(p + offs) & 1  # CASE:float_mod_bitand
    elif CASE == "mask_float":
        x = gl.load(p + offs, mask=gl.load(p + offs))  # CASE:mask_float
    elif CASE == "cast_not_dtype":
        x = offs.to("float32x")  # CASE:cast_not_dtype
    elif CASE == "where_ptr_float":
        x = gl.where(offs < n, p + offs, 1.0)  # CASE:where_ptr_float
    elif CASE == "store_value_ptr":
        gl.store(p + offs, q + offs)  # CASE:store_value_ptr
    elif CASE == "exp_int":
        x = gl.exp(offs)  # CASE:exp_int
    gl.store(p, 1.0)


# ---------------------------------------------------------------- shared memory
@gluonkit.jit
def smem_kernel(p, CASE: gl.constexpr):
    if CASE == "over_limit":
        a = gl.allocate_shared_memory(gl.float32, [256, 256], SMEM)  # CASE:over_limit
        a.store(gl.full([256, 256], 1.0, gl.float32, L2))
    elif CASE == "store_shape":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        a.store(gl.full([32, 16], 1.0, gl.float32, L2))  # CASE:store_shape
    elif CASE == "store_dtype":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        a.store(gl.full([32, 32], 1, gl.int32, L2))  # CASE:store_dtype
    elif CASE == "index_rank":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        b = a.index(0).index(0)  # CASE:index_rank
    elif CASE == "slice_past_end":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        b = a.slice(16, 32, dim=1)  # CASE:slice_past_end
    elif CASE == "stage_dim_zero":
        a = gl.allocate_shared_memory(gl.float32, [0, 32, 32], SMEM)  # CASE:stage_dim_zero
    elif CASE == "layout_not_shared":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], L2)  # CASE:layout_not_shared
    elif CASE == "shape_not_pow2":
        a = gl.allocate_shared_memory(gl.float32, [32, 30], SMEM)  # CASE:shape_not_pow2
    elif CASE == "load_not_distributed":
        a = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)
        x = a.load(SMEM)  # CASE:load_not_distributed
    gl.store(p, 1.0)


# ---------------------------------------------------------------- barriers
@gluonkit.jit
def barrier_kernel(p, CASE: gl.constexpr):
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    if CASE == "uninit_arrive":
        mbarrier.arrive(bar)  # CASE:uninit_arrive
    elif CASE == "uninit_wait":
        mbarrier.wait(bar, 0)  # CASE:uninit_wait
    elif CASE == "never_completes":
        mbarrier.init(bar, count=2)
        mbarrier.arrive(bar)
        mbarrier.wait(bar, 0)  # CASE:never_completes
    elif CASE == "expect_too_many_bytes":
        mbarrier.init(bar, count=1)
        mbarrier.expect(bar, 128)
        mbarrier.wait(bar, 0)  # CASE:expect_too_many_bytes
    elif CASE == "count_zero":
        mbarrier.init(bar, count=0)  # CASE:count_zero
    elif CASE == "not_a_barrier":
        a = gl.allocate_shared_memory(gl.float32, [32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        mbarrier.init(a, count=1)  # CASE:not_a_barrier
    elif CASE == "arrive_too_many":
        mbarrier.init(bar, count=1)
        mbarrier.arrive(bar)
        mbarrier.arrive(bar)
        mbarrier.wait(bar, 0)  # CASE:arrive_too_many
    elif CASE == "wait_wrong_phase":
        mbarrier.init(bar, count=1)
        mbarrier.arrive(bar)
        mbarrier.wait(bar, 0)
        mbarrier.wait(bar, 1)  # CASE:wait_wrong_phase
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
        gl.warp_specialize(_worker, [1])  # CASE:not_list
    elif CASE == "warps_count":
        gl.warp_specialize([(_worker, (p,)), (_worker, (p,))], [1, 2])  # CASE:warps_count
    elif CASE == "arg_count":
        gl.warp_specialize([(_worker, (p,)), (_worker_two, (p,))], [1])  # CASE:arg_count
    elif CASE == "not_jit":
        gl.warp_specialize([(_worker, (p,)), (print, (p,))], [1])  # CASE:not_jit
    elif CASE == "zero_warps":
        gl.warp_specialize([(_worker, (p,)), (_worker, (p,))], [0])  # CASE:zero_warps
    gl.store(p, 1.0)


# ---------------------------------------------------------------- TMA in kernels
@gluonkit.jit
def tma_kernel(desc, p, CASE: gl.constexpr):
    smem = gl.allocate_shared_memory(desc.dtype, desc.block_type.shape, desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    if CASE == "coord_count":
        tma.async_load(desc, [0], bar, smem)  # CASE:coord_count
    elif CASE == "wrong_smem_shape":
        other = gl.allocate_shared_memory(desc.dtype, [32, 64], desc.layout)
        tma.async_load(desc, [0, 0], bar, other)  # CASE:wrong_smem_shape
    elif CASE == "wrong_smem_dtype":
        other = gl.allocate_shared_memory(gl.float32, desc.block_type.shape, desc.layout)
        tma.async_load(desc, [0, 0], bar, other)  # CASE:wrong_smem_dtype
    elif CASE == "float_coord":
        tma.async_load(desc, [0.5, 0], bar, smem)  # CASE:float_coord
    elif CASE == "bytes_short":
        mbarrier.expect(bar, desc.block_type.nbytes // 2)  # CASE:bytes_short
        tma.async_load(desc, [0, 0], bar, smem)
        mbarrier.wait(bar, 0)
    elif CASE == "pointer_as_desc":
        tma.async_load(p, [0, 0], bar, smem)  # CASE:pointer_as_desc
    gl.store(p, 1.0)


@gluonkit.jit
def host_kernel(p, n, BLOCK: gl.constexpr):
    offs = gl.arange(0, BLOCK, layout=gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(p + offs, gl.load(p + offs, mask=offs < n) + 1.0, mask=offs < n)


# ============================================================================= the catalogue
def _desc():
    return TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 64], NVMMA)


# (id, kernel, how to run it, message fragment, error type)
KERNEL_CASES = [
    ("layout_rank", layout_kernel, build(layout_kernel, [F32P], CASE="rank"), "must have rank"),
    ("layout_threads_not_32", layout_kernel, build(layout_kernel, [F32P], CASE="threads"), "multiply to 32"),
    ("layout_threads_not_pow2", layout_kernel, build(layout_kernel, [F32P], CASE="threads_pow2"), "powers of two"),
    ("layout_warps_vs_num_warps", layout_kernel, build(layout_kernel, [F32P], CASE="warps"),
     "make its warps_per_cta multiply to 4"),
    ("layout_spt_not_pow2", layout_kernel, build(layout_kernel, [F32P], CASE="spt_pow2"), "powers of two, got [3]"),
    ("layout_spt_zero", layout_kernel, build(layout_kernel, [F32P], CASE="zero_spt"), "powers of two, got [0]"),
    ("layout_order_out_of_range", layout_kernel, build(layout_kernel, [F32P], CASE="order"), "permutation of [0]"),
    ("layout_order_repeated", layout_kernel, build(layout_kernel, [F32P], CASE="order_dup"), "permutation of [0, 1]"),
    ("layout_rank2_for_1d_tensor", layout_kernel, build(layout_kernel, [F32P], CASE="rank2_on_1d"),
     "cannot lay out a tensor of shape [128]"),
    ("layout_slice_dim", layout_kernel, build(layout_kernel, [F32P], CASE="slice_dim"), "dim must be in [0, 2)"),
    ("layout_convert_rank", layout_kernel, build(layout_kernel, [F32P], CASE="convert_shape"),
     "cannot lay out a tensor of shape [128]"),
    ("layout_not_a_layout", layout_kernel, build(layout_kernel, [F32P], CASE="not_a_layout"),
     "must be a distributed layout"),
    ("shape_add_mismatch", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="add_mismatch"),
     "cannot broadcast shapes [128] and [64]"),
    ("shape_broadcast_2d", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="broadcast_2d"),
     "cannot broadcast shapes [32, 16] and [16, 32]"),
    ("shape_reshape_count", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="reshape_count"),
     "(128 elements) to [16, 16] (256 elements)"),
    ("shape_reduce_axis", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="reduce_axis"),
     "axis 1 is out of range for rank 1"),
    ("shape_expand_axis", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="expand_axis"),
     "axis 3 is out of range"),
    ("shape_full_not_pow2", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="full_not_pow2"),
     "powers of two, got [100]"),
    ("shape_store_value", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="store_shape"),
     "does not broadcast to the pointer shape [128]"),
    ("shape_mask", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="mask_shape"),
     "the mask of load of shape [64]"),
    ("shape_permute_order", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="permute_order"),
     "permutation of [0, 1], got [0, 0]"),
    ("shape_where", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="where_shape"), "cannot broadcast"),
    ("shape_join", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="join_shape"), "cannot broadcast"),
    ("shape_arange_reversed", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="arange_order"),
     "positive power of two, got 0 - 64 = -64"),
    ("shape_integer_index", shape_kernel, build(shape_kernel, [F32P, gl.int32], CASE="index_tensor"),
     "only indexing with None and ':'"),
    ("dtype_pointer_plus_pointer", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="ptr_plus_ptr"),
     "pointers support only pointer + integer"),
    ("dtype_pointer_plus_float", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="ptr_plus_float"),
     "offset must be an integer"),
    ("dtype_store_to_int", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="store_to_int"),
     "store needs a pointer"),
    ("dtype_load_from_float", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="load_float"),
     "load needs a pointer"),
    ("dtype_cast_pointer_to_float", dtype_kernel,
     build(dtype_kernel, [F32P, F32P, gl.int32], CASE="cast_ptr_to_float"), "cannot cast a pointer"),
    ("dtype_bitcast_width", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="bitcast_width"),
     "bitcast needs types of one width"),
    ("dtype_float_shift", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="float_shift"),
     "<< needs integer operands"),
    ("dtype_float_bitand", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="float_mod_bitand"),
     "& needs integer operands"),
    ("dtype_float_mask", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="mask_float"),
     "must be boolean (int1)"),
    ("dtype_cast_to_string", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="cast_not_dtype"),
     "dtype must be a gl dtype"),
    ("dtype_where_pointer_float", dtype_kernel,
     build(dtype_kernel, [F32P, F32P, gl.int32], CASE="where_ptr_float"), "where is not defined for ptr<float32>"),
    ("dtype_store_pointers", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="store_value_ptr"),
     "cannot store pointers"),
    ("dtype_exp_of_int", dtype_kernel, build(dtype_kernel, [F32P, F32P, gl.int32], CASE="exp_int"),
     "convert with .to(gl.float32)"),
    ("smem_over_limit_compiled", smem_kernel, compiled(smem_kernel, "*fp32", CASE="over_limit"),
     "Hardware limit: 232448"),
    ("smem_over_limit_interpreted", smem_kernel,
     interpreted(smem_kernel, np.zeros(4, np.float32), CASE="over_limit"), "Hardware limit: 232448"),
    ("smem_store_shape", smem_kernel, build(smem_kernel, [F32P], CASE="store_shape"),
     "the shared memory view has shape [32, 32]"),
    ("smem_store_dtype", smem_kernel, build(smem_kernel, [F32P], CASE="store_dtype"), "convert it with .to"),
    ("smem_index_past_stages", smem_kernel, build(smem_kernel, [F32P], CASE="index_rank"),
     "selects a tile along a leading stage dimension"),
    ("smem_slice_past_end", smem_kernel, build(smem_kernel, [F32P], CASE="slice_past_end"),
     "start + length at most"),
    ("smem_stage_dim_zero", smem_kernel, build(smem_kernel, [F32P], CASE="stage_dim_zero"), "must be positive"),
    ("smem_distributed_layout", smem_kernel, build(smem_kernel, [F32P], CASE="layout_not_shared"),
     "must be a shared layout"),
    ("smem_shape_not_pow2", smem_kernel, build(smem_kernel, [F32P], CASE="shape_not_pow2"), "powers of two"),
    ("smem_load_shared_layout", smem_kernel, build(smem_kernel, [F32P], CASE="load_not_distributed"),
     "must be a distributed layout"),
    ("barrier_arrive_before_init", barrier_kernel,
     interpreted(barrier_kernel, np.zeros(4, np.float32), CASE="uninit_arrive"), "used before mbarrier.init"),
    ("barrier_wait_before_init", barrier_kernel,
     interpreted(barrier_kernel, np.zeros(4, np.float32), CASE="uninit_wait"), "used before mbarrier.init"),
    ("barrier_too_few_arrivals", barrier_kernel,
     interpreted(barrier_kernel, np.zeros(4, np.float32), CASE="never_completes"), "can never complete"),
    ("barrier_expected_bytes_never_come", barrier_kernel,
     interpreted(barrier_kernel, np.zeros(4, np.float32), CASE="expect_too_many_bytes"),
     "128 transaction byte(s)"),
    ("barrier_count_zero", barrier_kernel, build(barrier_kernel, [F32P], CASE="count_zero"),
     "count must be in [1, 1048575]"),
    ("barrier_not_int64", barrier_kernel, build(barrier_kernel, [F32P], CASE="not_a_barrier"),
     "mbarrier.MBarrierLayout()"),
    ("barrier_phase_already_passed", barrier_kernel,
     interpreted(barrier_kernel, np.zeros(4, np.float32), CASE="arrive_too_many"), "can never complete"),
    ("barrier_wait_wrong_phase", barrier_kernel,
     interpreted(barrier_kernel, np.zeros(4, np.float32), CASE="wait_wrong_phase"), "parity 1"),
    ("ws_not_a_list", ws_kernel, build(ws_kernel, [F32P], CASE="not_list"), "non-empty list of (function, args)"),
    ("ws_warp_counts", ws_kernel, build(ws_kernel, [F32P], CASE="warps_count"), "give one per worker"),
    ("ws_missing_argument", ws_kernel, build(ws_kernel, [F32P], CASE="arg_count"), "missing a required argument"),
    ("ws_plain_function", ws_kernel, build(ws_kernel, [F32P], CASE="not_jit"), "must be a @gluonkit.jit function"),
    ("ws_zero_warps", ws_kernel, build(ws_kernel, [F32P], CASE="zero_warps"), "must be a power of two"),
    ("tma_coordinate_count", tma_kernel, tma_case("coord_count"), "one entry per dimension"),
    ("tma_smem_shape", tma_kernel, tma_case("wrong_smem_shape"), "[64, 64]"),
    ("tma_smem_dtype", tma_kernel, tma_case("wrong_smem_dtype"), "x float16"),
    ("tma_float_coordinate", tma_kernel, tma_case("float_coord"), "does not fit in int32"),
    ("tma_expect_bytes_short", tma_kernel, tma_case("bytes_short"), "transaction bytes mismatch"),
    ("tma_pointer_as_descriptor", tma_kernel, tma_case("pointer_as_desc"),
     "must be a tensor descriptor"),
]

def _file_of(kernel) -> str:
    return inspect.getsourcefile(kernel.fn)


@pytest.mark.parametrize("case", KERNEL_CASES, ids=[c[0] for c in KERNEL_CASES])
def test_bad_kernel_names_the_line_and_the_fix(case):
    _, kernel, run, fragment = case
    if run.case != "over_limit":
        check_names_line_and_fix(kernel, run, fragment)
        return
    with pytest.raises(CompilationError) as info:  # the budget error names the kernel and lists each buffer's line
        run()
    text, line = str(info.value), marked_line(kernel, f"CASE:{run.case}")
    assert fragment in text and not isinstance(info.value.__cause__, INTERNAL), text
    assert info.value.loc.line == inspect.getsourcelines(kernel.fn)[1] + 1
    assert f"{_file_of(kernel)}:{line}:" in text and "gl.allocate_shared_memory(gl.float32, [256, 256]" in text


def test_interpreter_over_limit_lists_every_buffer():
    """The interpreter stops an over-limit kernel with the compiler's per-buffer list."""
    with pytest.raises(CompilationError) as info:
        interpreted(smem_kernel, np.zeros(4, np.float32), CASE="over_limit")()
    text = str(info.value)
    assert "Required: 262144" in text and "262144 bytes at offset 0: a [256, 256] x float32 buffer" in text
    assert "smaller tiles" in text


def test_layout_warps_follow_the_partition_num_warps():
    """Inside a 4-warp launch, a layout of 4 warps is accepted (the check compares with num_warps)."""
    host_kernel.build_ir([F32P, gl.int32], {"BLOCK": 128}, 4, {})
    with pytest.raises(CompilationError, match="num_warps=8"):
        host_kernel.build_ir([F32P, gl.int32], {"BLOCK": 128}, 8, {})


# ----------------------------------------------------------------------------- host calls
HOST_CASES = [
    ("host_missing_argument", lambda x: host_kernel[(1,)](x, BLOCK=128), "n"),
    ("host_extra_argument", lambda x: host_kernel[(1,)](x, 128, 128, 7), "argument"),
    ("host_unknown_keyword", lambda x: host_kernel[(1,)](x, 128, BLOCK=128, blocks=3), "blocks"),
    ("host_constexpr_given_tensor", lambda x: host_kernel[(1,)](x, 128, BLOCK=x),
     "'BLOCK' is a gl.constexpr and needs a compile-time value"),
    ("host_grid_float", lambda x: host_kernel[(0.5,)](x, 128, BLOCK=128), "grid"),
    ("host_grid_four_dims", lambda x: host_kernel[(1, 1, 1, 1)](x, 128, BLOCK=128), "grid"),
    ("host_grid_negative", lambda x: host_kernel[(-1,)](x, 128, BLOCK=128), "grid"),
    ("host_num_warps_3", lambda x: host_kernel[(1,)](x, 128, BLOCK=128, num_warps=3), "num_warps"),
    ("host_list_as_pointer", lambda x: host_kernel[(1,)]([1.0, 2.0], 128, BLOCK=128), "parameter 'p'"),
    ("host_string_as_scalar", lambda x: host_kernel[(1,)](x, "128", BLOCK=128), "parameter 'n'"),
]


@pytest.mark.parametrize("case", HOST_CASES, ids=[c[0] for c in HOST_CASES])
def test_bad_launch_is_a_gluonkit_error(case):
    _, call, fragment = case
    x = _f32()
    with interpreter_on():
        with pytest.raises(CompilationError) as info:
            call(x)
    assert fragment in str(info.value), str(info.value)
    assert "host_kernel" in str(info.value)


DESC_CASES = [
    ("desc_dtype_vs_layout", lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 64],
                                                                 gl.NVMMASharedLayout(128, 32)), "element_bitwidth"),
    ("desc_transposed_layout", lambda: TensorDescriptor.from_tensor(
        np.zeros((64, 64), np.float16), [64, 64], gl.NVMMASharedLayout(128, 16, transposed=True)), "transposed"),
    ("desc_non_contiguous", lambda: TensorDescriptor.from_tensor(np.zeros((64, 128), np.float16)[:, ::2],
                                                                [64, 64], NVMMA), "stride"),
    ("desc_misaligned_stride", lambda: TensorDescriptor.from_tensor(np.zeros((64, 65), np.float16)[:, :64],
                                                                   [64, 64], NVMMA), "stride"),
    ("desc_bool_dtype", lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.bool_), [64, 64], NVMMA),
     "dtype"),
    ("desc_block_rank", lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64], NVMMA),
     "block_shape"),
    ("desc_layout_not_nvmma", lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 64], L2),
     "layout"),
    ("desc_base_misaligned", lambda: TensorDescriptor.from_tensor(
        np.zeros(64 * 64 + 1, np.float16)[1:].reshape(64, 64), [64, 64], NVMMA), "16-byte aligned"),
    ("desc_block_not_pow2", lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 48], NVMMA),
     "power of two, got 48"),
    ("desc_block_narrower_than_swizzle", lambda: TensorDescriptor.from_tensor(
        np.zeros((64, 64), np.float16), [64, 32], NVMMA), "too small for a 128-byte swizzle"),
    ("desc_box_row_under_16_bytes", lambda: TensorDescriptor.from_tensor(  # checked when a kernel takes it
        np.zeros((64, 64), np.float16), [64, 4], gl.NVMMASharedLayout(0, 16)).arg_type, "multiple of 16 bytes"),
    ("desc_rank_6", lambda: TensorDescriptor.from_tensor(np.zeros((2,) * 6, np.float16), [2] * 6,
                                                         gl.NVMMASharedLayout(0, 16, rank=6)), "rank 1 to 5"),
    ("desc_zero_extent", lambda: TensorDescriptor.from_tensor(np.zeros((0, 64), np.float16), [64, 64], NVMMA),
     "must be in [1, 2**32]"),
    ("desc_padding_name", lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 64], NVMMA,
                                                              padding="zeros"), "'zero', 'nan'"),
]


@pytest.mark.parametrize("case", DESC_CASES, ids=[c[0] for c in DESC_CASES])
def test_bad_tensor_descriptor_says_which_parameter(case):
    """Host descriptors raise ValueError/TypeError naming the parameter (as Gluon's do), from the user's call."""
    _, make, fragment = case
    with pytest.raises((ValueError, TypeError)) as info:
        make()
    assert str(info.value).startswith("TensorDescriptor") or "parameter" in str(info.value), str(info.value)
    assert fragment in str(info.value), str(info.value)


def test_catalogue_is_large_enough():
    assert len(KERNEL_CASES) + len(HOST_CASES) + len(DESC_CASES) >= 60


# ----------------------------------------------------------------------------- on the GPU path
# The same mistakes on the real launch path (H100 + torch): the checks run before the driver
# is called, and name the parameter.  The CPU-only tests of these checks (a CPU tensor, a
# tensor on another device, a non-CUDA DLPack array) are in test_runtime_cpu.py.
def _gpu_cases():
    import torch

    x = torch.randn(256, device="cuda")
    m = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    return [
        ("cpu_tensor", lambda: host_kernel[(1,)](x.cpu(), 128, BLOCK=128), (ValueError, CompilationError),
         "parameter 'p'"),
        ("tma_transposed_view", lambda: TensorDescriptor.from_tensor(m.t(), [64, 64], NVMMA), ValueError,
         "contiguous"),
        ("tma_misaligned_base", lambda: TensorDescriptor.from_tensor(m.view(-1)[1:4097].view(64, 64), [64, 64],
                                                                    NVMMA), ValueError, "16-byte aligned"),
        ("grid_zero_dims", lambda: host_kernel[()](x, 128, BLOCK=128), CompilationError, "grid"),
    ]


@pytest.mark.gpu
def test_bad_launches_on_the_gpu_path_name_the_parameter():
    from gluonkit.runtime.driver import has_gpu

    if not has_gpu():
        pytest.skip("needs an NVIDIA GPU and driver")
    pytest.importorskip("torch")
    for name, call, error, fragment in _gpu_cases():
        with pytest.raises(error) as info:
            call()
        assert fragment in str(info.value), (name, str(info.value))
