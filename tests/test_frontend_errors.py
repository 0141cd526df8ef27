"""Error catalogue: bad kernels, each rejected with a precise error at the right line.

Every case is a small kernel source.  The test writes it to a file, builds its IR and checks
the exception type, that the message names the offending line (file:line and the line's
text) and that it says what was expected.  The offending line is marked ``# <-`` in the
source; for errors inside an inlined ``@jit`` function the call line is marked ``# call``.
"""

from __future__ import annotations

import importlib.util
import itertools
import textwrap

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.lang import (
    ArgumentError, CompilationError, ConstexprRequiredError, LayoutMismatchError, ShapeMismatchError,
    TypeMismatchError, UndefinedNameError, UnsupportedSyntaxError,
)

PRELUDE = "import gluonkit\nimport gluonkit.language as gl\nLIMIT = 7\n\n"
_counter = itertools.count()
F32P = gl.pointer_type(gl.float32)

# (id, kernel source, runtime argument types, constexprs, exception type, message fragment)
CASES = [
    ("break", """
        @gluonkit.jit
        def kernel(n):
            for i in range(n):
                break  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "break is not supported"),
    ("continue", """
        @gluonkit.jit
        def kernel(n):
            i = 0
            while i < n:
                i += 1
                continue  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "continue is not supported"),
    ("return_in_runtime_loop", """
        @gluonkit.jit
        def kernel(n):
            for i in range(n):
                if i > 2:
                    return  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "return inside a runtime for loop is not supported"),
    ("kernel_returns_value", """
        @gluonkit.jit
        def kernel(n):
            return n + 1  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "a kernel cannot return a value"),
    ("arange_not_pow2", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 100)  # <-
        """, [gl.int32], {}, ShapeMismatchError, "positive power of two, got 100 - 0 = 100"),
    ("arange_runtime_bound", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, n)  # <-
        """, [gl.int32], {}, ConstexprRequiredError, "arange end must be a compile-time constant"),
    ("undefined_name", """
        @gluonkit.jit
        def kernel(n):
            x = n + undefined_thing  # <-
        """, [gl.int32], {}, UndefinedNameError, "name 'undefined_thing' is not defined"),
    ("name_from_one_branch", """
        @gluonkit.jit
        def kernel(n):
            if n > 0:
                y = n
            z = y + 1  # <-
        """, [gl.int32], {}, UndefinedNameError, "assigned only in the then branch"),
    ("loop_carried_type_change", """
        @gluonkit.jit
        def kernel(n):
            acc = 0
            for i in range(n):  # <-
                acc = acc + 1.5
        """, [gl.int32], {}, TypeMismatchError, "'acc' has type int32 before the for loop and float32"),
    ("if_branch_types_differ", """
        @gluonkit.jit
        def kernel(n):
            if n > 0:  # <-
                x = 1
            else:
                x = 1.0
        """, [gl.int32], {}, TypeMismatchError, "'x' has type int32 in the then branch and float32"),
    ("shape_mismatch", """
        @gluonkit.jit
        def kernel(n):
            a = gl.arange(0, 16)
            b = gl.arange(0, 32)
            c = a + b  # <-
        """, [gl.int32], {}, ShapeMismatchError, "dimension 0 has sizes [16, 32]"),
    ("rank_mismatch", """
        @gluonkit.jit
        def kernel(n):
            a = gl.arange(0, 16)
            b = gl.zeros([16, 16], gl.int32)
            c = a + b  # <-
        """, [gl.int32], {}, ShapeMismatchError, "ranks differ (use expand_dims"),
    ("layout_mismatch", """
        @gluonkit.jit
        def kernel(n):
            a = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
            b = gl.arange(0, 128, gl.BlockedLayout([2], [32], [4], [0]))
            c = a + b  # <-
        """, [gl.int32], {}, LayoutMismatchError, "insert gl.convert_layout"),
    ("exp_of_fp16", """
        @gluonkit.jit
        def kernel(p):
            x = gl.load(p + gl.arange(0, 32))
            y = gl.exp(x)  # <-
        """, [gl.pointer_type(gl.float16)], {}, TypeMismatchError, "exp expects a float32 or float64 operand, got float16"),
    ("bitwise_float", """
        @gluonkit.jit
        def kernel(p):
            x = gl.load(p)
            y = x & 1  # <-
        """, [F32P], {}, TypeMismatchError, "& needs integer operands, got float32"),
    ("floordiv_float", """
        @gluonkit.jit
        def kernel(p):
            x = gl.load(p)
            y = x // 2.0  # <-
        """, [F32P], {}, TypeMismatchError, "// needs integer operands"),
    ("load_non_pointer", """
        @gluonkit.jit
        def kernel(n):
            x = gl.load(n)  # <-
        """, [gl.int32], {}, TypeMismatchError, "load needs a pointer or tensor of pointers, got int32"),
    ("mask_not_bool", """
        @gluonkit.jit
        def kernel(p):
            offs = gl.arange(0, 32)
            x = gl.load(p + offs, mask=offs)  # <-
        """, [F32P], {}, TypeMismatchError, "must be boolean (int1), got int32"),
    ("chained_compare", """
        @gluonkit.jit
        def kernel(n):
            c = 0 < n < 10  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "chained comparisons"),
    ("non_constexpr_global", """
        @gluonkit.jit
        def kernel(n):
            x = n + LIMIT  # <-
        """, [gl.int32], {}, ConstexprRequiredError, "LIMIT = gl.constexpr(7)"),
    ("constexpr_param_given_runtime", """
        @gluonkit.jit
        def scale(x, S: gl.constexpr):
            return x * S

        @gluonkit.jit
        def kernel(n):
            y = scale(n, n)  # <-
        """, [gl.int32], {}, ConstexprRequiredError, "argument 'S' of scale is gl.constexpr"),
    ("builtin_missing_argument", """
        @gluonkit.jit
        def kernel(n):
            pid = gl.program_id()  # <-
        """, [gl.int32], {}, ArgumentError, "missing a required argument: 'axis'"),
    ("program_id_axis", """
        @gluonkit.jit
        def kernel(n):
            pid = gl.program_id(3)  # <-
        """, [gl.int32], {}, ArgumentError, "axis must be 0, 1 or 2, got 3"),
    ("tensor_condition", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 16)
            if x > 3:  # <-
                n = n + 1
        """, [gl.int32], {}, TypeMismatchError, "use gl.where"),
    ("subscript_assignment", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 16)
            x[0] = 1  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "tensors are immutable"),
    ("negative_literal_unsigned", """
        @gluonkit.jit
        def kernel(u):
            y = u + -1  # <-
        """, [gl.uint32], {}, TypeMismatchError, "negative constant -1"),
    ("literal_does_not_fit", """
        @gluonkit.jit
        def kernel(p):
            x = gl.load(p)
            y = x + 300  # <-
        """, [gl.pointer_type(gl.int8)], {}, TypeMismatchError, "the constant 300 does not fit in int8"),
    ("expand_dims_needs_slice", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
            y = x[:, None]  # <-
        """, [gl.int32], {}, LayoutMismatchError, "needs an operand in SliceLayout(1, parent)"),
    ("static_assert", """
        @gluonkit.jit
        def kernel(n, B: gl.constexpr):
            gl.static_assert(B % 32 == 0, "B must be a multiple of 32")  # <-
        """, [gl.int32], {"B": 48}, CompilationError, "static_assert failed: B must be a multiple of 32"),
    ("with_statement", """
        @gluonkit.jit
        def kernel(n):
            with open("x") as f:  # <-
                pass
        """, [gl.int32], {}, UnsupportedSyntaxError, "With statements are not supported"),
    ("constexpr_local_runtime", """
        @gluonkit.jit
        def kernel(n):
            X: gl.constexpr = n * 2  # <-
        """, [gl.int32], {}, ConstexprRequiredError, "'X' is annotated gl.constexpr but is assigned a runtime value"),
    ("pow_on_tensor", """
        @gluonkit.jit
        def kernel(p):
            x = gl.load(p)
            y = x ** 2  # <-
        """, [F32P], {}, UnsupportedSyntaxError, "** is not supported on tensors"),
    ("lambda", """
        @gluonkit.jit
        def kernel(n):
            f = lambda v: v  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "Lambda expressions are not supported"),
    ("set_auto_layout_on_concrete", """
        @gluonkit.jit
        def kernel(n):
            L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
            x = gl.arange(0, 128, L)
            y = gl.set_auto_layout(x, L)  # <-
        """, [gl.int32], {}, LayoutMismatchError, "set_auto_layout needs an operand with AutoLayout"),
    ("store_shape", """
        @gluonkit.jit
        def kernel(p):
            offs = gl.arange(0, 32)
            gl.store(p + offs, gl.zeros([64], gl.float32))  # <-
        """, [F32P], {}, ShapeMismatchError, "does not broadcast to the pointer shape [32]"),
    ("reduce_axis", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 32)
            s = gl.sum(x, axis=1)  # <-
        """, [gl.int32], {}, ArgumentError, "axis 1 is out of range for rank 1"),
    ("reshape_numel", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 32)
            y = x.reshape(4, 4)  # <-
        """, [gl.int32], {}, ShapeMismatchError, "cannot reshape [32] (32 elements) to [4, 4] (16 elements)"),
    ("unsupported_python_builtin", """
        @gluonkit.jit
        def kernel(n):
            x = sorted((3, 1))  # <-
        """, [gl.int32], {}, UnsupportedSyntaxError, "Python's built-in 'sorted' is not supported"),
    ("tensor_into_python_function", """
        @gluonkit.jit
        def kernel(n):
            x = len(n)  # <-
        """, [gl.int32], {}, TypeMismatchError, "len() is a Python function and cannot take runtime tensors"),
    ("constexpr_reassigned_in_loop", """
        @gluonkit.jit
        def kernel(n, B: gl.constexpr):
            for i in range(n):  # <-
                B = B + 1
        """, [gl.int32], {"B": 4}, TypeMismatchError, "the compile-time value 'B' = 4 is reassigned inside a runtime for loop"),
    ("descriptor_carried_through_loop", """
        @gluonkit.jit
        def kernel(n):
            bufs = gl.allocate_shared_memory(gl.float32, [2, 32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
            view = bufs.index(0)
            for i in range(n):  # <-
                view.store(gl.zeros([32], gl.float32, gl.BlockedLayout([1], [32], [4], [0])))
                view = bufs.index(1)
        """, [gl.int32], {}, TypeMismatchError, "the shared memory descriptor 'view' is reassigned inside a runtime for loop"),
    ("descriptor_of_the_last_iteration", """
        @gluonkit.jit
        def kernel(n):
            bufs = gl.allocate_shared_memory(gl.float32, [2, 32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
            view = bufs.index(0)
            for i in range(n):
                view = bufs.index(i % 2)
                view.store(gl.zeros([32], gl.float32, gl.BlockedLayout([1], [32], [4], [0])))
            x = view.load(gl.BlockedLayout([1], [32], [4], [0]))  # <-
        """, [gl.int32], {}, UndefinedNameError, "its value after the for loop is not supported yet"),
    ("bad_layout_parameters", """
        @gluonkit.jit
        def kernel(n):
            x = gl.arange(0, 32, gl.BlockedLayout([1, 1], [32, 1], [4, 1], [1, 0]))  # <-
        """, [gl.int32], {}, LayoutMismatchError, "cannot lay out a tensor of shape [32]"),
    ("wrong_runtime_arg_count", """
        @gluonkit.jit
        def kernel(a, b):  # <-
            c = a + b
        """, [gl.int32], {}, ArgumentError, "kernel takes 2 runtime argument(s) ['a', 'b'], got 1 type(s)"),
]


