"""Layout inference (gluonkit.lower.infer) on hand-built IR.

Expected layouts come from the rules (documented in gluonkit/lower/infer.py): element-wise
values share a layout, expand_dims operands / reduce results are SliceLayouts of the
2-D side, control flow ties carried values, convert_layout separates, and unpinned
groups get Triton's default blocked layout (hand-derived below).
"""

import pytest
from hypothesis import given, strategies as st

from gluonkit import ir
from gluonkit.layouts.distributed import (
    AutoLayout, BlockedLayout, DistributedLinearLayout, SliceLayout,
)
from gluonkit.lower.infer import derive as derive
from gluonkit.lower.infer.solve import LayoutConflictError, LayoutInferenceError, infer_layouts
from gluonkit.lower.infer.derive import default_blocked_layout, same_layout

from ir_helpers import KernelBuilder, tensor

P = BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
Q = BlockedLayout([2, 1], [8, 4], [1, 4], [0, 1])
B1 = BlockedLayout([2], [32], [4], [0])
C1 = BlockedLayout([1], [32], [4], [0])


def infer(k: KernelBuilder) -> ir.Function:
    """Finish, infer and verify ``k``; every tensor's layout must describe its shape."""
    func = k.finish()
    infer_layouts(func)
    ir.verify(func, concrete=True)
    for op in func.walk():
        for v in op.results + [a for r in op.regions for a in r.args]:
            if isinstance(v.type, ir.TensorType):
                v.type.layout.to_linear_layout(list(v.type.shape))
    return func


def layout(v):
    return v.type.layout


# ------------------------------------------------------------------------ element-wise
def test_elementwise_chain_takes_the_pinned_layout_backwards_and_forwards():
    k = KernelBuilder()
    x = k.arange(128)
    one = k.value("splat", [k.value("constant", type=ir.int32, attrs={"value": 1})], tensor([128], element=ir.int32))
    y = k.binary("add", x, one)
    z = k.value("cast", [y], tensor([128]), {"to": ir.float32})
    pinned = k.set_auto_layout(z, B1)
    w = k.unary("exp", pinned)
    infer(k)
    for v in (x, one, y, z, w):
        assert layout(v) == B1


def test_load_and_store_tie_pointer_mask_and_value():
    ptr_t = ir.PointerType(ir.float32)
    k = KernelBuilder(args=[("p", ptr_t)])
    offs = k.arange(64)
    ptrs = k.value("addptr", [k.value("splat", [k.args[0]], tensor([64], element=ptr_t)), offs],
                   tensor([64], element=ptr_t))
    mask = k.value("compare", [offs, k.value("splat", [k.value("constant", type=ir.int32, attrs={"value": 9})],
                                              tensor([64], element=ir.int32))],
                   tensor([64], element=ir.int1), {"predicate": "lt"})
    loaded = k.value("load", [ptrs, mask], tensor([64]), {"has_mask": True})
    value = k.set_auto_layout(k.unary("sqrt", loaded), C1)
    k.op("store", [ptrs, value, mask], attrs={"has_mask": True})
    infer(k)
    for v in (offs, ptrs, mask, loaded):
        assert layout(v) == C1


# --------------------------------------------------------------- expand_dims and reduce
def test_expand_dims_operand_becomes_the_slice_of_the_pinned_result():
    k = KernelBuilder()
    rows = k.arange(32)
    cols = k.arange(16)
    r2 = k.broadcast(k.expand_dims(rows, 1), [32, 16])
    c2 = k.broadcast(k.expand_dims(cols, 0), [32, 16])
    total = k.set_auto_layout(k.binary("add", r2, c2), P)
    infer(k)
    assert layout(rows) == SliceLayout(1, P)
    assert layout(cols) == SliceLayout(0, P)
    assert layout(r2) == layout(c2) == layout(total) == P


