"""The CPU interpreter on hand-built IR (independent of the frontend), checked against numpy.

Kernels are built with :class:`ir_helpers.KernelBuilder` (one op per numbered source line),
with concrete layouts, so each test pins exactly what the interpreter does: the GPU's
per-thread register files, C integer semantics, rounding of narrow floats, the reduction
tree, and the faults it reports (out of bounds, replicated copies that disagree, layouts
that an op without data movement cannot produce, failed assumptions and hints).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluonkit import ir
from gluonkit.interpret import InterpreterError, Memory, Tensor, numpy_dtype, run_grid
from gluonkit.interpret.values import from_logical, to_logical
from gluonkit.layouts.distributed import BlockedLayout, DistributedLinearLayout, SliceLayout
from ir_helpers import KernelBuilder, tensor

F32 = ir.float32
I32 = ir.int32


def blocked(spt, tpw, wpc, order):
    return BlockedLayout(spt, tpw, wpc, order)


L1 = blocked([2], [32], [4], [0])  # 1-D: 256 elements per tile
L2 = blocked([1, 4], [4, 8], [4, 1], [1, 0])  # 2-D rows: each warp covers 4 rows x 32 columns


class Kernel(KernelBuilder):
    """KernelBuilder plus the few value-making helpers the tests share."""

    def const(self, value, ty, src=None):
        return self.value("constant", type=ty, attrs={"value": value}, src=src)

    def splat(self, scalar, shape, layout):
        return self.value("splat", [scalar], tensor(shape, layout, scalar.type))

    def bin(self, fn, a, b, src=None, **attrs):
        return self.value("binary", [a, b], a.type, {"fn": fn, **attrs}, src=src)

    def cmp(self, pred, a, b):
        ty = a.type.with_element(ir.int1) if isinstance(a.type, ir.TensorType) else ir.int1
        return self.value("compare", [a, b], ty, {"predicate": pred})

    def ptrs(self, ptr, offsets):
        s = self.splat(ptr, offsets.type.shape, offsets.type.layout)
        return self.value("addptr", [s, offsets], s.type)

    def load(self, ptrs, mask=None, other=None, src=None):
        ty = ptrs.type.with_element(ptrs.type.element.element)
        operands = [ptrs] + [v for v in (mask, other) if v is not None]
        return self.value("load", operands, ty, {"has_mask": mask is not None, "has_other": other is not None}, src=src)

    def store(self, ptrs, value, mask=None, src=None):
        operands = [ptrs, value] + ([mask] if mask is not None else [])
        self.op("store", operands, [], {"has_mask": mask is not None}, src=src)

    def offsets_2d(self, rows, cols, layout, row_stride):
        """``r * row_stride + c`` for a rows x cols tile in ``layout`` (row_stride a scalar)."""
        r = self.value("arange", type=tensor([rows], SliceLayout(1, layout), I32), attrs={"start": 0, "end": rows})
        c = self.value("arange", type=tensor([cols], SliceLayout(0, layout), I32), attrs={"start": 0, "end": cols})
        r2 = self.value("expand_dims", [r], tensor([rows, 1], layout, I32), {"axis": 1})
        c2 = self.value("expand_dims", [c], tensor([1, cols], layout, I32), {"axis": 0})
        stride = self.splat(row_stride, [rows, 1], layout)
        r2 = self.bin("mul", r2, stride)
        rb = self.value("broadcast", [r2], tensor([rows, cols], layout, I32))
        cb = self.value("broadcast", [c2], tensor([rows, cols], layout, I32))
        return self.bin("add", rb, cb)

    def reduce(self, x, axis, fn="add", result_layout=None):
        element = x.type.element
        combine = ir.Block([element, element])
        with self.inside(combine):
            out = self.value("binary", combine.args, element, {"fn": fn})
            self.op("yield", [out])
        shape = [s for i, s in enumerate(x.type.shape) if i != axis]
        if not shape:
            return self.op("reduce", [x], [element], {"axis": axis}, [combine]).result
        result = tensor(shape, result_layout or SliceLayout(axis, x.type.layout), element)
        return self.op("reduce", [x], [result], {"axis": axis}, [combine]).result


def run(func, grid, *args):
    """Verify ``func`` and run it; numpy arrays become pointers (written in place)."""
    ir.verify(func, concrete=True)
    memory = Memory()
    values = [memory.register(a, f"arg{i}") if isinstance(a, np.ndarray) else a for i, a in enumerate(args)]
    run_grid(func, grid, values, memory)


def elementwise_kernel(dtype, n, layout, body, n_inputs=2, out_dtype=None):
    """out[i] = body(k, x0[i], x1[i], …) for one tile of ``n`` elements (no mask)."""
    out_dtype = out_dtype or dtype
    params = [(f"x{i}", ir.PointerType(dtype)) for i in range(n_inputs)] + [("out", ir.PointerType(out_dtype))]
    k = Kernel(params)
    offs = k.arange(n, layout)
    xs = [k.load(k.ptrs(p, offs)) for p in k.args[:n_inputs]]
    k.store(k.ptrs(k.args[n_inputs], offs), body(k, *xs), src="gl.store(out, result)")
    return k.finish()


# ----------------------------------------------------------------------- vector add
def vector_add_kernel(block, layout):
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("y", P), ("out", P), ("n", I32)])
    x, y, out, n = k.args
    pid = k.value("program_id", type=I32, attrs={"axis": 0})
    start = k.bin("mul", pid, k.const(block, I32))
    offs = k.bin("add", k.splat(start, [block], layout), k.arange(block, layout))
    mask = k.cmp("lt", offs, k.splat(n, [block], layout))
    total = k.bin("add", k.load(k.ptrs(x, offs), mask), k.load(k.ptrs(y, offs), mask))
    k.store(k.ptrs(out, offs), total, mask, src="gl.store(out_ptr + offs, x + y, mask=mask)")
    return k.finish()


@pytest.mark.parametrize("layout", [L1, blocked([4], [32], [2], [0]), blocked([1], [32], [4], [0])])
def test_vector_add_matches_numpy_with_a_ragged_tail(layout):
    rng = np.random.default_rng(0)
    n, block = 1000, 256
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    num_warps = layout.to_linear_layout([block]).in_dim_size("warp")
    func = vector_add_kernel(block, layout)
    func.num_warps = num_warps
    run(func, (-(-n // block),), x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


def test_unmasked_access_past_the_end_names_line_address_allocation_and_element():
    n, block = 1000, 256
    x = np.ones(n, np.float32)
    out = np.zeros(n - 8, np.float32)  # too short: the last 8 stores fall off the end
    with pytest.raises(InterpreterError) as err:
        run(vector_add_kernel(block, L1), (4,), x, x, out, n)
    text = str(err.value)
    assert "kernel.py:" in text and "gl.store(out_ptr + offs, x + y, mask=mask)" in text
    assert "out-of-bounds store" in text and "arg2" in text
    # program 3 covers 768..1023: its pointer element 224 addresses out[992], one past the end.
    assert "pointer element (224) in program (3, 0, 0)" in text
    assert "element index 992 of an array of 992 elements" in text
    assert "past the end" in text and "0x" in text


def test_masked_off_lanes_never_touch_memory():
    # n = 10 with blocks of 256: 246 lanes per program point past every allocation, masked off.
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    run(vector_add_kernel(256, L1), (1,), x, x, out, 10)
    np.testing.assert_array_equal(out, 2 * x)


def test_load_other_fills_masked_off_elements():
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("out", P)])
    offs = k.arange(64, blocked([1], [32], [2], [0]))
    mask = k.cmp("lt", offs, k.splat(k.const(5, I32), [64], offs.type.layout))
    other = k.full([64], -1.5, offs.type.layout)
    k.store(k.ptrs(k.args[1], offs), k.load(k.ptrs(k.args[0], offs), mask, other))
    func = k.finish()
    func.num_warps = 2
    x, out = np.arange(5, dtype=np.float32), np.zeros(64, np.float32)
    run(func, (1,), x, out)
    np.testing.assert_array_equal(out, np.r_[np.arange(5), np.full(59, -1.5)].astype(np.float32))


# ------------------------------------------------------------------------ reductions
def row_reduce_kernel(rows, cols, layout, axis, fn):
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("out", P), ("stride", I32)])
    x, out, stride = k.args
    tile = k.load(k.ptrs(x, k.offsets_2d(rows, cols, layout, stride)))
    total = k.reduce(tile, axis, fn)
    n = (rows, cols)[1 - axis]
    idx = k.value("arange", type=tensor([n], SliceLayout(axis, layout), I32), attrs={"start": 0, "end": n})
    k.store(k.ptrs(out, idx), total)
    return k.finish()


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("fn,np_fn", [("add", np.sum), ("maximum", np.max), ("minimum", np.min)])
@pytest.mark.parametrize("layout", [L2, blocked([2, 2], [8, 4], [2, 2], [0, 1]), blocked([1, 1], [1, 32], [1, 4], [1, 0])])
def test_row_and_column_reductions_match_numpy(axis, fn, np_fn, layout):
    rows, cols = 16, 64
    x = np.random.default_rng(1).integers(-50, 50, (rows, cols)).astype(np.float32)  # exact sums
    out = np.zeros((rows, cols)[1 - axis], np.float32)
    run(row_reduce_kernel(rows, cols, layout, axis, fn), (1,), x, out, cols)
    np.testing.assert_array_equal(out, np_fn(x, axis=axis))


def test_reduction_tree_order_is_registers_then_lane_butterfly():
    # One warp, 4 registers x 32 lanes over 128 elements (registers minor). Floats that do
    # not associate expose the order: per thread a pairwise tree (r0+r1)+(r2+r3), then lanes
    # xor 16, 8, …, 1.
    layout = blocked([4], [32], [1], [0])
    x = np.random.default_rng(2).standard_normal(128).astype(np.float32) * 1e4
    expected = x.reshape(32, 4)  # [lane, register]
    partial = (expected[:, 0] + expected[:, 1]) + (expected[:, 2] + expected[:, 3])
    for bit in (16, 8, 4, 2, 1):
        partial = partial + partial[np.arange(32) ^ bit]
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("out", P)])
    offs = k.arange(128, layout)
    total = k.reduce(k.load(k.ptrs(k.args[0], offs)), 0)
    k.op("store", [k.args[1], total], [], {"has_mask": False})
    func = k.finish()
    func.num_warps = 1
    out = np.zeros(1, np.float32)
    run(func, (1,), x, out)
    assert out[0] == partial[0]


def test_non_commutative_combine_surfaces_as_replicated_copies_that_disagree():
    # `sub` is not commutative: after the butterfly, lanes of one row hold different values,
    # although the result layout (a slice) says they are copies of one element.
    rows, cols = 16, 64
    x = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros(rows, np.float32)
    with pytest.raises(InterpreterError, match="replicated copies of the stored value element"):
        run(row_reduce_kernel(rows, cols, L2, 1, "sub"), (1,), x, out, cols)


def test_replicated_inconsistency_is_detected_when_converting_to_logical():
    ty = tensor([32], blocked([1], [32], [4], [0]), F32)  # every warp holds a copy
    t = from_logical(np.arange(32, dtype=np.float32), ty, 4, ir.UNKNOWN_LOCATION)
    np.testing.assert_array_equal(to_logical(t, 4, ir.UNKNOWN_LOCATION), np.arange(32))
    t.regs[32 * 2 + 5, 0] = 99.0  # warp 2, lane 5
    with pytest.raises(InterpreterError, match=r"element \(5\) disagree: thread 5 .* thread 69"):
        to_logical(t, 4, ir.UNKNOWN_LOCATION)


# ------------------------------------------------------------------- layout checking
def test_data_free_op_with_a_layout_needing_movement_is_reported():
    # set_auto_layout moves no data; asking for a layout that puts elements in other
    # threads (lanes along dim1 instead of dim0) is a layout bug, reported at its line.
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("out", P)])
    offs = k.offsets_2d(32, 32, L2, k.const(32, I32))
    tile = k.load(k.ptrs(k.args[0], offs))
    other = blocked([4, 1], [8, 4], [1, 4], [0, 1])
    k.value("set_auto_layout", [tile], tile.type.with_layout(other), src="y = set_auto_layout(x, other)")
    k.op("return")
    with pytest.raises(InterpreterError, match="set_auto_layout: thread .* insert convert_layout") as err:
        run(k.func, (1,), np.zeros(1024, np.float32), np.zeros(1024, np.float32))
    assert "y = set_auto_layout(x, other)" in str(err.value)


def test_convert_layout_and_permute_round_trip():
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("out", P)])
    offs = k.offsets_2d(16, 32, L2, k.const(32, I32))
    tile = k.load(k.ptrs(k.args[0], offs))
    col_major = blocked([4, 1], [8, 4], [1, 4], [0, 1])
    moved = k.value("convert_layout", [tile], tile.type.with_layout(col_major))
    # permute to [32, 16]: the transposed blocked layout holds the same elements per thread.
    t_layout = blocked([1, 4], [4, 8], [4, 1], [1, 0])
    transposed = k.value("permute", [moved], tensor([32, 16], t_layout, F32), {"order": (1, 0)})
    t_offs = k.offsets_2d(32, 16, t_layout, k.const(16, I32))
    k.store(k.ptrs(k.args[1], t_offs), transposed)
    func = k.finish()
    x = np.random.default_rng(4).standard_normal(16 * 32).astype(np.float32)
    out = np.zeros_like(x)
    run(func, (1,), x, out)
    np.testing.assert_array_equal(out.reshape(32, 16), x.reshape(16, 32).T)


def test_join_then_split_returns_the_operands():
    layout = blocked([1], [32], [4], [0])
    joined_layout = blocked([1, 2], [32, 1], [4, 1], [1, 0])
    P = ir.PointerType(I32)
    k = Kernel([("out", P)])
    a = k.arange(128, layout)
    b = k.bin("mul", a, k.splat(k.const(-3, I32), [128], layout))
    j = k.value("join", [a, b], tensor([128, 2], joined_layout, I32))
    lo, hi = k.op("split", [j], [a.type, a.type]).results
    diff = k.bin("sub", hi, k.bin("mul", lo, k.splat(k.const(-3, I32), [128], layout)))
    k.store(k.ptrs(k.args[0], a), diff)
    out = np.ones(128, np.int32)
    run(k.finish(), (1,), out)
    np.testing.assert_array_equal(out, 0)


# ---------------------------------------------------------------------- control flow
def test_for_loop_with_carried_tensor_and_runtime_bounds():
    # acc = sum over i in range(lo, hi, 3) of x * i
    P = ir.PointerType(I32)
    k = Kernel([("x", P), ("out", P), ("lo", I32), ("hi", I32)])
    x, out, lo, hi = k.args
    offs = k.arange(128, L1)
    xv = k.load(k.ptrs(x, offs))
    zero = k.full([128], 0, L1, I32)
    body = ir.Block([I32, zero.type])
    with k.inside(body):
        iv, acc = body.args
        k.op("yield", [k.bin("add", acc, k.bin("mul", xv, k.splat(iv, [128], L1)))])
    loop = k.op("for", [lo, hi, k.const(3, I32), zero], [zero.type], regions=[body])
    k.store(k.ptrs(out, offs), loop.result)
    func = k.finish()
    xs = np.arange(128, dtype=np.int32)
    for lo_v, hi_v in [(2, 17), (5, 5), (9, 2)]:
        result = np.zeros(128, np.int32)
        run(func, (1,), xs, result, lo_v, hi_v)
        np.testing.assert_array_equal(result, xs * sum(range(lo_v, hi_v, 3)))


def test_while_and_if_compute_collatz_steps():
    # steps = 0; while n != 1: n = n // 2 if n % 2 == 0 else 3n + 1; steps += 1
    k = Kernel([("out", ir.PointerType(I32)), ("n", I32)])
    out, n = k.args
    before = ir.Block([I32, I32])
    with k.inside(before):
        k.op("condition", [k.cmp("ne", before.args[0], k.const(1, I32)), *before.args])
    after = ir.Block([I32, I32])
    with k.inside(after):
        m, steps = after.args
        even = k.cmp("eq", k.bin("rem", m, k.const(2, I32)), k.const(0, I32))
        then, other = ir.Block(), ir.Block()
        with k.inside(then):
            k.op("yield", [k.bin("div", m, k.const(2, I32))])
        with k.inside(other):
            k.op("yield", [k.bin("add", k.bin("mul", m, k.const(3, I32)), k.const(1, I32))])
        nxt = k.op("if", [even], [I32], regions=[then, other]).result
        k.op("yield", [nxt, k.bin("add", steps, k.const(1, I32))])
    loop = k.op("while", [n, k.const(0, I32)], [I32, I32], regions=[before, after])
    k.op("store", [out, loop.results[1]], [], {"has_mask": False})
    func = k.finish()
    result = np.zeros(1, np.int32)
    run(func, (1,), result, 27)
    assert result[0] == 111


# ---------------------------------------------------------------- integer semantics
@given(st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-2**31, 2**31 - 1)), min_size=1, max_size=64))
def test_int32_division_and_remainder_truncate_like_c(pairs):
    a = np.array([p[0] for p in pairs] + [0] * (64 - len(pairs)), np.int32)
    b = np.array([p[1] for p in pairs] + [1] * (64 - len(pairs)), np.int32)
    layout = blocked([2], [32], [1], [0])
    for fn in ("div", "rem"):
        func = elementwise_kernel(I32, 64, layout, lambda k, x, y: k.bin(fn, x, y))
        func.num_warps = 1
        out = np.zeros(64, np.int32)
        run(func, (1,), a, b, out)
        expected = []
        for x, y in zip(a.tolist(), b.tolist()):
            if y == 0:
                expected.append(-1 if fn == "div" else x)
                continue
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            q = (q + 2**31) % 2**32 - 2**31  # INT_MIN / -1 wraps
            expected.append(q if fn == "div" else x - q * y)
        np.testing.assert_array_equal(out, np.array(expected, dtype=np.int64).astype(np.int32))


def test_integer_overflow_wraps_and_shifts_follow_signedness():
    layout = blocked([2], [32], [1], [0])
    a = np.array([2**31 - 1, -2**31, -8, 1, -1, 5] + [3] * 58, np.int32)
    b = np.array([1, -1, 1, 31, 40, 2] + [1] * 58, np.int32)
    cases = {
        "add": (I32, a, b, (a.astype(np.int64) + b).astype(np.int32)),
        "mul": (I32, a, b, (a.astype(np.int64) * b).astype(np.int32)),
        "shr": (I32, a, b, np.where(b >= 32, np.where(a < 0, -1, 0), a >> np.minimum(b, 31)).astype(np.int32)),
        "shl": (I32, a, b, np.where((b >= 32) | (b < 0), 0, (a.astype(np.int64) << np.clip(b, 0, 31))).astype(np.int32)),
    }
    for fn, (dtype, x, y, expected) in cases.items():
        func = elementwise_kernel(dtype, 64, layout, lambda k, p, q: k.bin(fn, p, q))
        func.num_warps = 1
        out = np.zeros(64, np.int32)
        run(func, (1,), x, y, out)
        np.testing.assert_array_equal(out, expected, err_msg=fn)
    # logical right shift for unsigned types
    U32 = ir.uint32
    func = elementwise_kernel(U32, 64, layout, lambda k, p, q: k.bin("shr", p, q))
    func.num_warps = 1
    out = np.zeros(64, np.uint32)
    run(func, (1,), a.view(np.uint32), np.minimum(b, 31).view(np.uint32), out)
    np.testing.assert_array_equal(out, a.view(np.uint32) >> np.minimum(b, 31).astype(np.uint32))


# --------------------------------------------------------------------- float rounding
def test_bfloat16_arithmetic_rounds_the_float32_result():
    layout = blocked([2], [32], [1], [0])
    rng = np.random.default_rng(5)
    a = rng.standard_normal(64).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(64).astype(ml_dtypes.bfloat16)
    func = elementwise_kernel(ir.bfloat16, 64, layout, lambda k, x, y: k.bin("mul", x, y))
    func.num_warps = 1
    out = np.zeros(64, ml_dtypes.bfloat16)
    run(func, (1,), a, b, out)
    expected = (a.astype(np.float32) * b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))


def cast_kernel(src, dst, rounding="rtne", bitcast=False):
    layout = blocked([2], [32], [1], [0])

    def body(k, x):
        return k.value("cast", [x], x.type.with_element(dst), {"to": dst, "rounding": rounding, "bitcast": bitcast})

    func = elementwise_kernel(src, 64, layout, body, n_inputs=1, out_dtype=dst)
    func.num_warps = 1
    return func


def cast(src, dst, values, **kw):
    out = np.zeros(64, numpy_dtype(dst))
    run(cast_kernel(src, dst, **kw), (1,), np.asarray(values).astype(numpy_dtype(src)), out)
    return out


@given(st.lists(st.floats(width=32, allow_nan=False), min_size=64, max_size=64))
def test_float32_to_bfloat16_rounds_to_nearest_even_or_toward_zero(values):
    x = np.array(values, np.float32)
    np.testing.assert_array_equal(cast(F32, ir.bfloat16, x).view(np.uint16),
                                  x.astype(ml_dtypes.bfloat16).view(np.uint16))
    # rtz drops the low 16 bits (finite values, sign-magnitude encoding).
    truncated = (x.view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(cast(F32, ir.bfloat16, x, rounding="rtz").view(np.uint16), truncated)


def test_float32_to_fp8_rounds_like_ml_dtypes_and_saturates():
    x = np.concatenate([np.random.default_rng(6).standard_normal(56) * 30,
                        [1000.0, -1000.0, np.inf, -np.inf, 448.0, 464.0, 0.0, 1e-9]]).astype(np.float32)
    e4 = cast(F32, ir.float8e4nv, x)
    finite = np.abs(x) <= 448
    np.testing.assert_array_equal(e4[finite].view(np.uint8), x[finite].astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    assert list(e4[~finite].astype(np.float32)) == [448.0, -448.0, 448.0, -448.0, 448.0]  # satfinite
    e5 = cast(F32, ir.float8e5, x)
    np.testing.assert_array_equal(e5[finite].view(np.uint8), x[finite].astype(ml_dtypes.float8_e5m2).view(np.uint8))
    assert e5[58].astype(np.float32) == 57344.0  # inf saturates to e5m2's largest finite value
    back = cast(ir.float8e4nv, F32, e4)  # fp8 -> float32 is exact
    np.testing.assert_array_equal(back, e4.astype(np.float32))


def test_float_to_int_truncates_and_saturates_and_bitcast_keeps_bits():
    x = np.array([1.9, -1.9, 3e9, -3e9, np.nan, 0.5, -0.5, 7.0] * 8, np.float32)
    np.testing.assert_array_equal(cast(F32, I32, x)[:8], [1, -1, 2**31 - 1, -2**31, 0, 0, 0, 7])
    np.testing.assert_array_equal(cast(I32, ir.int8, np.arange(64) * 9), (np.arange(64) * 9).astype(np.int8))
    np.testing.assert_array_equal(cast(F32, I32, x, bitcast=True), x.view(np.int32))


# ------------------------------------------------------------------ debugging & hints
def test_device_print_prints_pid_index_prefix_and_value(capsys):
    layout = blocked([1], [32], [1], [0])
    k = Kernel([])
    x = k.arange(4, layout)
    k.op("device_print", [x], [], {"prefix": "x:", "hex": False})
    func = k.finish()
    func.num_warps = 1
    run(func, (2,))
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["pid (0, 0, 0) idx (0) x: 0", "pid (0, 0, 0) idx (1) x: 1"]
    assert lines[-1] == "pid (1, 0, 0) idx (3) x: 3" and len(lines) == 8


def test_assume_that_fails_raises_at_its_line():
    k = Kernel([("n", I32)])
    cond = k.cmp("gt", k.args[0], k.const(0, I32))
    k.op("assume", [cond], [], src="gl.assume(n > 0)")
    func = k.finish()
    run(func, (1,), 3)
    with pytest.raises(InterpreterError, match="assumed condition is false") as err:
        run(func, (1,), -3)
    assert "gl.assume(n > 0)" in str(err.value)


def test_hint_checks_scalar_divisibility_and_tensor_contiguity():
    k = Kernel([("n", I32)])
    k.value("hint", [k.args[0]], I32, {"multiple_of": 16}, src="n = gl.multiple_of(n, 16)")
    func = k.finish()
    run(func, (1,), 64)
    with pytest.raises(InterpreterError, match="not a multiple of 16"):
        run(func, (1,), 40)

    k = Kernel([("n", I32)])
    offs = k.bin("mul", k.arange(64, L1), k.splat(k.args[0], [64], L1))
    k.value("hint", [offs], offs.type, {"max_contiguous": (8,)})
    func = k.finish()
    run(func, (1,), 1)
    with pytest.raises(InterpreterError, match=r"max_contiguous=8 along dimension 0 does not hold: element \(1\) is 2"):
        run(func, (1,), 2)


# --------------------------------------------------------------------------- memory
def test_memory_aligns_separates_and_writes_strided_arrays_in_place():
    m = Memory()
    a = np.zeros((4, 6), np.float32)
    view = a[:, ::2]  # strided: every other column
    small = np.zeros(3, np.int8)
    base_a = m.register(small, "small")
    base_v = m.register(view, "view")
    # addresses keep the real ones' alignment modulo 256, and allocations are kept apart
    assert base_a % 256 == small.ctypes.data % 256 and base_v % 256 == a.ctypes.data % 256
    assert base_v - base_a >= 4096
    assert m.register(a[0, 1:], "offset view") % 16 == (a.ctypes.data + 4) % 16
    addresses = base_v + np.array([0, 8, 24], dtype=np.int64)  # view[0,0], view[0,1], a[1,0]
    m.write(addresses, np.array([1, 2, 3], np.float32))
    assert view[0, 0] == 1 and view[0, 1] == 2 and a[1, 0] == 3
    np.testing.assert_array_equal(m.read(addresses, np.float32), [1, 2, 3])
    with pytest.raises(InterpreterError, match="misaligned load"):
        m.read(np.array([base_v + 2]), np.float32)
    with pytest.raises(InterpreterError, match="bytes before the start of view"):
        m.read(np.array([base_v - 64]), np.float32)
    with pytest.raises(InterpreterError, match="racing store"):
        m.write(np.array([base_v, base_v]), np.array([1, 2], np.float32))


# ----------------------------------------------------- random element-wise programs
@given(st.data())
def test_random_elementwise_programs_over_random_layouts_match_numpy(data):
    spt = data.draw(st.sampled_from([[1, 1], [1, 2], [2, 1], [2, 4]]))
    tpw = data.draw(st.sampled_from([[1, 32], [4, 8], [8, 4], [32, 1]]))
    wpc = data.draw(st.sampled_from([[1, 2], [2, 1]]))
    order = data.draw(st.sampled_from([[0, 1], [1, 0]]))
    layout = blocked(spt, tpw, wpc, order)
    shape = (8, 16)
    fns = data.draw(st.lists(st.sampled_from(["add", "sub", "mul", "maximum", "minimum"]), min_size=1, max_size=4))
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}
    P = ir.PointerType(I32)
    k = Kernel([("x", P), ("y", P), ("out", P), ("rowsum", P)])
    offs = k.offsets_2d(*shape, layout, k.const(shape[1], I32))
    x, y = (k.load(k.ptrs(p, offs)) for p in k.args[:2])
    acc = x
    for fn in fns:
        acc = k.bin(fn, acc, y)
    k.store(k.ptrs(k.args[2], offs), acc)
    rows = k.value("arange", type=tensor([shape[0]], SliceLayout(1, layout), I32), attrs={"start": 0, "end": shape[0]})
    k.store(k.ptrs(k.args[3], rows), k.reduce(acc, 1))
    func = k.finish()
    func.num_warps = 2
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    xv, yv = (rng.integers(-100, 100, shape).astype(np.int32) for _ in range(2))
    out, rowsum = np.zeros(shape, np.int32), np.zeros(shape[0], np.int32)
    run(func, (1,), xv, yv, out, rowsum)
    expected = xv
    for fn in fns:
        expected = ops[fn](expected, yv)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(rowsum, expected.sum(axis=1))


def test_tensor_values_are_register_files():
    ty = tensor([64], blocked([2], [32], [1], [0]), F32)
    t = from_logical(np.arange(64, dtype=np.float32), ty, 1, ir.UNKNOWN_LOCATION)
    assert isinstance(t, Tensor) and t.regs.shape == (32, 2)
    np.testing.assert_array_equal(t.regs[3], [6, 7])  # lane 3 holds elements 6 and 7
    linear = DistributedLinearLayout([[32]], [[1], [2], [4], [8], [16]], [], [], [64])
    t2 = from_logical(np.arange(64, dtype=np.float32), tensor([64], linear, F32), 1, ir.UNKNOWN_LOCATION)
    np.testing.assert_array_equal(t2.regs[3], [3, 35])


def test_two_value_reduce_finds_argmax_with_the_first_index_on_ties():
    layout = blocked([2, 2], [4, 8], [2, 2], [1, 0])
    P = ir.PointerType(F32)
    k = Kernel([("x", P), ("out", ir.PointerType(I32))])
    offs = k.offsets_2d(16, 32, layout, k.const(32, I32))
    values = k.load(k.ptrs(k.args[0], offs))
    cols = k.value("arange", type=tensor([32], SliceLayout(0, layout), I32), attrs={"start": 0, "end": 32})
    index = k.value("broadcast", [k.value("expand_dims", [cols], tensor([1, 32], layout, I32), {"axis": 0})],
                    tensor([16, 32], layout, I32))
    combine = ir.Block([F32, I32, F32, I32])
    with k.inside(combine):
        v1, i1, v2, i2 = combine.args
        first = k.bin("or", k.cmp("gt", v1, v2), k.bin("and", k.cmp("eq", v1, v2), k.cmp("lt", i1, i2)))
        k.op("yield", [k.value("select", [first, v1, v2], F32), k.value("select", [first, i1, i2], I32)])
    sliced = SliceLayout(1, layout)
    best = k.op("reduce", [values, index], [tensor([16], sliced, F32), tensor([16], sliced, I32)],
                {"axis": 1}, [combine]).results
    rows = k.value("arange", type=tensor([16], sliced, I32), attrs={"start": 0, "end": 16})
    k.store(k.ptrs(k.args[1], rows), best[1])
    x = np.random.default_rng(8).integers(0, 6, (16, 32)).astype(np.float32)  # many ties
    out = np.zeros(16, np.int32)
    run(k.finish(), (1,), x, out)
    np.testing.assert_array_equal(out, x.argmax(axis=1))
