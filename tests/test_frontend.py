"""Frontend tests: the IR that small kernels build (printed and walked), control-flow
structure, constexpr folding, @jit inlining, the promotion table and the IR cache."""

from __future__ import annotations

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import ir
from gluonkit.layouts.distributed import AutoLayout
from gluonkit.lang import promotion
from gluonkit.lang import LayoutMismatchError

F32P = gl.pointer_type(gl.float32)
BLOCKED = gl.BlockedLayout([1], [32], [4], [0])
BLOCKED_2D = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])


def ops(func, name=None):
    """All ops of ``func`` (nested ones included), optionally only those called ``name``."""
    return [op for op in func.walk() if name is None or op.name == name]


def top_ops(func):
    return [op.name for op in func.body.ops]


# ----------------------------------------------------------------------- basic kernels
@gluonkit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr):
    pid = gl.program_id(0)
    offs = pid * BLOCK + gl.arange(0, BLOCK, BLOCKED)
    mask = offs < n
    x = gl.load(x_ptr + offs, mask=mask, other=0.0)
    y = gl.load(y_ptr + offs, mask=mask, cache_modifier=".cg", eviction_policy="evict_last")
    gl.store(out_ptr + offs, x + y, mask=mask)


def test_vector_add_ir():
    f = add_kernel.build_ir([F32P, F32P, F32P, gl.int32], {"BLOCK": 128}, 4, {})
    text = ir.print_function(f)
    assert text.splitlines()[0] == f"#L0 = {BLOCKED!r}"
    assert "func @add_kernel(%x_ptr0: ptr<float32>, %y_ptr1: ptr<float32>, %out_ptr2: ptr<float32>, %n3: int32)" in text
    assert "arange {start = 0, end = 128} : tensor<128xint32, #L0>" in text
    assert "compare" in text and "predicate = 'lt'" in text
    assert "addptr" in text and ": tensor<128xptr<float32>, #L0>" in text
    assert "cache_modifier = '.cg', eviction_policy = 'evict_last'" in text
    assert "store" in text and top_ops(f)[-1] == "return"
    # pid * BLOCK: the constexpr becomes an int32 constant of value 128.
    assert any(op.attrs.get("value") == 128 and op.results[0].type == gl.int32 for op in ops(f, "constant"))
    load = [op for op in ops(f, "load") if op.attrs["has_other"]][0]
    assert len(load.operands) == 3 and load.results[0].type == ir.TensorType(gl.float32, (128,), BLOCKED)
    assert f.arg_names == ["x_ptr", "y_ptr", "out_ptr", "n"] and f.constexprs == {"BLOCK": 128}


def test_locations_point_at_source_lines():
    f = add_kernel.build_ir([F32P, F32P, F32P, gl.int32], {"BLOCK": 64}, 4, {})
    store = ops(f, "store")[0]
    assert store.loc.source_line.strip() == "gl.store(out_ptr + offs, x + y, mask=mask)"
    assert store.loc.file == __file__ and store.loc.function == "add_kernel"
    with open(__file__) as fh:
        assert fh.read().splitlines()[store.loc.line - 1] == store.loc.source_line


def test_cache_is_keyed_by_specialization():
    types = [F32P, F32P, F32P, gl.int32]
    a = add_kernel.build_ir(types, {"BLOCK": 32}, 4, {})
    assert add_kernel.build_ir(types, {"BLOCK": 32}, 4, {}) is a
    assert add_kernel.build_ir(types, {"BLOCK": 64}, 4, {}) is not a
    with pytest.raises(LayoutMismatchError, match="num_warps=8"):  # not the cached 4-warp IR: its layout has 4 warps
        add_kernel.build_ir(types, {"BLOCK": 32}, 8, {})
    assert add_kernel.build_ir(types, {"BLOCK": 32}, 4, {"n": {"divisibility": 16}}) is not a


def test_divisibility_specialization_adds_hint():
    f = add_kernel.build_ir([F32P, F32P, F32P, gl.int32], {"BLOCK": 32}, 4,
                            {"x_ptr": {"divisibility": 16}, "n": {"divisibility": 16}})
    hints = ops(f, "hint")
    assert [h.operands[0] for h in hints] == [f.args[0], f.args[3]]
    assert all(h.attrs["multiple_of"] == (16,) for h in hints)
    # Uses of x_ptr go through the hint, not the raw argument.
    addptrs = ops(f, "addptr")
    splat_srcs = {op.operands[0] for op in ops(f, "splat")}
    assert hints[0].results[0] in splat_srcs and f.args[0] not in splat_srcs and addptrs


