"""What Gluon 3.9's frontend accepts, with Gluon's semantics: launch options as kernel
parameters, ``@gluonkit.aggregate``, ``@gluonkit.constexpr_function``, tuples through
``@jit`` calls, early returns, ``break``/``continue`` and the debugging builtins.

Kernels run in the CPU interpreter against numpy on fresh random inputs; misuse must give
a :class:`~gluonkit.CompilationError` naming the user's line; a few kernels are compiled for
sm_90a and sm_100a through ptxas.
"""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.lang.errors import ArgumentError

from interpreting import interpreter_on
from kernel_checks import line_containing, needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]


@pytest.fixture(autouse=True)
def interpret():
    with interpreter_on():
        yield


@pytest.fixture
def rng():
    return np.random.default_rng()


# ------------------------------------------------------------ launch options as parameters
@gluonkit.jit
def warps_kernel(x_ptr, out_ptr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    offs = gl.arange(0, 32 * num_warps, layout)
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, x * num_warps + gl.num_warps() * 100 + gl.num_ctas() * 10000)


@pytest.mark.parametrize("warps", [1, 2, 8])
def test_a_keyword_launch_option_binds_the_parameter_too(warps, rng):
    x = rng.integers(-50, 50, 32 * warps).astype(np.int32)
    out = np.zeros_like(x)
    warps_kernel[(1,)](x, out, num_warps=warps)
    np.testing.assert_array_equal(out, x * warps + warps * 100 + 10000)


@gluonkit.jit
def options_kernel(x_ptr, out_ptr, num_warps: gl.constexpr = 2, num_ctas: gl.constexpr = 1):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) + num_warps * 10 + gl.num_warps() * 1000 + num_ctas)


def test_a_positional_argument_or_default_binds_only_the_parameter(rng):
    # As Triton's binder does: only a keyword argument also sets the launch option.
    x = rng.integers(-50, 50, 128).astype(np.int32)
    out = np.zeros_like(x)
    options_kernel[(1,)](x, out, 8)
    np.testing.assert_array_equal(out, x + 80 + 4000 + 1)
    options_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, x + 20 + 4000 + 1)
    options_kernel[(1,)](x, out, num_warps=4, num_ctas=1)
    np.testing.assert_array_equal(out, x + 40 + 4000 + 1)


def test_a_grid_callable_sees_the_launch_options(rng):
    seen = []
    x = rng.integers(-50, 50, 64).astype(np.int32)
    out = np.zeros_like(x)
    warps_kernel[lambda meta: seen.append(meta) or (1,)](x, out, num_warps=2)
    assert seen[0]["num_warps"] == 2 and seen[0]["num_ctas"] == 1
    np.testing.assert_array_equal(out, x * 2 + 200 + 10000)


def test_bad_cluster_sizes_are_refused_at_launch_and_compile(rng):
    x = np.zeros(128, np.int32)
    with pytest.raises(ArgumentError, match="num_ctas=32: a cluster has at most 16 CTAs") as info:
        options_kernel[(1,)](x, x, num_ctas=32)
    assert f":{line_containing(options_kernel.fn, 'def options_kernel')}:" in str(info.value)
    with pytest.raises(ArgumentError, match="a cluster has at most 16 CTAs"):
        warps_kernel.compile("*i32", "*i32", num_warps=4, num_ctas=64)
    with pytest.raises(ArgumentError, match="num_ctas must be a positive power of two"):
        warps_kernel[(1,)](x, x, num_warps=4, num_ctas=3)
    with pytest.raises(ArgumentError, match="num_warps must be a positive power of two"):
        warps_kernel[(1,)](x, x, num_warps=3)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_launch_option_parameters_compile(target):
    compiled = warps_kernel.compile("*i32:16", "*i32:16", target=target, num_warps=8)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert ".reqntid 256" in compiled.asm["ptx"] or "maxntid 256" in compiled.asm["ptx"]


# ----------------------------------------------------------------------------- aggregates
@gluonkit.constexpr_function
def row_layout(num_warps):
    """A layout computed at compile time from a constexpr argument."""
    return gl.BlockedLayout([1], [32], [num_warps], [0])


@gluonkit.aggregate
class Affine:
    """``scale * x + shift`` with a compile-time scale and a runtime shift."""
    shift: gl.tensor
    scale: gl.constexpr
    bias: gl.constexpr = 0.5

    @gluonkit.jit
    def apply(self, x):
        return x * self.scale + self.shift + self.bias

    @gluonkit.constexpr_function
    def doubled_scale(self, k):
        return self.scale * 2 * k