def _load(src: str, tmp_path):
    path = tmp_path / f"bad_kernel_{next(_counter)}.py"
    text = PRELUDE + textwrap.dedent(src).lstrip("\n")
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path, text.splitlines()


def _line_of(lines, marker: str) -> int:
    return next(i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(marker))


def test_catalogue_is_large_enough():
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_program(case, tmp_path):
    _, src, arg_types, constexprs, exc_type, fragment = case
    module, path, lines = _load(src, tmp_path)
    with pytest.raises(CompilationError) as info:
        module.kernel.build_ir(arg_types, constexprs, 4, {})
    err = info.value
    assert type(err) is exc_type, f"expected {exc_type.__name__}, got {type(err).__name__}: {err}"
    line = _line_of(lines, "# <-")
    text = str(err)
    assert f"{path}:{line}:" in text, text
    assert lines[line - 1].strip() in text, text  # the excerpt shows the offending line
    assert err.loc.line == line
    assert fragment in err.message, err.message


def test_error_in_inlined_function_shows_the_call_chain(tmp_path):
    module, path, lines = _load("""
        @gluonkit.jit
        def inner(x):
            return gl.exp(x)  # <-

        @gluonkit.jit
        def kernel(n):
            y = inner(n)  # call
        """, tmp_path)
    with pytest.raises(TypeMismatchError) as info:
        module.kernel.build_ir([gl.int32], {}, 4, {})
    text = str(info.value)
    bad, call = _line_of(lines, "# <-"), _line_of(lines, "# call")
    assert f"{path}:{bad}:" in text and f"inlined from {path}:{call}:" in text, text
    assert "y = inner(n)" in text and "got int32" in text
    assert info.value.loc.inlined_at.line == call