# ---------------------------------------------------------------- constexpr folding
@gluonkit.jit
def folding_kernel(out_ptr, MODE: gl.constexpr, N: gl.constexpr):
    K: gl.constexpr = N * 2 + 1
    if MODE == "double":
        v = gl.full([N], K, gl.int32, BLOCKED)
    else:
        v = gl.zeros([N], gl.int32, BLOCKED)
    gl.store(out_ptr + gl.arange(0, N, BLOCKED), v)


def test_compile_time_if_is_folded():
    f = folding_kernel.build_ir([gl.pointer_type(gl.int32)], {"MODE": "double", "N": 32}, 4, {})
    assert not ops(f, "if")
    consts = [op for op in ops(f, "constant") if isinstance(op.results[0].type, ir.TensorType)]
    assert [c.attrs["value"] for c in consts] == [65]  # K = 32 * 2 + 1, folded
    g = folding_kernel.build_ir([gl.pointer_type(gl.int32)], {"MODE": "zero", "N": 32}, 4, {})
    assert [c.attrs["value"] for c in ops(g, "constant") if isinstance(c.results[0].type, ir.TensorType)] == [0]


def test_constexpr_default_and_plain_assignment_is_runtime():
    @gluonkit.jit
    def k(p, N: gl.constexpr = 16):
        c = 3  # a plain assignment makes a runtime int32 scalar (Triton's rule)
        gl.static_assert(c.dtype == gl.int32)
        gl.store(p + gl.arange(0, N), gl.full([N], c, gl.int32))

    f = k.build_ir([gl.pointer_type(gl.int32)], {}, 4, {})
    assert ops(f, "arange")[0].attrs["end"] == 16
    assert [op.name for op in f.body.ops][:2] == ["constant", "arange"]
    assert ops(f, "splat")  # full() of a runtime scalar splats it


# --------------------------------------------------------------------- control flow
@gluonkit.jit
def loop_kernel(x_ptr, n):
    offs = gl.arange(0, 32, BLOCKED)
    acc = gl.zeros([32], gl.float32, BLOCKED)
    count = 0
    for i in range(1, n, 2):
        x = gl.load(x_ptr + offs + i)
        acc = acc + x
        count += 1
    gl.store(x_ptr + offs, acc / count)


def test_for_loop_carries_assigned_variables():
    f = loop_kernel.build_ir([F32P, gl.int32], {}, 4, {})
    (loop,) = ops(f, "for")
    lb, ub, step, *inits = loop.operands
    assert ub is f.args[1]
    assert [lb.defining_op.attrs["value"], step.defining_op.attrs["value"]] == [1, 2]
    assert [v.type for v in inits] == [ir.TensorType(gl.float32, (32,), BLOCKED), gl.int32]
    body = loop.regions[0]
    assert [a.name_hint for a in body.args] == ["i", "acc", "count"]
    assert body.terminator.name == "yield" and len(body.terminator.operands) == 2
    assert [r.name_hint for r in loop.results] == ["acc", "count"]
    # x is local to the body; after the loop acc/count are the loop's results.
    div = [op for op in ops(f, "binary") if op.attrs["fn"] == "div"][0]
    assert div.operands[0] is loop.results[0]


def test_reverse_range_with_constant_negative_step():
    @gluonkit.jit
    def k(p):
        for i in range(10, 0, -3):
            gl.store(p + i, 1.0)

    f = k.build_ir([F32P], {}, 4, {})
    (loop,) = ops(f, "for")
    # range(10, 0, -3) runs as range(0, 10, 3) with i = (0 + 10) - iv: 10, 7, 4, 1.
    assert [v.defining_op.attrs["value"] for v in loop.operands[:3]] == [0, 10, 3]
    subs = [op for op in loop.regions[0].ops if op.name == "binary" and op.attrs["fn"] == "sub"]
    assert subs and subs[0].operands[1] is loop.regions[0].args[0]


@gluonkit.jit
def while_kernel(p, n):
    i = 0
    total = 0.0
    while i < n:
        total = total + 0.5
        i += 1
    gl.store(p, total)