@gluonkit.aggregate
class Pair:
    """Two tensors and an Affine: a nested aggregate with a constexpr_function __init__."""
    a: gl.tensor
    b: gl.tensor
    f: Affine
    n: gl.constexpr

    @gluonkit.constexpr_function
    def __init__(self, a, b, f, n):
        self.a = a
        self.b = b
        self.f = f
        self.n = gl.constexpr(n)

    @gluonkit.jit
    def total(self):
        return self.f.apply(self.a) + self.b * self.n


@gluonkit.aggregate
class Stats:
    """A @jit __init__ that computes its fields from tensors."""
    lo: gl.tensor
    hi: gl.tensor
    width: gl.constexpr

    @gluonkit.jit
    def __init__(self, x, width: gl.constexpr):
        self.lo = gl.min(x, axis=0)
        self.hi = gl.max(x, axis=0)
        self.width = width

    @gluonkit.jit
    def span(self):
        return (self.hi - self.lo) * self.width


@gluonkit.jit
def make_pair(x, shift):
    return Pair(x, x * 2.0, Affine(shift, 3.0), 2)


@gluonkit.jit
def aggregate_kernel(x_ptr, out_ptr, stats_ptr, shift, ITERS: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = row_layout(num_warps)
    offs = gl.arange(0, 32 * num_warps, layout)
    x = gl.load(x_ptr + offs)
    p = make_pair(x, shift)
    gl.static_assert(p.f.doubled_scale(2) == 12.0)
    gl.static_assert(p.f.bias == 0.5)
    acc = p
    for i in range(ITERS):  # an aggregate carried through a runtime loop
        acc = Pair(acc.a + 1.0, acc.b, acc.f, acc.n)
    if shift > 0:  # and through a runtime if
        acc = gl.aggregate_replace(acc, b=acc.b * 0.0)
    gl.store(out_ptr + offs, acc.total())
    s = Stats(x, width=4)
    gl.store(stats_ptr, s.span())


@pytest.mark.parametrize("shift", [1.5, -2.0])
def test_aggregates_construct_call_methods_and_flow_through_control_flow(shift, rng):
    x = rng.standard_normal(64).astype(np.float32)
    out = np.zeros_like(x)
    stats = np.zeros(1, np.float32)
    aggregate_kernel[(1,)](x, out, stats, shift, ITERS=3, num_warps=2)
    x64 = x.astype(np.float64)
    b = x64 * 2.0 * (0.0 if shift > 0 else 1.0)
    expected = (x64 + 3.0) * 3.0 + shift + 0.5 + b * 2
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats[0], (x64.max() - x64.min()) * 4, rtol=1e-5)


@gluonkit.aggregate
class Window:
    """No __init__: the fields, in order, are the constructor's parameters."""
    start: gl.tensor
    size: gl.constexpr
    step: gl.constexpr = 1


@gluonkit.jit
def window_kernel(x_ptr, out_ptr, start):
    w = Window(start, size=64)
    w2 = Window(start + 1, 64, 2)
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [2], [0])
    offs = gl.arange(0, w.size, layout)
    gl.store(out_ptr + offs, gl.load(x_ptr + w.start + offs * w.step) + gl.load(x_ptr + w2.start + offs * w2.step))


def test_an_aggregate_without_init_takes_its_fields_as_parameters(rng):
    x = rng.standard_normal(256).astype(np.float32)
    out = np.zeros(64, np.float32)
    window_kernel[(1,)](x, out, 5, num_warps=2)
    np.testing.assert_allclose(out, x[5:69] + x[6:6 + 128:2], rtol=1e-6)


@gluonkit.aggregate
class Config:
    BLOCK: gl.constexpr
    STAGES: gl.constexpr = 2


def test_aggregates_are_immutable_and_constructible_on_the_host():
    c = Config(gl.constexpr(64))
    assert (c.BLOCK, c.STAGES) == (64, 2)
    with pytest.raises(TypeError, match="immutable"):
        c.BLOCK = 4
    assert gl.aggregate_replace(c, STAGES=4).STAGES == 4 and c.STAGES == 2
    with pytest.raises(TypeError, match="missing required argument 'size'"):
        Window(1)
    with pytest.raises(TypeError, match="field 'start' of Window is annotated gl.tensor but got the compile-time "
                       "value 3"):
        Window(3, 16)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_aggregate_kernel_compiles(target):
    compiled = aggregate_kernel.compile("*fp32:16", "*fp32:16", "*fp32", "fp32", target=target, ITERS=2,
                                        num_warps=4)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