def test_expand_dims_result_is_the_parent_of_a_pinned_slice_operand():
    k = KernelBuilder()
    rows = k.set_auto_layout(k.arange(32), SliceLayout(1, Q))
    r2 = k.expand_dims(rows, 1)
    wide = k.broadcast(r2, [32, 8])
    infer(k)
    assert layout(r2) == layout(wide) == Q


def test_expand_dims_of_a_non_slice_layout_is_an_error_naming_the_line():
    k = KernelBuilder()
    rows = k.arange(32, layout=B1, src="rows = gl.arange(0, 32, layout=B1)")
    k.expand_dims(rows, 1, src="r2 = rows[:, None]")
    with pytest.raises(LayoutInferenceError) as err:
        infer(k)
    text = str(err.value)
    assert "r2 = rows[:, None]" in text and "SliceLayout(1" in text
    assert "rows = gl.arange(0, 32, layout=B1)" in text


def test_reduce_result_is_the_slice_of_its_operand():
    k = KernelBuilder()
    x = k.set_auto_layout(k.full([32, 16]), P)
    s = k.reduce_sum(x, 1)
    t = k.binary("mul", s, s)
    infer(k)
    assert layout(s) == layout(t) == SliceLayout(1, P)


def test_reduce_operand_is_the_parent_of_a_pinned_slice_result():
    k = KernelBuilder()
    x = k.full([32, 16])
    y = k.unary("exp", x)
    s = k.reduce_sum(y, 0)
    k.set_auto_layout(s, SliceLayout(0, Q))
    infer(k)
    assert layout(x) == layout(y) == Q


def test_reduce_to_scalar_leaves_nothing_to_infer_on_the_result():
    k = KernelBuilder()
    x = k.set_auto_layout(k.full([64]), C1)
    s = k.reduce_sum(x, 0)
    infer(k)
    assert s.type == ir.float32


# ------------------------------------------------------------------------ control flow
def _loop_kernel():
    """acc = zeros; for i in range(0, n): acc = acc + x; out = set_auto_layout(acc, P)."""
    k = KernelBuilder(args=[("n", ir.int32)])
    zero = k.value("constant", type=ir.int32, attrs={"value": 0})
    one = k.value("constant", type=ir.int32, attrs={"value": 1})
    x = k.full([32, 16], 2.0)
    acc0 = k.full([32, 16], 0.0)
    body = ir.Block([ir.int32, tensor([32, 16])])
    loop = k.op("for", [zero, k.args[0], one, acc0], [tensor([32, 16])], regions=[body])
    with k.inside(body):
        nxt = k.binary("add", body.args[1], x)
        k.op("yield", [nxt])
    out = k.set_auto_layout(loop.result, P)
    return k, (x, acc0, body.args[1], nxt, loop.result, out)


def test_for_ties_init_block_argument_yield_and_result():
    k, values = _loop_kernel()
    infer(k)
    assert all(layout(v) == P for v in values)


def test_if_ties_both_yields_and_the_result():
    k = KernelBuilder(args=[("c", ir.int1)])
    then, other = ir.Block(), ir.Block()
    with k.inside(then):
        a = k.full([64], 1.0)
        k.op("yield", [a])
    with k.inside(other):
        b = k.full([64], 2.0)
        k.op("yield", [b])
    branch = k.op("if", [k.args[0]], [tensor([64])], regions=[then, other])
    k.set_auto_layout(branch.result, B1)
    infer(k)
    assert layout(a) == layout(b) == layout(branch.result) == B1


def test_while_ties_its_two_positions():
    k = KernelBuilder(args=[("c", ir.int1)])
    init = k.full([64])
    before, after = ir.Block([tensor([64])]), ir.Block([tensor([64])])
    with k.inside(before):
        k.op("condition", [k.args[0], before.args[0]])
    with k.inside(after):
        k.op("yield", [k.unary("neg", after.args[0])])
    loop = k.op("while", [init], [tensor([64])], regions=[before, after])
    k.set_auto_layout(init, C1)
    infer(k)
    for v in (init, before.args[0], after.args[0], loop.result):
        assert layout(v) == C1