def test_while_loop_structure():
    f = while_kernel.build_ir([F32P, gl.int32], {}, 4, {})
    (loop,) = ops(f, "while")
    before, after = loop.regions
    assert [a.type for a in before.args] == [gl.float32, gl.int32]  # assignment order in the body
    assert before.terminator.name == "condition"
    assert before.terminator.operands[0].type == gl.int1
    assert after.terminator.name == "yield"
    assert ops(f, "store")[0].operands[1] is loop.results[0]


@gluonkit.jit
def if_kernel(p, n):
    x = 1.0
    if n > 4:
        x = 2.0
        only_here = 3
    else:
        y = 5
        x = x + 1.0
    gl.store(p, x)


def test_runtime_if_yields_assigned_variables():
    f = if_kernel.build_ir([F32P, gl.int32], {}, 4, {})
    (branch,) = ops(f, "if")
    then, other = branch.regions
    assert [r.type for r in branch.results] == [gl.float32]
    assert then.terminator.name == other.terminator.name == "yield"
    assert ops(f, "store")[0].operands[1] is branch.results[0]
    assert branch.operands[0].type == gl.int1


def test_runtime_conditional_expression_and_boolean_ops():
    @gluonkit.jit
    def k(p, n, m):
        v = n if (n > 0) and (m > 0) else m
        w = not (n > 3)
        gl.store(p, v + w)

    f = k.build_ir([gl.pointer_type(gl.int32), gl.int32, gl.int32], {}, 4, {})
    (branch,) = ops(f, "if")
    assert branch.results[0].type == gl.int32
    assert [op.attrs["fn"] for op in ops(f, "binary")][:1] == ["and"]
    assert [op.attrs["predicate"] for op in ops(f, "compare")][-1] == "eq"  # not x -> x == 0


def test_static_range_unrolls():
    @gluonkit.jit
    def k(p):
        acc = 0.0
        for i in gl.static_range(4):
            acc = acc + i
        for s in (1, 2):
            acc = acc * s
        gl.store(p, acc)

    f = k.build_ir([F32P], {}, 4, {})
    assert not ops(f, "for")
    assert [op.attrs["fn"] for op in ops(f, "binary")] == ["add"] * 4 + ["mul"] * 2
    adds = [op for op in ops(f, "binary") if op.attrs["fn"] == "add"]
    assert [a.operands[1].defining_op.attrs["value"] for a in adds] == [0.0, 1.0, 2.0, 3.0]


# ----------------------------------------------------------------------- inlining
@gluonkit.jit
def _scaled_pair(x, S: gl.constexpr):
    return x * S, x + S


@gluonkit.jit
def _max_combine(a, b):
    return gl.maximum(a, b)


@gluonkit.jit
def inline_kernel(p, n):
    a, b = _scaled_pair(n, 3)
    gl.store(p, a - b)


def test_jit_calls_are_inlined_with_location_chain():
    f = inline_kernel.build_ir([gl.pointer_type(gl.int32), gl.int32], {}, 4, {})
    names = top_ops(f)
    assert "call" not in names
    mul, add, sub = [op for op in ops(f, "binary")]
    assert [mul.attrs["fn"], add.attrs["fn"], sub.attrs["fn"]] == ["mul", "add", "sub"]
    assert mul.loc.function == "_scaled_pair" and mul.loc.inlined_at.function == "inline_kernel"
    assert mul.loc.inlined_at.source_line.strip() == "a, b = _scaled_pair(n, 3)"
    assert sub.loc.inlined_at is None
    assert sub.operands == [mul.results[0], add.results[0]]