F32P = gl.pointer_type(gl.float32)


def _error(kernel, arg_types, constexprs=None, num_warps=4):
    with pytest.raises(CompilationError) as info:
        kernel.build_ir(arg_types, constexprs or {}, num_warps, {})
    return info.value, str(info.value)


def _assert_at(text, fn, marker):
    assert f"{__file__}:{line_containing(fn, marker)}:" in text, text


@gluonkit.jit
def bad_constexpr_field(x_ptr):
    x = gl.load(x_ptr)
    c = Config(x)  # <- runtime value for a constexpr field


@gluonkit.jit
def bad_tensor_field(x_ptr):
    w = Window(3, 16)  # <- compile-time value for a tensor field


@gluonkit.jit
def bad_mutation(x_ptr):
    w = Window(gl.load(x_ptr), 16)
    w.size = 32  # <- aggregates are immutable


@gluonkit.jit
def bad_unknown_field(x_ptr):
    w = Window(gl.load(x_ptr), 16, stride=3)  # <- no such field


@gluonkit.aggregate
class Forgetful:
    a: gl.tensor
    b: gl.constexpr

    @gluonkit.jit
    def __init__(self, a):
        self.a = a


@gluonkit.jit
def bad_unset_field(x_ptr):
    f = Forgetful(gl.load(x_ptr))  # <- b never set


@gluonkit.jit
def bad_loop_changes_constexpr_field(x_ptr, n):
    w = Window(gl.load(x_ptr), 16)
    for i in range(n):  # <- the loop
        w = Window(w.start, 32)


@gluonkit.jit
def bad_branch_changes_tensor_type(x_ptr, n):
    w = Window(gl.load(x_ptr), 16)
    if n > 0:  # <- the if
        w = Window(w.start.to(gl.float16), 16)


@pytest.mark.parametrize("kernel, marker, message", [
    (bad_constexpr_field, "# <- runtime value", "field 'BLOCK' of Config is annotated gl.constexpr but got a runtime"),
    (bad_tensor_field, "# <- compile-time value", "field 'start' of Window is annotated gl.tensor"),
    (bad_mutation, "# <- aggregates are immutable", "cannot assign to field 'size' of Window"),
    (bad_unknown_field, "# <- no such field", "unexpected keyword argument 'stride'"),
    (bad_unset_field, "# <- b never set", "the constructor of Forgetful did not set the field 'b'"),
    (bad_loop_changes_constexpr_field, "# <- the loop", "compile-time values 16 and 32 at .size"),
    (bad_branch_changes_tensor_type, "# <- the if", "types float16 and float32 at .start in its two branches"),
], ids=lambda v: getattr(v, "__name__", None))
def test_aggregate_misuse_is_a_compilation_error_at_the_users_line(kernel, marker, message):
    args = [F32P] + ([gl.int32] if "n" in kernel.arg_names else [])
    _, text = _error(kernel, args)
    assert message in text, text
    _assert_at(text, kernel.fn, marker)


@gluonkit.jit(debug=False)
@gluonkit.must_use_result("Keep the handle.")
def handle(x):
    return x + 1


@gluonkit.jit
def drops_result(x_ptr):
    handle(gl.load(x_ptr))  # <- dropped


@gluonkit.jit
def keeps_result(x_ptr):
    y = handle(gl.load(x_ptr))
    gl.store(x_ptr, y)


@gluonkit.constexpr_function
def picky(n):
    if n % 2:
        raise ValueError(f"{n} is odd")
    return n // 2


@gluonkit.jit
def bad_constexpr_function(x_ptr, N: gl.constexpr):
    half: gl.constexpr = picky(N)  # <- raises


def test_must_use_result_refuses_a_dropped_result():
    _, text = _error(drops_result, [F32P])
    assert "the result of handle(...) is not used; it is marked must_use_result. Keep the handle." in text
    _assert_at(text, drops_result.fn, "# <- dropped")
    keeps_result.build_ir([F32P], {}, 4, {})


def test_constexpr_function_failures_are_reported_at_the_call():
    assert picky(8) == 4  # a plain call from Python
    _, text = _error(bad_constexpr_function, [F32P], {"N": 5})
    assert "picky(...) failed at compile time: ValueError: 5 is odd" in text
    _assert_at(text, bad_constexpr_function.fn, "# <- raises")
    bad_constexpr_function.build_ir([F32P], {"N": 6}, 4, {})


# --------------------------------------------------------------------------- early return
@gluonkit.jit
def clamp_or_double(x, lim):
    if x > lim:
        return lim
    elif x < -lim:
        return -lim
    y = x * 2
    return y