def test_caret_points_at_the_column(tmp_path):
    module, path, lines = _load("""
        @gluonkit.jit
        def kernel(p):
            y = 1 + gl.load(p) // 2.0  # <-
        """, tmp_path)
    with pytest.raises(TypeMismatchError) as info:
        module.kernel.build_ir([F32P], {}, 4, {})
    excerpt_line, caret_line = str(info.value).splitlines()[1:3]
    assert excerpt_line.strip() == "y = 1 + gl.load(p) // 2.0  # <-"
    # The caret sits under the start of the failing sub-expression `gl.load(p) // 2.0`.
    assert excerpt_line.index("gl.load") == caret_line.index("^")


def test_calling_a_kernel_from_python_is_an_error():
    @gluonkit.jit
    def kernel(n):
        pass

    with pytest.raises(RuntimeError, match=r"launch it as kernel\[grid\]"):
        kernel(1)
    with pytest.raises(RuntimeError, match="only be used inside a @gluonkit.jit function"):
        gl.program_id(0)


def test_convert_layout_assert_trivial_rejects_data_movement():
    rows = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    cols = gl.BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1])

    @gluonkit.jit
    def k(p, A: gl.constexpr, B: gl.constexpr):
        x = gl.full([32, 32], 1.0, gl.float32, A)
        y = gl.convert_layout(x, B, assert_trivial=True)
        gl.store(p + gl.arange(0, 32, gl.SliceLayout(1, B))[:, None] * 32 + gl.arange(0, 32, gl.SliceLayout(0, B))[None, :], y)

    with pytest.raises(gluonkit.CompilationError, match="is not trivial") as info:
        k.build_ir([gluonkit.ir.PointerType(gluonkit.ir.float32)], dict(A=rows, B=cols))
    assert "assert_trivial=True" in str(info.value)
    # The same layout both ways is trivial.
    k.build_ir([gluonkit.ir.PointerType(gluonkit.ir.float32)], dict(A=rows, B=rows))


@gluonkit.jit
def _view_per_iteration(out, n):
    """Each iteration rebinds ``view`` before using it (as Gluon's tutorials do): nothing is carried."""
    L: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    bufs = gl.allocate_shared_memory(gl.int32, [2, 128], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    view = bufs.index(0)
    view.store(gl.zeros([128], gl.int32, L))
    bufs.index(1).store(gl.zeros([128], gl.int32, L))
    offs = gl.arange(0, 128, L)
    for i in range(n):
        view = bufs.index(i % 2)
        view.store(view.load(L) + offs * (i + 1))
    gl.store(out + offs, bufs.index(0).load(L))
    gl.store(out + 128 + offs, bufs.index(1).load(L))


def test_a_view_rebound_before_use_in_each_iteration_needs_no_carrying():
    import numpy as np
    from interpreting import launch_interpreted
    out = np.zeros(256, np.int32)
    launch_interpreted(_view_per_iteration, (1,), out, 5)
    np.testing.assert_array_equal(out[:128], np.arange(128) * (1 + 3 + 5))
    np.testing.assert_array_equal(out[128:], np.arange(128) * (2 + 4))