def test_reduce_with_jit_combine_fn():
    @gluonkit.jit
    def k(p, M: gl.constexpr, N: gl.constexpr):
        rows = gl.arange(0, M, gl.SliceLayout(1, BLOCKED_2D))
        cols = gl.arange(0, N, gl.SliceLayout(0, BLOCKED_2D))
        x = gl.load(p + rows[:, None] * N + cols[None, :])
        m = gl.reduce(x, 1, _max_combine)
        s = gl.sum(x, axis=0, keep_dims=True)
        gl.store(p + rows, m)
        gl.store(p + cols[None, :], s)

    f = k.build_ir([F32P], {"M": 16, "N": 32}, 4, {})
    red, total = ops(f, "reduce")
    assert red.attrs["axis"] == 1 and red.results[0].type == ir.TensorType(
        gl.float32, (16,), gl.SliceLayout(1, BLOCKED_2D))
    combine = red.regions[0]
    assert [a.type for a in combine.args] == [gl.float32] * 2
    assert [op.name for op in combine.ops] == ["binary", "yield"]
    assert combine.ops[0].attrs == {"fn": "maximum", "propagate_nan": "none"}
    assert combine.ops[0].loc.function == "_max_combine"
    assert total.attrs["axis"] == 0
    (expand,) = [op for op in ops(f, "expand_dims") if op.operands[0] is total.results[0]]
    assert expand.results[0].type == ir.TensorType(gl.float32, (1, 32), BLOCKED_2D)


def test_full_reduction_to_scalar():
    @gluonkit.jit
    def k(p):
        x = gl.zeros([8, 16], gl.int8, BLOCKED_2D)
        gl.store(p, gl.sum(x))

    f = k.build_ir([gl.pointer_type(gl.int32)], {}, 4, {})
    first, second = ops(f, "reduce")
    assert first.operands[0].type.element == gl.int32  # int8 sums accumulate in int32
    assert second.results[0].type == gl.int32


# --------------------------------------------------------------- shapes and layouts
def test_expand_dims_broadcast_and_auto_layout_pinning():
    @gluonkit.jit
    def k(p):
        rows = gl.arange(0, 16, gl.SliceLayout(1, BLOCKED_2D))
        cols = gl.arange(0, 32)  # AutoLayout
        offs = rows[:, None] * 32 + gl.expand_dims(cols, 0)
        gl.store(p + offs, 1.0)

    f = k.build_ir([F32P], {}, 4, {})
    e0, e1 = ops(f, "expand_dims")
    assert e0.results[0].type.layout == BLOCKED_2D
    assert isinstance(e1.results[0].type.layout, AutoLayout)
    (pin,) = ops(f, "set_auto_layout")  # Gluon: the Auto operand takes the other's layout
    assert pin.operands[0] is e1.results[0] and pin.results[0].type.layout == BLOCKED_2D
    bcasts = ops(f, "broadcast")
    assert sorted(op.results[0].type.shape for op in bcasts) == [(16, 32), (16, 32)]


def test_shape_ops_types():
    @gluonkit.jit
    def k(p):
        x = gl.zeros([4, 8], gl.float32, BLOCKED_2D)
        t = gl.permute(x, (1, 0))
        r = x.reshape(32)
        j = gl.join(x, x)
        a, b = gl.split(j)
        c = gl.convert_layout(t, gl.BlockedLayout([1, 1], [8, 4], [4, 1], [1, 0]))
        d = gl.broadcast_to(gl.zeros([1, 8], gl.float32, BLOCKED_2D), 4, 8)

    f = k.build_ir([F32P], {}, 4, {})
    shape = {op.name: op.results[0].type.shape for op in f.body.ops if op.results}
    assert shape["permute"] == (8, 4) and shape["reshape"] == (32,) and shape["join"] == (4, 8, 2)
    assert [r.type.shape for r in ops(f, "split")[0].results] == [(4, 8), (4, 8)]
    assert shape["convert_layout"] == (8, 4) and shape["broadcast"] == (4, 8)
    assert ops(f, "permute")[0].attrs["order"] == (1, 0)


def test_casts():
    @gluonkit.jit
    def k(p, q):
        x = gl.load(p)
        a = x.to(gl.float16)
        b = x.to(gl.int32, bitcast=True)
        c = gl.cast(x, gl.int1)
        d = x.to(gl.bfloat16, fp_downcast_rounding="rtz")
        e = x.to(gl.float32)  # no-op

    f = k.build_ir([F32P, gl.int32], {}, 4, {})
    casts = ops(f, "cast")
    assert [(c.attrs["to"], c.attrs["bitcast"], c.attrs["rounding"]) for c in casts] == [
        (gl.float16, False, None), (gl.int32, True, None), (gl.bfloat16, False, "rtz")]
    assert ops(f, "compare")[0].attrs["predicate"] == "ne"  # .to(int1) is x != 0