@gluonkit.jit
def split_by_sign(x):
    if x >= 0:
        return x, 1
    return -x, -1


@gluonkit.jit
def early_return_kernel(x_ptr, out_ptr, sign_ptr, n, LIM: gl.constexpr):
    pid = gl.program_id(0)
    if pid >= n:
        return
    v = gl.load(x_ptr + pid)
    if LIM > 100:  # a compile-time if around a runtime early return
        return
    gl.store(out_ptr + pid, clamp_or_double(v, LIM))
    magnitude, sign = split_by_sign(v)
    gl.store(sign_ptr + pid, magnitude * sign)


def test_early_returns_in_runtime_ifs(rng):
    x = rng.integers(-9, 10, 40).astype(np.int32)
    out = np.full(40, 1234, np.int32)
    signs = np.full(40, 1234, np.int32)
    early_return_kernel[(40,)](x, out, signs, 33, LIM=5)
    expected = np.where(x > 5, 5, np.where(x < -5, -5, x * 2))
    np.testing.assert_array_equal(out[:33], expected[:33])
    np.testing.assert_array_equal(out[33:], 1234)  # programs past n returned first
    np.testing.assert_array_equal(signs[:33], x[:33])
    early_return_kernel[(40,)](x, out, signs, 40, LIM=200)  # returns before any store
    np.testing.assert_array_equal(out[33:], 1234)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_early_return_kernel_compiles(target):
    compiled = early_return_kernel.compile("*i32", "*i32", "*i32", "i32", target=target, LIM=5)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    compiled = search_kernel.compile("*i32", "*i32", "i32", target=target, N=4)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@gluonkit.jit
def returns_on_one_path_only(x):
    if x > 0:
        return x  # <- then
    gl.static_print("falls off")


@gluonkit.jit
def bad_mixed_returns(x_ptr):
    v = returns_on_one_path_only(gl.load(x_ptr))


@gluonkit.jit
def returns_two_types(x):
    if x > 0:  # <- if
        return x
    return x.to(gl.float16)


@gluonkit.jit
def bad_return_types(x_ptr):
    v = returns_two_types(gl.load(x_ptr))


@gluonkit.jit
def bad_return_in_loop(x_ptr, n):
    for i in range(n):
        if i > 3:
            return  # <- in loop


def test_early_return_misuse():
    _, text = _error(bad_mixed_returns, [F32P])
    assert "returns a runtime value of type float32 and the compile-time value None on the two paths" in text, text
    _assert_at(text, returns_on_one_path_only.fn, "if x > 0")
    _, text = _error(bad_return_types, [F32P])
    assert "returns types float32 and float16 on the two paths of the runtime if" in text, text
    _assert_at(text, returns_two_types.fn, "# <- if")
    _, text = _error(bad_return_in_loop, [F32P, gl.int32])
    assert "return inside a runtime for loop is not supported" in text, text


# ------------------------------------------------------------------------- device_assert
@gluonkit.jit(debug=True)
def assert_kernel(x_ptr, n):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    x = gl.load(x_ptr + offs)
    gl.device_assert(x < n, "x is too big", mask=offs < 100)  # <- device_assert
    assert gl.program_id(0) < 2, "too many programs"  # <- assert


@gluonkit.jit
def quiet_assert_kernel(x_ptr, n):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    gl.device_assert(gl.load(x_ptr + offs) < n, "x is too big")


def test_device_assert_fails_at_the_users_line_in_the_interpreter(rng):
    from gluonkit.interpret import InterpreterError
    x = rng.permutation(128).astype(np.int32)
    assert_kernel[(2,)](x, 128)  # holds everywhere
    x[:100] = rng.integers(0, 60, 100)
    bad = int(np.argmax(x[:100] >= 50))
    with pytest.raises(InterpreterError) as info:
        assert_kernel[(1,)](x, 50)
    text = str(info.value)
    assert f"device_assert failed in program (0, 0, 0) at element ({bad}): x is too big" in text, text
    _assert_at(text, assert_kernel.fn, "# <- device_assert")
    x[:] = 0
    with pytest.raises(InterpreterError, match=r"program \(2, 0, 0\): too many programs") as info:
        assert_kernel[(3,)](x, 1)
    _assert_at(str(info.value), assert_kernel.fn, "# <- assert")