# ----------------------------------------------------------------------------- conflicts
def test_two_pins_on_one_group_show_both_lines():
    k = KernelBuilder()
    x = k.arange(64, src="x = gl.arange(0, 64)")
    k.set_auto_layout(x, B1, src="a = gl.set_auto_layout(x, B1)")
    y = k.binary("add", x, x, src="y = x + x")
    k.set_auto_layout(y, C1, src="b = gl.set_auto_layout(y, C1)")
    with pytest.raises(LayoutConflictError) as err:
        infer(k)
    text = str(err.value)
    assert "a = gl.set_auto_layout(x, B1)" in text
    assert "b = gl.set_auto_layout(y, C1)" in text
    assert "convert_layout" in text
    assert repr(B1) in text and repr(C1) in text


def test_groups_meeting_at_an_op_show_the_op_and_both_origins():
    k = KernelBuilder()
    a = k.set_auto_layout(k.arange(64), B1, src="a = gl.set_auto_layout(i, B1)")
    b = k.set_auto_layout(k.arange(64), C1, src="b = gl.set_auto_layout(j, C1)")
    ua, ub = k.unary("abs", a), k.unary("abs", b)
    k.binary("add", ua, ub, src="c = abs(a) + abs(b)")
    with pytest.raises(LayoutConflictError) as err:
        infer(k)
    text = str(err.value)
    lines = [ln for ln in text.splitlines() if ln.startswith("at ") or ln.startswith("note:")]
    assert "kernel.py:7" in lines[0]  # the op where the layouts meet is the primary location
    for src in ("c = abs(a) + abs(b)", "a = gl.set_auto_layout(i, B1)", "b = gl.set_auto_layout(j, C1)"):
        assert src in text


def test_conflict_through_a_slice_relation_is_reported():
    k = KernelBuilder()
    rows = k.set_auto_layout(k.arange(32), SliceLayout(1, Q), src="rows = set_auto_layout(r, Slice(1, Q))")
    r2 = k.broadcast(k.expand_dims(rows, 1, src="r2 = rows[:, None]"), [32, 16])
    k.set_auto_layout(r2, P, src="p = set_auto_layout(r2, P)")
    with pytest.raises(LayoutConflictError) as err:
        infer(k)
    text = str(err.value)
    assert "rows = set_auto_layout(r, Slice(1, Q))" in text and "p = set_auto_layout(r2, P)" in text


def test_equal_placements_spelled_differently_do_not_conflict():
    linear = DistributedLinearLayout.from_linear_layout(P.to_linear_layout([32, 16]))
    k = KernelBuilder()
    x = k.full([32, 16])
    k.set_auto_layout(x, linear)
    k.set_auto_layout(x, P)
    infer(k)
    assert layout(x) == P  # the named spelling is kept


# --------------------------------------------------------------------------- separation
def test_convert_layout_separates_groups():
    k = KernelBuilder()
    x = k.set_auto_layout(k.arange(64), B1)
    y = k.unary("neg", x)
    z = k.convert_layout(y, C1)
    w = k.binary("add", z, k.arange(64))
    infer(k)
    assert layout(y) == B1
    assert layout(w) == C1


# ------------------------------------------------------------------------------ defaults
@pytest.mark.parametrize("shape, num_warps, lanes, warps", [
    # Hand-run of Triton's builder (order = fastest dim first = [rank-1, ..., 0]):
    ([128], 8, [32], [8]),            # 1-D: all lanes and warps on dim 0
    ([64, 16], 4, [2, 16], [4, 1]),   # dim1 needs 16 threads: 16 lanes; rest (2 lanes, 4 warps) to dim0
    ([1, 256], 4, [1, 32], [1, 4]),   # dim1 takes 128 threads = 32 lanes x 4 warps
    ([4, 4], 4, [8, 4], [4, 1]),      # dim1 takes 4 lanes; dim0 gets the remaining 8 lanes, 4 warps
    ([2, 2, 64], 2, [1, 1, 32], [1, 1, 2]),  # dim2 takes 64 threads, dim1 and dim0 get 1 each
])
def test_default_blocked_layout_matches_triton(shape, num_warps, lanes, warps):
    got = default_blocked_layout(shape, num_warps)
    want = BlockedLayout([1] * len(shape), lanes, warps, list(range(len(shape) - 1, -1, -1)))
    assert got == want