def test_builtins_misc():
    @gluonkit.jit
    def k(p, n):
        NW: gl.constexpr = gl.num_warps()
        gl.static_assert(NW == 8)
        gl.device_print("n =", n, gl.num_programs(1))
        gl.assume(n > 0)
        m = gl.multiple_of(n, 16)
        v = gl.max_contiguous(gl.arange(0, 64), 64)
        w = gl.fma(gl.load(p), 2.0, 1.0)
        z = gl.where(n > 2, gl.maximum(w, 0.0), gl.minimum(w, 1.0, propagate_nan=gl.PropagateNan.ALL))
        q = gl.cdiv(n, 16) + gl.cdiv(100, 16)
        r = gl.sqrt(gl.abs(z)) + gl.exp2(z) + gl.rsqrt(z) + gl.log(z) + gl.sin(z) - gl.cos(z)

    f = k.build_ir([F32P, gl.int32], {}, 8, {})
    (pr,) = ops(f, "device_print")
    assert pr.attrs["prefix"] == "n =" and len(pr.operands) == 2
    assert ops(f, "assume") and ops(f, "fma") and ops(f, "select")
    hints = ops(f, "hint")
    assert [h.attrs["multiple_of"] for h in hints] == [(16,), None]
    assert [h.attrs["max_contiguous"] for h in hints] == [None, (64,)]
    fns = [op.attrs["fn"] for op in ops(f, "unary")]
    assert fns == ["abs", "sqrt", "exp2", "rsqrt", "log", "sin", "cos"]
    mins = [op for op in ops(f, "binary") if op.attrs["fn"] == "minimum"]
    assert mins[0].attrs["propagate_nan"] == "all"
    # cdiv(100, 16) folds to the constant 7.
    assert any(op.attrs.get("value") == 7 for op in ops(f, "constant"))


def test_launcher_forwarding():
    calls = []
    previous = gl.jit.__globals__["_launcher"]
    gl.set_launcher(lambda fn, grid, args, kwargs: calls.append((fn, grid, args, kwargs)) or "ok")
    try:
        assert add_kernel[(3,)](1, 2, num_warps=8) == "ok"
    finally:
        gl.set_launcher(previous)
    assert calls == [(add_kernel, (3,), (1, 2), {"num_warps": 8})]


# ------------------------------------------------------------------------ promotion
# (a, a is a literal, b, b is a literal, div_or_mod) -> common type, from the rules in
# gluonkit/lang/promotion.py (Triton's computation_type_impl / integer_promote_impl).
PROMOTIONS = [
    (gl.int32, False, gl.float16, False, False, gl.float16),
    (gl.int32, False, gl.int64, False, False, gl.int64),
    (gl.int32, False, gl.uint32, False, False, gl.uint32),
    (gl.int64, False, gl.uint32, False, False, gl.int64),
    (gl.int8, False, gl.uint8, False, False, gl.uint8),
    (gl.int1, False, gl.int8, False, False, gl.int8),
    (gl.float16, False, gl.bfloat16, False, False, gl.float16),
    (gl.bfloat16, False, gl.bfloat16, False, False, gl.bfloat16),
    (gl.bfloat16, False, gl.int32, False, False, gl.float32),
    (gl.float16, False, gl.float16, False, True, gl.float32),
    (gl.float32, False, gl.float64, False, False, gl.float64),
    (gl.float8e5, False, gl.float8e4nv, False, False, gl.float16),
    (gl.float8e5, False, gl.float8e5, False, False, gl.float8e5),
    (gl.int8, False, gl.int32, True, False, gl.int8),      # x_int8 + 1
    (gl.float16, False, gl.float32, True, False, gl.float16),  # x_fp16 * 2.0
    (gl.float16, False, gl.int32, True, True, gl.float32),     # x_fp16 / 2
    (gl.int32, False, gl.float32, True, False, gl.float32),    # x_int32 + 1.5
    (gl.uint8, False, gl.int1, True, False, gl.uint8),         # x_uint8 + True
]


@pytest.mark.parametrize("a,a_lit,b,b_lit,div,expected", PROMOTIONS)
def test_promotion_table(a, a_lit, b, b_lit, div, expected):
    assert promotion.computation_type(a, a_lit, b, b_lit, div) == expected
    assert promotion.computation_type(b, b_lit, a, a_lit, div) == expected