def test_device_assert_is_compiled_in_only_in_debug_mode(monkeypatch):
    x = np.full(128, 7, np.int32)
    quiet_assert_kernel[(1,)](x, 3)  # as in Gluon: no effect without debug
    assert not any(op.name == "device_assert"
                   for op in quiet_assert_kernel.build_ir([gl.pointer_type(gl.int32), gl.int32]).walk())
    monkeypatch.setenv("GLUONKIT_DEBUG", "1")
    from gluonkit.interpret import InterpreterError
    with pytest.raises(InterpreterError, match="x is too big"):
        quiet_assert_kernel[(1,)](x, 3)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_device_assert_lowers_to_assertfail(target):
    compiled = assert_kernel.compile("*i32", "i32", target=target)
    ptx = compiled.asm["ptx"]
    assert ".extern .func __assertfail" in ptx and ptx.count("call.uni __assertfail") == 2
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


# ------------------------------------------- tuples, keywords, defaults, small builtins
@gluonkit.jit
def swap(t):
    return t[1], t[0]


@gluonkit.jit
def affine(x, factor=2.0, *, bias=1.0):
    return x * factor + bias


@gluonkit.jit
def tuples_kernel(x_ptr, out_ptr, n, N: gl.constexpr, FLAG: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, N, layout=L)
    x = gl.load(pointer=x_ptr + offs, mask=offs < n, other=0.0)
    pair = (x, x + 1.0)
    a, b = swap(pair)
    gl.static_assert(len(pair) == 2, "a pair")
    I: gl.constexpr = 1
    c = pair[I]
    acc = (x * 0.0, 0)  # the 0 becomes a runtime int32, as in Gluon
    for i in range(3):
        acc = (acc[0] + c, acc[1] + i)
    P: gl.constexpr = 2 ** 3
    M: gl.constexpr = max(P, 4) + min(1, 2)
    v = 1.0 if FLAG else 2.0
    w = affine(a, bias=0.5) if n > 3 else affine(b, factor=3.0)
    t = gl.to_tensor(5)
    r = acc[0] + acc[1] + M + v + w + t
    gl.store(out_ptr + offs, r, mask=offs < n)


@pytest.mark.parametrize("n, flag", [(100, True), (3, False)])
def test_tuples_keywords_defaults_and_compile_time_builtins(n, flag, rng):
    x = rng.standard_normal(128).astype(np.float32)
    out = np.zeros_like(x)
    tuples_kernel[(1,)](x, out, n, N=128, FLAG=flag)
    x64 = x.astype(np.float64)
    w = (x64 + 1) * 2 + 0.5 if n > 3 else x64 * 3 + 1
    expected = 3 * (x64 + 1) + 3 + 9 + (1.0 if flag else 2.0) + w + 5
    np.testing.assert_allclose(out[:n], expected[:n], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[n:], 0)


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_tuples_kernel_compiles(target):
    compiled = tuples_kernel.compile("*fp32:16", "*fp32:16", "i32", target=target, N=128, FLAG=True)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"


@gluonkit.jit
def printing_kernel(x_ptr, N: gl.constexpr):
    gl.static_print("N is", N, N * 2)
    gl.static_assert(N % 2 == 0, f"N must be even, got {N}")  # <- static_assert


def test_static_print_and_static_assert(capsys):
    printing_kernel.build_ir([F32P], {"N": 8}, 4, {})
    assert "N is 8 16" in capsys.readouterr().out
    _, text = _error(printing_kernel, [F32P], {"N": 7})
    assert "static_assert failed: N must be even, got 7" in text, text
    _assert_at(text, printing_kernel.fn, "# <- static_assert")


@gluonkit.jit
def bad_tuple_index(x_ptr, i):
    t = (gl.load(x_ptr), gl.load(x_ptr + 1))
    v = t[i]  # <- runtime index


@gluonkit.jit
def bad_unpack(x_ptr):
    a, b, c = swap((gl.load(x_ptr), 1))  # <- three names


@gluonkit.jit
def bad_break(x_ptr, n):
    for i in range(n):
        break  # <- break


def test_tuple_and_syntax_misuse():
    _, text = _error(bad_tuple_index, [F32P, gl.int32])
    assert "an index into a tuple must be a compile-time constant" in text
    _assert_at(text, bad_tuple_index.fn, "# <- runtime index")
    _, text = _error(bad_unpack, [F32P])
    assert "cannot unpack a tuple of 2 values into 3 names" in text
    _assert_at(text, bad_unpack.fn, "# <- three names")
    _, text = _error(bad_break, [F32P, gl.int32])  # Gluon 3.9 has no break/continue either
    assert "break is not supported" in text
    _assert_at(text, bad_break.fn, "# <- break")


GLOBAL_CONFIG = Config(64, STAGES=3)