def test_unpinned_values_get_the_default_and_slices_of_it():
    k = KernelBuilder(num_warps=8)
    rows, cols = k.arange(64), k.arange(16)
    total = k.binary("add", k.broadcast(k.expand_dims(rows, 1), [64, 16]),
                     k.broadcast(k.expand_dims(cols, 0), [64, 16]))
    infer(k)
    default = default_blocked_layout([64, 16], 8)
    assert layout(total) == default
    assert layout(rows) == SliceLayout(1, default) and layout(cols) == SliceLayout(0, default)


def test_default_uses_the_full_shape_of_a_broadcast_group():
    k = KernelBuilder()
    x = k.full([1, 256])
    y = k.broadcast(x, [64, 256])
    infer(k)
    assert layout(x) == layout(y) == default_blocked_layout([64, 256], 4)


# ---------------------------------------------------- permute / reshape / join / split
def _placement(v):
    """{(thread, register): element coordinates} of a value's (concrete) layout."""
    return v.type.layout.to_linear_layout(list(v.type.shape)).table()


def _per_thread(v):
    """For each thread (lane + 32 * warp), the set of element coordinates it holds."""
    ll = v.type.layout.to_linear_layout(list(v.type.shape))
    table = ll.table().reshape(-1, ll.in_dim_size("register"), len(v.type.shape))
    return [{tuple(int(c) for c in coords) for coords in thread} for thread in table]


def test_permute_moves_coordinates_and_keeps_blocked():
    k = KernelBuilder()
    x = k.set_auto_layout(k.full([32, 16]), P)
    y = k.value("permute", [x], tensor([16, 32]), {"order": [1, 0]})
    infer(k)
    assert isinstance(layout(y), BlockedLayout)
    assert (_placement(y) == _placement(x)[:, ::-1]).all()


def test_permute_backwards_from_a_pinned_result():
    k = KernelBuilder()
    x = k.full([8, 16, 4])
    y = k.value("permute", [x], tensor([4, 8, 16]), {"order": [2, 0, 1]})
    target = BlockedLayout([1, 2, 1], [2, 4, 4], [2, 2, 1], [2, 1, 0])
    k.set_auto_layout(y, target)
    infer(k)
    assert (_placement(y) == _placement(x)[:, [2, 0, 1]]).all()


def test_reshape_keeps_each_elements_row_major_offset():
    k = KernelBuilder()
    x = k.set_auto_layout(k.full([32, 16]), P)
    y = k.value("reshape", [x], tensor([8, 4, 16]), {"can_reorder": False})
    infer(k)
    a, b = _placement(x), _placement(y)
    assert ((a[:, 0] * 16 + a[:, 1]) == (b[:, 0] * 64 + b[:, 1] * 16 + b[:, 2])).all()


def test_join_puts_the_new_dimension_in_register_bit_zero_and_split_undoes_it():
    k = KernelBuilder()
    a = k.set_auto_layout(k.full([64]), C1)
    b = k.full([64])
    j = k.value("join", [a, b], tensor([64, 2]))
    parts = k.op("split", [j], [tensor([64]), tensor([64])]).results
    infer(k)
    assert layout(b) == C1
    ll = layout(j).to_linear_layout([64, 2])
    assert ll.bases["register"][0] == [0, 1]
    assert all(same_layout(layout(p), C1, [64]) for p in parts)


