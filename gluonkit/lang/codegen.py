"""AST -> IR: the code generator for one ``@jit`` function body (expressions, statements).

The generator walks the Python AST of a kernel (it never runs the kernel's Python code)
and builds IR through the semantic layer.  Values are :class:`~gluonkit.lang.tensor.tensor`
for runtime values and plain Python objects for compile-time ones (constexpr ints,
dtypes, layouts, tuples, ``None`` …); operators on compile-time values are folded.  As in
Triton, a plain assignment of a Python number (``i = 0``) makes a runtime ``int32`` scalar
while ``I: gl.constexpr = 0`` keeps it compile-time.  Calls to other ``@jit`` functions are
inlined by a nested generator; control flow (early returns included) lives in
:mod:`gluonkit.lang.control_flow`, and aggregates, constexpr functions and
``must_use_result`` in :mod:`gluonkit.lang.codegen_structs`.
"""

from __future__ import annotations

import ast
import builtins as _py
import inspect
import operator
import types
from typing import Any, Dict, Optional

from ..ir.diagnostics import Location
from ..ir.types import DType, PointerType
from ..layouts.distributed import DistributedLayout
from . import builtins as gl_builtins
from .callables import is_jit_function, triton_jit_function
from .constexpr import constexpr, unwrap
from .aggregate import is_aggregate
from .codegen_structs import NOT_HANDLED, StructsMixin
from .control_flow import ControlFlowMixin, contains_return
from .errors import (
    ArgumentError, CompilationError, ConstexprRequiredError, TypeMismatchError,
    UndefinedNameError, UnsupportedSyntaxError,
)
from .tensor import builtin, is_builtin, tensor
from .values import is_runtime

__all__ = ["CodeGenerator", "is_runtime"]


def _min_max(which: str, args, sem):
    """Python's ``min``/``max`` in a kernel: folded on compile-time values, else
    element-wise ``gl.minimum``/``gl.maximum``."""
    if not any(is_runtime(a) for a in args):
        return (_py.min if which == "minimum" else _py.max)(*args)
    if len(args) < 2:
        sem.error(f"{'min' if which == 'minimum' else 'max'}() of runtime values needs at least two "
                  "arguments (use gl.min/gl.max to reduce a tensor)", ArgumentError)
    result = args[0]
    for a in args[1:]:
        result = sem.minmax(which, result, a)
    return result


@builtin
def _py_min(*args, _semantic=None):
    return _min_max("minimum", args, _semantic)


@builtin
def _py_max(*args, _semantic=None):
    return _min_max("maximum", args, _semantic)


@builtin
def _print(*args, _semantic=None):
    """Python's ``print`` in a kernel: ``device_print`` with the leading strings as prefix."""
    i = 0
    while i < len(args) and isinstance(args[i], str):
        i += 1
    return gl_builtins.device_print(" ".join(args[:i]), *args[i:], _semantic=_semantic)


# Python builtins a kernel may use, and those that mean something else in a kernel.
_PY_BUILTINS: Dict[str, Any] = {n: getattr(_py, n) for n in (
    "range", "len", "int", "float", "bool", "isinstance", "tuple", "list", "zip", "enumerate",
    "str", "repr", "getattr", "hasattr", "all", "any", "type", "reversed", "divmod", "abs")}
_PY_BUILTINS.update({"print": _print, "min": _py_min, "max": _py_max})

# Python builtins that only inspect values, so they may take runtime ones, and those that
# rearrange containers, so they may take tuples (or aggregates) holding runtime ones.
_INSPECTING = (isinstance, getattr, hasattr, type)
_CONTAINER = (len, zip, enumerate, tuple, list, reversed)


def _python_may_take(fn, args) -> bool:
    """Whether the plain Python function ``fn`` may be called with these runtime arguments."""
    if any(fn is f for f in _INSPECTING):
        return True
    return any(fn is f for f in _CONTAINER) and not any(isinstance(a, tensor) for a in args)


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl",
           ast.RShift: "shr", ast.Pow: "pow"}
_PY_BINOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
              "floordiv": operator.floordiv, "mod": operator.mod, "and": operator.and_, "or": operator.or_,
              "xor": operator.xor, "shl": operator.lshift, "shr": operator.rshift, "pow": operator.pow}
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "and": "&",
            "or": "|", "xor": "^", "shl": "<<", "shr": ">>", "pow": "**"}
_CMPOPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_PY_CMPOPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
              "ge": operator.ge}


class CodeGenerator(ControlFlowMixin, StructsMixin, ast.NodeVisitor):
    """Generates the body of one ``@jit`` function into the semantic layer's builder.

    ``scope`` maps parameter names to their values; ``inlined_at`` is the call's location
    when this function is inlined into another; ``call_stack`` the functions being inlined.
    """

    def __init__(self, sem, fn, scope: Dict[str, Any], inlined_at: Optional[Location] = None,
                 call_stack: tuple = (), is_kernel: bool = False):
        self.sem = sem
        self.fn = fn
        self.scope: Dict[str, Any] = dict(scope)
        self.inlined_at = inlined_at
        self.call_stack = call_stack + (fn,)
        self.is_kernel = is_kernel
        self.runtime_regions: list = []  # enclosing runtime if/for/while, for error messages
        self.hidden: Dict[str, str] = {}  # names not visible here, and why
        self.returned = False
        self.return_value = None
        self.return_loc = None  # where the return statement that ended the function is
        self.unused_call = None  # the call node of the expression statement being visited

    # ----------------------------------------------------------------- driver
    def run(self):
        """Generate the function body; returns what it returns (None for kernels)."""
        saved = self.sem.call_jit
        self.sem.call_jit = lambda fn, args: self.call_jit(fn, args, {})
        try:
            self.visit_block(self.fn.parse().body)
        finally:
            self.sem.call_jit = saved
        return self.return_value

    def loc(self, node) -> Location:
        return self.fn.location(node.lineno, node.col_offset, self.inlined_at)

    def visit(self, node):
        if hasattr(node, "lineno"):
            with self.sem.builder.located(self.loc(node)):
                return super().visit(node)
        return super().visit(node)

    def error(self, message: str, cls=CompilationError):
        raise cls(message, self.sem.builder.loc)

    def generic_visit(self, node):
        what = type(node).__name__
        kind = "statements" if isinstance(node, ast.stmt) else "expressions"
        self.error(f"{what} {kind} are not supported in kernels", UnsupportedSyntaxError)

    def visit_block(self, stmts) -> None:
        for i, stmt in enumerate(stmts):
            if self.returned:
                break
            if isinstance(stmt, (ast.If, ast.For)) and contains_return(stmt):
                with self.sem.builder.located(self.loc(stmt)):
                    if self.visit_returning(stmt, stmts[i + 1:]):  # took the rest of the block with it
                        return
            self.visit(stmt)

    # ------------------------------------------------------------------ names
    def lookup(self, name: str):
        if name in self.scope:
            return self.scope[name]
        if name in self.hidden:
            self.error(f"name '{name}' is not defined here: {self.hidden[name]}", UndefinedNameError)
        closure = self.fn.closure_vars()
        if name in closure:
            return self.global_value(name, closure[name])
        if name in self.fn.globals:
            return self.global_value(name, self.fn.globals[name])
        if name in _PY_BUILTINS:
            return _PY_BUILTINS[name]
        if hasattr(_py, name):
            self.error(f"Python's built-in '{name}' is not supported in kernels", UnsupportedSyntaxError)
        self.error(f"name '{name}' is not defined", UndefinedNameError)

    def global_value(self, name: str, value):
        """A global (or closure variable) a kernel reads: it must not be able to change
        behind the compile cache's back, so plain numbers, strings and lists are refused."""
        if isinstance(value, constexpr):
            return value.value
        if value is None or isinstance(value, (types.ModuleType, type, DType, PointerType, DistributedLayout)) \
                or is_aggregate(value) \
                or callable(value) or type(value).__module__.startswith("gluonkit."):
            return value
        self.error(f"the kernel reads the global variable '{name}' = {value!r}, which is not a "
                   f"compile-time constant; wrap it as {name} = gl.constexpr({value!r}) so that the compiled-"
                   "kernel cache can rely on it", ConstexprRequiredError)

    def assign(self, target, value, node, sanitize: bool = True) -> None:
        """Bind ``target`` (a name or a tuple of targets) to ``value``; with ``sanitize``,
        Python numbers become runtime scalars (plain assignment), else they stay compile-time
        (unrolled loop variables)."""
        if isinstance(target, ast.Name):
            self.scope[target.id] = self.sanitize(value) if sanitize else value
            self.hidden.pop(target.id, None)
        elif isinstance(target, ast.Attribute):
            self.assign_attribute(target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, tensor) or not isinstance(value, (tuple, list)):
                self.error(f"cannot unpack {value!r} into {len(target.elts)} names: expected a tuple",
                           TypeMismatchError)
            if len(value) != len(target.elts):
                self.error(f"cannot unpack a tuple of {len(value)} values into {len(target.elts)} names",
                           ArgumentError)
            for t, v in zip(target.elts, value):
                self.assign(t, v, node, sanitize)
        else:
            self.error(f"assignment to {ast.unparse(target)} is not supported: tensors are immutable values "
                       "(assign a new name instead)", UnsupportedSyntaxError)

    def sanitize(self, value):
        """Python numbers assigned to names become runtime scalars, also inside tuples
        (Triton's rule)."""
        if isinstance(value, (bool, int, float)):
            return self.sem.to_tensor(value)
        if type(value) is tuple:
            return tuple(self.sanitize(v) for v in value)
        return value

    # ------------------------------------------------------------- statements
    def visit_Expr(self, node):
        if isinstance(node.value, ast.Call):
            self.unused_call = node.value  # a must_use_result callee refuses this call
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            self.visit(node.value)

    def visit_Pass(self, node):
        pass

    def visit_Assign(self, node):
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value, node)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            self.error(f"augmented assignment to {ast.unparse(node.target)} is not supported",
                       UnsupportedSyntaxError)
        value = self.binop(_BINOPS[type(node.op)], self.lookup(node.target.id), self.visit(node.value))
        self.assign(node.target, value, node)

    def visit_AnnAssign(self, node):
        annotation = self.visit(node.annotation)
        if not isinstance(node.target, ast.Name):
            self.error("annotated assignment needs a plain name", UnsupportedSyntaxError)
        if node.value is None:
            return
        value = self.visit(node.value)
        if annotation is constexpr:
            if is_runtime(value):
                self.error(f"'{node.target.id}' is annotated gl.constexpr but is assigned a runtime value "
                           f"({value!r}); expected a compile-time constant", ConstexprRequiredError)
            self.scope[node.target.id] = value
            self.hidden.pop(node.target.id, None)
        else:
            self.assign(node.target, value, node)

    def visit_Return(self, node):
        loops = [kind for kind in self.runtime_regions if kind.endswith("loop")]
        if loops:
            self.error(f"return inside a runtime {loops[-1]} is not supported (as in Gluon): assign the result to a "
                       f"variable and return it after the {loops[-1]}", UnsupportedSyntaxError)
        value = self.visit(node.value) if node.value is not None else None
        if self.is_kernel and value is not None:
            self.error(f"a kernel cannot return a value (got {value!r}); store results through pointers",
                       UnsupportedSyntaxError)
        self.return_value = value
        self.return_loc = self.sem.builder.loc
        self.returned = True

    def visit_Break(self, node):
        self.error("break is not supported in kernels; express the exit as a while-loop condition",
                   UnsupportedSyntaxError)

    def visit_Continue(self, node):
        self.error("continue is not supported in kernels; guard the rest of the body with an if",
                   UnsupportedSyntaxError)

    def visit_Assert(self, node):
        test = self.visit(node.test)
        if is_runtime(test):  # Gluon's rule: a runtime assert is gl.device_assert (debug mode only)
            msg = self.visit(node.msg) if node.msg is not None else ""
            self.sem.device_assert(test, msg, None)
            return
        if not test:
            msg = self.visit(node.msg) if node.msg is not None else ""
            self.error(f"assertion failed{': ' + str(msg) if msg else ''}")

    # ------------------------------------------------------------ expressions
    def visit_Constant(self, node):
        return node.value

    def visit_Name(self, node):
        return self.lookup(node.id)

    def visit_Tuple(self, node):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(self._starred(e))
            else:
                out.append(self.visit(e))
        return tuple(out)

    def visit_List(self, node):
        return list(self.visit_Tuple(node))

    def _starred(self, node):
        value = self.visit(node.value)
        if not isinstance(value, (tuple, list)):
            self.error(f"cannot unpack {value!r} with *: expected a tuple", TypeMismatchError)
        return value

    def visit_Attribute(self, node):
        base = self.visit(node.value)
        try:
            return self.bind_method(base, node.attr, unwrap(getattr(base, node.attr)))
        except AttributeError:
            if node.attr == "value" and not is_runtime(base) and not hasattr(base, "handle"):
                return base  # a compile-time value is a gl.constexpr in Gluon: its .value is the value itself
            what = f"a tensor of type {base.type}" if isinstance(base, tensor) else repr(base)
            self.error(f"{what} has no attribute '{node.attr}'", UndefinedNameError)

    def visit_Slice(self, node):
        parts = [self.visit(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
        if is_runtime(parts):
            self.error("slice bounds must be compile-time constants", ConstexprRequiredError)
        return slice(*parts)

    def visit_Subscript(self, node):
        base = self.visit(node.value)
        index = self.visit(node.slice)
        if isinstance(base, tensor):
            return self.sem.subscript(base, index)
        if is_runtime(index):
            self.error("an index into a tuple must be a compile-time constant", ConstexprRequiredError)
        try:
            return base[index]
        except (IndexError, KeyError, TypeError) as e:
            self.error(f"cannot index {base!r} with {index!r}: {e}", ArgumentError)

    def visit_JoinedStr(self, node):
        return "".join(str(self.visit(v)) for v in node.values)

    def visit_FormattedValue(self, node):
        value = self.visit(node.value)
        if is_runtime(value):
            self.error("f-strings can only format compile-time values; use gl.device_print for runtime values",
                       ConstexprRequiredError)
        spec = self.visit(node.format_spec) if node.format_spec is not None else ""
        return format(value, spec)

    def binop(self, op: str, lhs, rhs):
        if isinstance(lhs, (list, tuple)) or isinstance(rhs, (list, tuple)):
            return self._sequence_binop(op, lhs, rhs)
        if not is_runtime(lhs) and not is_runtime(rhs):
            try:
                return _PY_BINOPS[op](lhs, rhs)
            except Exception as e:  # noqa: BLE001 - any Python failure is the user's constant expression
                self.error(f"compile-time {lhs!r} {_SYMBOLS[op]} {rhs!r} failed: {e}", TypeMismatchError)
        if op == "pow":
            self.error("** is not supported on tensors; use gl.exp2(y * gl.log2(x)) or repeated *",
                       UnsupportedSyntaxError)
        if op in ("and", "or", "xor", "shl", "shr"):
            return self.sem.bitwise(op, lhs, rhs)
        return self.sem.arith(op, lhs, rhs)

    def _sequence_binop(self, op: str, lhs, rhs):
        """``+`` and ``*`` on tuples and lists, which Gluon treats as one kind of sequence (a list
        display is a tuple there): ``[2] + desc.block_type.shape`` is ``(2, 64, 64)``.  Their
        elements may be runtime values; the result is a list only when both operands are."""
        seq = (list, tuple)
        if op == "add" and isinstance(lhs, seq) and isinstance(rhs, seq):
            joined = list(lhs) + list(rhs)
            return joined if isinstance(lhs, list) and isinstance(rhs, list) else tuple(joined)
        count = rhs if isinstance(lhs, seq) else lhs
        if op == "mul" and isinstance(count, int) and not isinstance(count, bool):
            return lhs * rhs
        self.error(f"{lhs!r} {_SYMBOLS[op]} {rhs!r}: tuples and lists support only + (concatenation with "
                   "another tuple or list) and * by a compile-time integer", TypeMismatchError)

    def visit_BinOp(self, node):
        if type(node.op) not in _BINOPS:
            self.error(f"the operator {type(node.op).__name__} is not supported in kernels", UnsupportedSyntaxError)
        return self.binop(_BINOPS[type(node.op)], self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node):
        value = self.visit(node.operand)
        if not is_runtime(value):
            fold = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
                    ast.Not: operator.not_}[type(node.op)]
            try:
                return fold(value)
            except Exception as e:  # noqa: BLE001
                self.error(f"compile-time unary operator on {value!r} failed: {e}", TypeMismatchError)
        if isinstance(node.op, ast.Not):
            return self.sem.logical_not(value)
        if isinstance(node.op, ast.UAdd):
            return value
        return self.sem.unary("neg" if isinstance(node.op, ast.USub) else "not", value)

    def visit_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for operand in node.values[1:]:
            if not is_runtime(result):
                if bool(result) != is_and:
                    return result  # short circuit on a compile-time value
                result = self.visit(operand)
                continue
            result = self.sem.logical("and" if is_and else "or", result, self.visit(operand))
        return result

    def visit_Compare(self, node):
        if len(node.ops) != 1:
            self.error("chained comparisons such as a < b < c are not supported; write (a < b) & (b < c)",
                       UnsupportedSyntaxError)
        lhs, rhs = self.visit(node.left), self.visit(node.comparators[0])
        op = node.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)):
            return (lhs is rhs) == isinstance(op, ast.Is)
        if isinstance(op, (ast.In, ast.NotIn)):
            if is_runtime(lhs) or is_runtime(rhs):
                self.error("'in' needs compile-time operands", ConstexprRequiredError)
            return (lhs in rhs) == isinstance(op, ast.In)
        pred = _CMPOPS[type(op)]
        if isinstance(lhs, (list, tuple)) and isinstance(rhs, (list, tuple)) and pred in ("eq", "ne"):
            lhs, rhs = tuple(lhs), tuple(rhs)  # as in Gluon, [64, 64] == (64, 64)
        if not is_runtime(lhs) and not is_runtime(rhs):
            try:
                return _PY_CMPOPS[pred](lhs, rhs)
            except TypeError as e:
                self.error(f"compile-time comparison failed: {e}", TypeMismatchError)
        return self.sem.compare(pred, lhs, rhs)

    # ------------------------------------------------------------------ calls
    def visit_Call(self, node):
        fn = self.visit(node.func)
        args = []
        for a in node.args:
            args.extend(self._starred(a) if isinstance(a, ast.Starred) else [self.visit(a)])
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                self.error("**kwargs in calls is not supported in kernels", UnsupportedSyntaxError)
            kwargs[kw.arg] = self.visit(kw.value)
        if node is self.unused_call:
            self.check_result_used(fn, ast.unparse(node.func))
        return unwrap(self.call(fn, args, kwargs, ast.unparse(node.func)))

    def call(self, fn, args, kwargs, name: str):
        result = self.call_structured(fn, args, kwargs, name)
        if result is not NOT_HANDLED:
            return result
        if is_jit_function(fn):
            return self.call_jit(fn, args, kwargs)
        twin = triton_jit_function(fn, type(self.fn))  # (self.fn is a JITFunction: its class makes the twin)
        if twin is not None:
            return self.call_jit(twin, args, kwargs)
        if is_builtin(fn):
            try:
                inspect.signature(fn).bind(*args, _semantic=self.sem, **kwargs)
            except TypeError as e:
                self.error(f"{name}(): {e}", ArgumentError)
            return fn(*args, _semantic=self.sem, **kwargs)
        if fn is range:
            self.error("range() can only be the iterable of a for loop in kernels", UnsupportedSyntaxError)
        if fn is gl_builtins.static_range and is_runtime(args):
            self.error("static_range bounds must be compile-time constants (use range() for runtime bounds)",
                       ConstexprRequiredError)
        if not callable(fn):
            self.error(f"{name} ({fn!r}) is not callable", TypeMismatchError)
        if (is_runtime(args) or is_runtime(list(kwargs.values()))) and not _python_may_take(fn, args):
            self.error(f"{name}() is a Python function and cannot take runtime tensors; only gl builtins and "
                       "@jit functions can", TypeMismatchError)
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError, AssertionError, IndexError, KeyError) as e:
            self.error(f"{name}(...) failed: {e}", ArgumentError)

    def call_jit(self, fn, args, kwargs):
        """Inline a call to the ``@jit`` function ``fn``; returns its return value."""
        if fn in self.call_stack:
            self.error(f"recursive call to @jit function {fn.__name__} is not supported", UnsupportedSyntaxError)
        try:
            bound = fn.signature.bind(*args, **kwargs)
        except TypeError as e:
            self.error(f"{fn.__name__}(): {e}", ArgumentError)
        bound.apply_defaults()
        for name in fn.constexpr_names:
            if is_runtime(bound.arguments[name]):
                self.error(f"argument '{name}' of {fn.__name__} is gl.constexpr but a runtime value was passed",
                           ConstexprRequiredError)
        callee = CodeGenerator(self.sem, fn, {k: unwrap(v) for k, v in bound.arguments.items()},
                               inlined_at=self.sem.builder.loc, call_stack=self.call_stack)
        return callee.run()