@gluonkit.jit
def config_kernel(x_ptr, out_ptr, cfg: gl.constexpr):
    offs = gl.arange(0, cfg.BLOCK, gl.BlockedLayout([1], [32], [2], [0]))
    gl.store(out_ptr + offs, gl.load(x_ptr + offs) * cfg.STAGES + GLOBAL_CONFIG.STAGES)


def test_compile_time_aggregates_as_kernel_arguments_and_globals(rng):
    x = rng.standard_normal(64).astype(np.float32)
    out = np.zeros_like(x)
    config_kernel[(1,)](x, out, Config(64), num_warps=2)
    np.testing.assert_allclose(out, x * 2 + 3, rtol=1e-6)
    config_kernel[(1,)](x, out, Config(64), num_warps=2)
    assert len(config_kernel.cache) == 1  # equal aggregates share one compiled kernel
    config_kernel[(1,)](x, out, gl.aggregate_replace(Config(64), STAGES=5), num_warps=2)
    np.testing.assert_allclose(out, x * 5 + 3, rtol=1e-6)
    assert len(config_kernel.cache) == 2


# ------------------------------------------------------------------ tuple kernel arguments
@gluonkit.jit
def tuple_args_kernel(ptrs, out_ptr, scales, n):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, 128, L)
    acc = gl.zeros([128], gl.float32, L)
    for i in gl.static_range(len(ptrs)):
        acc += gl.load(ptrs[i] + offs) * scales[i]
    gl.store(out_ptr + offs, acc + scales[2] * n)


def test_tuple_kernel_arguments(rng):
    x, y = (rng.standard_normal(128).astype(np.float32) for _ in range(2))
    out = np.zeros_like(x)
    tuple_args_kernel[(1,)]((x, y), out, (2.0, 3, gl.constexpr(4)), 5)
    np.testing.assert_allclose(out, 2 * x.astype(np.float64) + 3 * y + 20, rtol=1e-5)
    tuple_args_kernel[(1,)]((x, y), out, (0.5, -1, gl.constexpr(2)), 5)  # another compile-time element
    np.testing.assert_allclose(out, 0.5 * x.astype(np.float64) - y + 10, rtol=1e-5)
    func = tuple_args_kernel.build_ir([(F32P, F32P), F32P, (gl.float32, gl.int32, gl.constexpr(4)), gl.int32])
    assert func.arg_names == ["ptrs_0", "ptrs_1", "out_ptr", "scales_0", "scales_1", "n"]


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_tuple_arguments_compile(target):
    compiled = tuple_args_kernel.compile(("*fp32:16", "*fp32:16"), "*fp32:16", ("fp32", "i32", gl.constexpr(4)),
                                         "i32", target=target)
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert compiled.asm["ir"].count("multiple_of = [16]") == 3  # the tuple's pointers keep their alignment


def test_tuple_arguments_pack_for_the_gpu_element_by_element():
    """The GPU launcher's view of tuple arguments, checked without a GPU: the cache
    signature keeps compile-time elements by value, and the packer sees the runtime leaves."""
    from gluonkit.runtime import gpu
    from gluonkit.runtime.args import ArgPacker
    sig = gpu.signature_of((2.0, 16, gl.constexpr(4)))
    assert sig == (tuple, (float,), (int, 32, True), ("constexpr", 4))
    assert sig != gpu.signature_of((2.0, 16, gl.constexpr(5)))
    ty, divisible = gpu._runtime_key("scales", (2.0, 16, gl.constexpr(4)))
    assert ty == (gl.float32, gl.int32, gl.constexpr(4)) and not divisible
    leaves = gpu._tuple_leaves("scales", ((gl.float32, gl.int32), gl.constexpr(4), gl.int64))
    assert leaves == [("scales_0_0", gl.float32), ("scales_0_1", gl.int32), ("scales_2", gl.int64)]
    flat = gpu.flatten_tuple_args([((1.5, 7), gl.constexpr(4), None, 2**40), 3])
    assert flat == [1.5, 7, 2**40, 3]
    packed = ArgPacker([t for _, t in leaves] + [gl.int32], [n for n, _ in leaves] + ["n"]).pack(flat)
    import ctypes
    read = [ctypes.c_float, ctypes.c_int32, ctypes.c_int64, ctypes.c_int32]
    assert [c.from_address(p).value for c, p in zip(read, packed.params)] == flat


@gluonkit.jit
def bad_plain_shape(x_ptr):
    shape = (4, 32)
    x = gl.full(shape, 0.0, gl.float32)  # <- runtime shape