def test_reduce_of_a_reshaped_value_gets_a_usable_slice():
    k = KernelBuilder()
    x = k.set_auto_layout(k.full([32, 16]), P)
    y = k.value("reshape", [x], tensor([32, 8, 2]), {"can_reorder": False})
    s = k.reduce_sum(y, 2)
    infer(k)  # checks that every layout describes its shape
    # Each thread reduces what it holds: its x elements (r, c) are its s elements (r, c // 2).
    held_x, held_s = _per_thread(x), _per_thread(s)
    assert [{(r, c // 2) for r, c in t} for t in held_x] == held_s


def test_split_of_a_last_dim_spread_over_lanes_is_an_error():
    k = KernelBuilder()
    spread = BlockedLayout([1, 1], [16, 2], [4, 1], [1, 0])  # dim1 (size 2) on lane bit 0
    x = k.set_auto_layout(k.full([64, 2]), spread)
    k.op("split", [x], [tensor([64]), tensor([64])], src="lo, hi = x.split()")
    with pytest.raises(LayoutInferenceError) as err:
        infer(k)
    assert "lo, hi = x.split()" in str(err.value) and "register" in str(err.value)


def test_inferred_types_are_not_auto_anywhere():
    k, _ = _loop_kernel()
    func = infer(k)
    for op in func.walk():
        for v in op.results:
            assert not isinstance(ir.layout_of(v.type), AutoLayout)


# -------------------------------------------------------------------- property test
@st.composite
def _blocked_2d(draw):
    def split(total):
        a = draw(st.integers(0, total.bit_length() - 1))
        return [1 << a, total >> a]

    return BlockedLayout([1 << draw(st.integers(0, 2)), 1 << draw(st.integers(0, 2))],
                         split(32), split(4), draw(st.sampled_from([[0, 1], [1, 0]])))


@st.composite
def _programs(draw):
    """A random DAG of element-wise / broadcast / expand_dims / reduce ops on [M, N]
    tensors, joined by one final sum so that it is one connected program, and the
    index of the 2-D value to pin."""
    shape = [1 << draw(st.integers(0, 6)), 1 << draw(st.integers(0, 6))]
    steps = draw(st.lists(st.sampled_from(["leaf", "row", "col", "unary", "binary", "reduce"]),
                          min_size=1, max_size=12))
    return shape, steps, draw(st.integers(0, 10 ** 6)), draw(_blocked_2d())


@given(_programs())
def test_random_programs_infer_the_pinned_layout_or_its_slices(program):
    shape, steps, seed, pinned_layout = program
    k = KernelBuilder()
    pool, expected = [k.full(shape)], []  # expected: (value, slice axis or None)

    def add_2d(v):
        pool.append(v)
        expected.append((v, None))

    def from_1d(v, keep):
        expected.append((v, 1 - keep))
        add_2d(k.broadcast(k.expand_dims(v, 1 - keep), shape))

    for i, step in enumerate(steps):
        pick = pool[(seed + i) % len(pool)]
        if step == "leaf":
            add_2d(k.full(shape))
        elif step in ("row", "col"):
            keep = 0 if step == "row" else 1
            from_1d(k.value("cast", [k.arange(shape[keep])], tensor([shape[keep]]), {"to": ir.float32}), keep)
        elif step == "unary":
            add_2d(k.unary("exp", pick))
        elif step == "binary":
            add_2d(k.binary("add", pick, pool[(seed * 7 + i) % len(pool)]))
        else:
            axis = (seed + i) % 2
            from_1d(k.reduce_sum(pick, axis), 1 - axis)
    total = pool[0]
    for v in pool[1:]:
        total = k.binary("add", total, v)
    k.set_auto_layout(pool[seed % len(pool)], pinned_layout)
    infer(k)
    for v, axis in expected + [(total, None)]:
        want = pinned_layout if axis is None else SliceLayout(axis, pinned_layout)
        assert same_layout(layout(v), want, v.type.shape), (v, want)


@given(_blocked_2d(), st.integers(0, 6), st.integers(0, 6))
def test_relabelings_round_trip(blocked, log_m, log_n):
    """permute, reshape and join are undone by their inverses, bases and register order."""
    shape = [1 << log_m, 1 << log_n]
    ll = derive.linear_at(blocked, shape)
    back = derive.permute_layout(derive.permute_layout(blocked, shape, [1, 0]), shape[::-1], [1, 0])
    assert derive.linear_at(back, shape) == ll
    flat = derive.reshape_layout(blocked, shape, [shape[0] * shape[1]])
    assert derive.linear_at(derive.reshape_layout(flat, [shape[0] * shape[1]], shape), shape) == ll
    joined = derive.join_layout(blocked, shape)
    assert derive.linear_at(derive.split_layout(joined, shape + [2]), shape) == ll


def test_a_concrete_operand_pins_its_group_without_set_auto_layout():
    k = KernelBuilder()
    auto = k.arange(64)
    total = k.binary("add", auto, k.arange(64, layout=B1))
    infer(k)
    assert layout(auto) == layout(total) == B1


# ------------------------------------------------------------------ through the frontend
import gluonkit  # noqa: E402  (kept next to the tests that use it)
import gluonkit.language as gl  # noqa: E402

F32_PTR = ir.PointerType(ir.float32)


@gluonkit.jit
def _row_sums(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr):
    rows = gl.arange(0, M)
    cols = gl.arange(0, N)
    x = gl.load(x_ptr + rows[:, None] * N + cols[None, :])
    gl.store(out_ptr + rows, gl.sum(x, axis=1))


@gluonkit.jit
def _two_pins(out_ptr):
    x = gl.arange(0, 64)
    a = gl.set_auto_layout(x, B1)  # noqa: F841  (pins x; unused otherwise)
    b = gl.set_auto_layout(x + 1, C1)
    gl.store(out_ptr + gl.arange(0, 64, layout=C1), b.to(gl.float32))


@gluonkit.jit
def _carried(out_ptr, n):
    acc = gl.zeros([64], gl.float32)
    for i in range(n):
        acc = acc + 1.0
    gl.store(out_ptr + gl.arange(0, 64, layout=C1), acc)


def _build(kernel, arg_types, **constexprs):
    func = kernel.build_ir(arg_types, constexprs, 4, {})
    infer_layouts(func)
    ir.verify(func, concrete=True)
    return func


def test_frontend_kernel_without_layouts_gets_the_default_and_its_slices():
    func = _build(_row_sums, [F32_PTR, F32_PTR], M=16, N=64)
    # [16, 64] with 4 warps: dim1 takes 64 threads = 32 lanes x 2 warps, dim0 the other 2 warps.
    default = BlockedLayout([1, 1], [1, 32], [2, 2], [1, 0])
    layouts = {op.name: ir.layout_of(op.results[0].type) for op in func.walk() if op.results}
    assert layouts["load"] == default
    assert layouts["reduce"] == SliceLayout(1, default)
    assert layouts["arange"] in (SliceLayout(0, default), SliceLayout(1, default))


def test_frontend_kernel_runs_in_the_interpreter_after_inference():
    import numpy as np
    from gluonkit.interpret import Memory, run_grid

    func = _build(_row_sums, [F32_PTR, F32_PTR], M=16, N=64)
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    out = np.zeros(16, np.float32)
    memory = Memory()
    run_grid(func, (1, 1, 1), [memory.register(x), memory.register(out)], memory)
    assert np.allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_frontend_conflict_shows_both_set_auto_layout_lines():
    with pytest.raises(LayoutConflictError) as err:
        _build(_two_pins, [F32_PTR])
    text = str(err.value)
    assert "a = gl.set_auto_layout(x, B1)" in text
    assert "b = gl.set_auto_layout(x + 1, C1)" in text


def test_frontend_loop_carried_auto_tensor_takes_the_store_layout():
    func = _build(_carried, [F32_PTR, ir.int32])
    loop = next(op for op in func.walk() if op.name == "for")
    assert ir.layout_of(loop.results[0].type) == C1
    assert ir.layout_of(loop.regions[0].args[1].type) == C1