def test_promotion_errors_and_literal_types():
    with pytest.raises(TypeError, match="one signedness"):
        promotion.computation_type(gl.int32, False, gl.uint32, False, True)
    with pytest.raises(TypeError, match="no common type"):
        promotion.computation_type(gl.float8e5, False, gl.int32, False)
    assert [promotion.literal_dtype(v) for v in (True, 1, 2**31, 2**32, 2**63, 1.5, 1e300)] == [
        gl.int1, gl.int32, gl.uint32, gl.int64, gl.uint64, gl.float32, gl.float64]


@gluonkit.jit
def _promote_kernel(a, b, OP: gl.constexpr, EXPECTED: gl.constexpr):
    if OP == "+":
        r = a + b
    elif OP == "/":
        r = a / b
    elif OP == "//":
        r = a // b
    elif OP == "<<":
        r = a << b
    else:
        r = a + 1
    gl.static_assert(r.dtype == EXPECTED, f"got {r.dtype}")


@pytest.mark.parametrize("a,b,op,expected", [
    (gl.int32, gl.float16, "+", gl.float16),
    (gl.int32, gl.int64, "+", gl.int64),
    (gl.int32, gl.uint32, "+", gl.uint32),
    (gl.int32, gl.int32, "/", gl.float32),     # int / int is float32
    (gl.float16, gl.float16, "/", gl.float32),
    (gl.int16, gl.int8, "//", gl.int16),
    (gl.uint8, gl.int32, "<<", gl.int32),
    (gl.int8, gl.int8, "lit", gl.int8),        # a + 1 keeps int8
    (gl.bfloat16, gl.int8, "lit", gl.bfloat16),
])
def test_promotion_through_the_frontend(a, b, op, expected):
    f = _promote_kernel.build_ir([a, b], {"OP": op, "EXPECTED": expected}, 4, {})
    ir.verify(f)


def test_literal_adapts_to_tensor_type_in_ir():
    @gluonkit.jit
    def k(p):
        x = gl.load(p + gl.arange(0, 16))
        y = x * 3

    f = k.build_ir([gl.pointer_type(gl.int16)], {}, 4, {})
    (mul,) = [op for op in ops(f, "binary") if op.attrs["fn"] == "mul"]
    assert mul.results[0].type.element == gl.int16
    assert not ops(f, "cast")


def test_like_constructors_and_static_print(capsys):
    @gluonkit.jit
    def k(p):
        x = gl.zeros([4, 8], gl.float16, BLOCKED_2D)
        a = gl.full_like(x, 2.0)
        b = gl.zeros_like(x, dtype=gl.int32)
        gl.static_print("shape", x.shape, x.dtype)

    f = k.build_ir([F32P], {}, 4, {})
    consts = [op.results[0].type for op in ops(f, "constant")]
    assert consts == [ir.TensorType(gl.float16, (4, 8), BLOCKED_2D)] * 2 + [ir.TensorType(gl.int32, (4, 8), BLOCKED_2D)]
    assert capsys.readouterr().out == "shape (4, 8) float16\n"


def test_python_min_max_print_in_kernels():
    @gluonkit.jit
    def k(p, n):
        a = max(n, 3)  # runtime: gl.maximum
        B: gl.constexpr = min(4, 8)  # compile-time: folded
        gl.static_assert(B == 4)
        print("val", a)  # device_print with prefix "val"

    f = k.build_ir([F32P, gl.int32], {}, 4, {})
    assert [op.attrs["fn"] for op in ops(f, "binary")] == ["maximum"]
    (pr,) = ops(f, "device_print")
    assert pr.attrs["prefix"] == "val" and pr.operands == ops(f, "binary")[0].results


def test_two_spellings_of_one_layout_do_not_conflict():
    blocked = gl.BlockedLayout([1], [32], [4], [0])
    linear = gl.DistributedLinearLayout([], [[1], [2], [4], [8], [16]], [[32], [64]], [], [128])

    @gluonkit.jit
    def k(p, A: gl.constexpr, B: gl.constexpr):
        x = gl.arange(0, 128, layout=A) + gl.arange(0, 128, layout=B)
        gl.store(p + gl.arange(0, 128, layout=A), x)

    assert "binary" in ir.print_function(k.build_ir([ir.PointerType(ir.int32)], dict(A=blocked, B=linear)))