@gluonkit.aggregate
class Base:
    a: gl.tensor

    @gluonkit.jit
    def doubled(self):
        return self.a * 2


@gluonkit.aggregate
class Derived(Base):
    k: gl.constexpr


@gluonkit.jit
def inherit_kernel(x_ptr, out_ptr):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    d = Derived(gl.load(x_ptr + offs), 3)
    gl.store(out_ptr + offs, d.doubled() + d.k)


def test_plain_tuple_assignment_makes_runtime_scalars_as_in_gluon():
    _, text = _error(bad_plain_shape, [F32P])
    assert "write 'name: gl.constexpr = (...)' to keep the tuple compile-time" in text, text
    _assert_at(text, bad_plain_shape.fn, "# <- runtime shape")


def test_aggregates_inherit_fields_and_methods(rng):
    x = rng.standard_normal(128).astype(np.float32)
    out = np.zeros_like(x)
    inherit_kernel[(1,)](x, out)
    np.testing.assert_allclose(out, x.astype(np.float64) * 2 + 3, rtol=1e-6)
    assert Derived.__aggregate_fields__ == ("a", "k")


def test_a_grid_callable_sees_a_parameter_named_like_an_option(rng):
    seen = []
    x = rng.integers(-50, 50, 128).astype(np.int32)
    out = np.zeros_like(x)
    options_kernel[lambda meta: seen.append(meta) or (1,)](x, out, 8)
    assert seen[0]["num_warps"] == 8  # the bound argument, as Triton passes bound arguments
    np.testing.assert_array_equal(out, x + 80 + 4000 + 1)


@gluonkit.aggregate
class Checked:
    n: gl.constexpr

    def __init__(self, n):
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        self.n = n


@gluonkit.jit
def bad_plain_init(x_ptr, N: gl.constexpr):
    c = Checked(N)  # <- init raises
    gl.store(x_ptr, c.n)


def test_a_failing_plain_init_is_reported_at_the_construction(rng):
    _, text = _error(bad_plain_init, [F32P], {"N": -2})
    assert "Checked(...) failed at compile time: ValueError: n must be positive, got -2" in text, text
    _assert_at(text, bad_plain_init.fn, "# <- init raises")
    x = np.zeros(1, np.float32)
    bad_plain_init[(1,)](x, N=3)
    assert x[0] == 3


@gluonkit.jit
def first_index_above(x_ptr, limit, N: gl.constexpr):
    for i in gl.static_range(N):  # an early return inside an unrolled loop
        if gl.load(x_ptr + i) > limit:
            return i
    return -1


@gluonkit.jit
def search_kernel(x_ptr, out_ptr, limit, N: gl.constexpr):
    gl.store(out_ptr, first_index_above(x_ptr, limit, N))


def test_early_return_inside_an_unrolled_loop(rng):
    x = rng.integers(0, 100, 8).astype(np.int32)
    out = np.zeros(1, np.int32)
    for limit in (int(x.max()) - 1, int(np.median(x)), int(x.max()), -1):
        search_kernel[(1,)](x, out, limit, N=8)
        above = np.nonzero(x > limit)[0]
        assert out[0] == (above[0] if len(above) else -1)


def test_triton_autotune_protocol_drives_a_kernel():
    """``@triton.autotune`` over ``@gluonkit.jit`` calls ``fn.run(*args, grid=, warmup=False, **config)`` with
    the config's kwargs and its num_warps/num_ctas/num_stages: the kernel runs with them."""
    import importlib

    jit_module = importlib.import_module("gluonkit.lang.jit")  # the module (gluonkit.lang.jit is also @jit)
    set_launcher = jit_module.set_launcher

    seen = []
    previous = jit_module._launcher
    set_launcher(lambda kernel, grid, args, kwargs: seen.append((kernel, grid, args, kwargs)) or "launched")
    try:
        result = _protocol_kernel.run(1, 2, grid=(3,), warmup=False, BLOCK=64, num_warps=8, num_ctas=1, num_stages=3)
    finally:
        set_launcher(previous)
    assert result == "launched"
    assert seen == [(_protocol_kernel, (3,), (1, 2), {"BLOCK": 64, "num_warps": 8, "num_ctas": 1})]


def test_triton_protocol_warmup_goes_to_the_warmer():
    import importlib
    jit_module = importlib.import_module("gluonkit.lang.jit")
    seen = []
    previous = jit_module._warmer
    jit_module.set_warmer(lambda kernel, grid, args, kwargs: seen.append((kernel, grid, args, kwargs)) or "handle")
    try:
        result = _protocol_kernel.run(1, 2, grid=(1,), warmup=True, BLOCK=64)
    finally:
        jit_module.set_warmer(previous)
    assert result == "handle"
    assert seen == [(_protocol_kernel, (1,), (1, 2), {"BLOCK": 64})]


def test_triton_protocol_passes_maxnreg_to_the_launch():
    import importlib
    jit_module = importlib.import_module("gluonkit.lang.jit")
    seen = []
    previous = jit_module._launcher
    jit_module.set_launcher(lambda kernel, grid, args, kwargs: seen.append(kwargs))
    try:
        _protocol_kernel.run(1, 2, grid=(1,), warmup=False, BLOCK=64, maxnreg=128)
        _protocol_kernel.run(1, 2, grid=(1,), warmup=False, BLOCK=64, maxnreg=None)
    finally:
        jit_module.set_launcher(previous)
    assert seen == [{"BLOCK": 64, "maxnreg": 128}, {"BLOCK": 64}]


@gluonkit.jit
def _protocol_kernel(x, y, BLOCK: gl.constexpr):
    pass


def test_jit_takes_gluons_parameters():
    """``@gluonkit.jit`` accepts every parameter of Gluon 3.9's ``jit``; ``do_not_specialize`` and
    ``do_not_specialize_on_alignment`` both reach the launcher's list, ``debug`` the frontend."""
    def body(x_ptr, n):
        pass

    kernel = gluonkit.jit(body, version=1, repr=lambda spec: "k", launch_metadata=None, do_not_specialize=["n"],
                          do_not_specialize_on_alignment=[0], debug=True, noinline=False)
    assert kernel.options["do_not_specialize"] == ["n", 0] and kernel.options["debug"] is True
    assert gluonkit.jit(repr=str)(body).options["do_not_specialize"] == []
    with pytest.raises(TypeError):
        gluonkit.jit(body, num_stages=3)


# ------------------------------------------------------- @triton.jit helpers in kernels
class JITFunction:
    """Stands in for Triton's ``triton.runtime.jit.JITFunction`` (what ``@triton.jit`` makes):
    gluonkit recognises it by its class name and its Python function ``fn``."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        raise RuntimeError("a @triton.jit function is called from kernels only")


def _tile_of(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    return first_pid_m + (tile_id % group_size_m), (tile_id % num_pid_in_group) // group_size_m


tile_of = JITFunction(_tile_of)


@gluonkit.jit
def _grouped_tiles(out, num_pid_m, num_pid_n, GROUP_SIZE_M: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    t = gl.arange(0, 128, L)
    pid_m, pid_n = tile_of(t, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M)
    gl.store(out + t, pid_m * 1000 + pid_n)


def test_a_triton_jit_helper_is_inlined_like_a_jit_function():
    import numpy as np
    from interpreting import launch_interpreted
    out = np.zeros(128, np.int32)
    launch_interpreted(_grouped_tiles, (1,), out, 10, 13, 4)
    expected = []
    for t in range(128):
        group, first = t // (4 * 13), (t // (4 * 13)) * 4
        size = min(10 - first, 4)
        expected.append((first + t % size) * 1000 + (t % (4 * 13)) // size)
    np.testing.assert_array_equal(out, expected)


@gluonkit.jit
def _scalar_from_one_element(src, out, n):
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    packed = gl.load(src + gl.arange(0, 1, L)).reshape([])  # a scalar, as in Gluon
    total = packed * 0
    i = 0
    while i < n:  # a loop-carried scalar: the reshaped value must have the scalar's type
        total = total + ((packed >> 32) & 0xFFFFFFFF) + (packed & 0xFFFFFFFF)
        i += 1
    gl.store(out, total)


def test_reshape_to_no_dimensions_gives_a_scalar(rng):
    """Gluon returns a scalar for ``reshape([])`` of a one-element tensor (its multi-CTA
    examples unpack a tile id so, then carry it through a loop)."""
    from interpreting import launch_interpreted
    hi, lo = (int(v) for v in rng.integers(1, 2**31, 2))
    src, out = np.array([(hi << 32) | lo], np.int64), np.zeros(1, np.int64)
    launch_interpreted(_scalar_from_one_element, (1,), src, out, 3)
    assert out[0] == 3 * (hi + lo)


@needs_ptxas
def test_a_scalar_reshaped_from_one_element_compiles():
    compiled = _scalar_from_one_element.compile("*i64:16", "*i64:16", "i32", target="sm_90a")
    assert "st.global" in compiled.asm["ptx"] and "cubin" in compiled.asm
