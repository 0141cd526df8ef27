"""Control flow in the code generator: ``if``, ``for``, ``while`` and ``a if c else b``.

* A condition that is a compile-time value folds: only the taken branch is generated.
* A runtime condition must be a scalar; it becomes an ``if`` op whose regions yield the
  variables assigned in either branch (that exist after it).  A name assigned in only
  one branch and not before is not visible after the ``if``.
* ``for i in range(a, b, c)`` becomes a ``for`` op even with constant bounds (as in Triton);
  variables assigned in the body that hold runtime values before the loop are carried (block
  arguments and yields) and must keep their type.  A compile-time negative step iterates in
  reverse.
* Tuples and aggregates flow through branches and loops like single values: their runtime
  tensors are yielded or carried (:mod:`gluonkit.lang.values` flattens them) and their
  compile-time parts must be the same on every path.
  ``gl.static_range`` and iteration over a compile-time tuple unroll the body.
* ``while cond:`` becomes a ``while`` op; the condition is evaluated in its ``before``
  region over the carried variables.
"""

from __future__ import annotations

import ast
from typing import Dict, List

from ..ir import Block
from ..ir.types import TensorType
from ..ir import layouts_match
from .builtins import static_range
from .errors import TypeMismatchError, UnsupportedSyntaxError
from .promotion import integer_promote
from .shared_memory import shared_memory_descriptor
from .tensor import tensor
from .values import flatten, is_runtime, structure_mismatch, unflatten

__all__ = ["ControlFlowMixin", "assigned_names", "contains_return"]


def assigned_names(stmts) -> List[str]:
    """Names stored to anywhere in ``stmts``, in order of first appearance."""
    names: Dict[str, None] = {}
    for stmt in stmts:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.setdefault(node.id, None)
    return list(names)


def assigned_before_read(stmts, name: str) -> bool:
    """Whether the first top-level statement of ``stmts`` that mentions ``name`` is a plain
    assignment to it whose right-hand side does not read it (so no value flows in from before).
    Conservative: a first mention inside a nested statement counts as a read."""
    for stmt in stmts:
        mentioned = [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name]
        if not mentioned:
            continue
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
            return False
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        reads = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(stmt.value))
        return not reads and any(isinstance(t, ast.Name) and t.id == name for t in targets)
    return False


class StaticBind(ast.stmt):
    """A synthetic statement binding an unrolled loop's target to one compile-time value."""

    _fields = ("target",)

    def __init__(self, target, value):
        super().__init__(target=target)
        self.value = value


def contains_return(node) -> bool:
    """Whether a ``return`` statement occurs anywhere inside ``node``."""
    return any(isinstance(n, ast.Return) for n in ast.walk(node))


def _same_type(a, b) -> bool:
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.shape == b.shape and a.element == b.element and layouts_match(a.layout, b.layout, a.shape)
    return a == b


def _leaf_names(names, counts) -> List[str]:
    """Block-argument names for the leaves of carried variables (see ``_name_results``)."""
    return [name if n == 1 else f"{name}.{i}" for name, n in zip(names, counts) for i in range(n)]


class ControlFlowMixin:
    """``visit_If``/``visit_For``/``visit_While``/``visit_IfExp`` for the code generator."""

    # --------------------------------------------------------------- helpers
    def _condition(self, test, what: str) -> tensor:
        if test.is_block():
            self.error(f"the condition of a runtime {what} must be a scalar, got a tensor of shape "
                       f"{list(test.shape)}; use gl.where for element-wise choices", TypeMismatchError)
        return self.sem.to_bool(test, f"the condition of {what}")

    def _region(self, block: Block, kind: str, body):
        """Generate ``body()`` into ``block`` with a copy of the scope; returns that scope."""
        saved_scope, saved_hidden = self.scope, self.hidden
        self.scope, self.hidden = dict(saved_scope), dict(saved_hidden)
        self.runtime_regions.append(kind)
        try:
            with self.sem.builder.at_end_of(block):
                body()
            return self.scope
        finally:
            self.runtime_regions.pop()
            self.scope, self.hidden = saved_scope, saved_hidden

    def _check_carried(self, name: str, before, after, where: str) -> List[tensor]:
        """The runtime leaves of ``after``, the value of loop-carried ``name`` at the end of the
        body, after checking that it has the structure and types of ``before``."""
        if isinstance(before, tensor) and isinstance(after, tensor):
            if not _same_type(before.type, after.type):
                raise TypeMismatchError(
                    f"'{name}' has type {before.type} before the {where} and {after.type} after its body; "
                    "loop-carried variables must keep their type (convert explicitly, e.g. with .to(...) or "
                    "set_auto_layout)", self.sem.builder.loc,
                    notes=[(f"the new value of '{name}' is computed here", after.handle.loc)])
            return [after]
        if isinstance(before, tensor) and not is_runtime(after):
            self.error(f"'{name}' is a runtime value before the {where} but the compile-time value {after!r} "
                       "after it; a variable must keep its kind", TypeMismatchError)
        (_, s_before), (leaves, s_after) = flatten(before), flatten(after)
        problem = structure_mismatch(s_before, s_after)
        if problem:
            self.error(f"'{name}' changes inside the {where}: before it and after its body it holds {problem}; "
                       "loop-carried tuples and aggregates must keep their compile-time parts and the types of "
                       "their tensors", TypeMismatchError)
        return leaves

    def _carried(self, body) -> List[str]:
        """Names assigned in ``body`` that hold (or contain) runtime values before the loop."""
        return [n for n in assigned_names(body) if is_runtime(self.scope.get(n))]

    def _carried_values(self, carried) -> tuple:
        """``(structures, initial leaves)`` of the carried names' current values."""
        structures, leaves = [], []
        for name in carried:
            flat, structure = flatten(self.scope[name])
            structures.append(structure)
            leaves.append(flat)
        return structures, leaves

    @staticmethod
    def _name_results(results, names_and_counts) -> None:
        """Name IR results after the variables they hold (``acc``, or ``acc.0``, ``acc.1`` … for
        the tensors of a tuple or aggregate)."""
        it = iter(results)
        for name, n in names_and_counts:
            for i in range(n):
                next(it).name_hint = name if n == 1 else f"{name}.{i}"

    @staticmethod
    def _bind_leaves(scope, carried, structures, leaf_counts, values) -> None:
        """Set each carried name in ``scope`` to its structure filled with the next leaves of ``values``."""
        it = iter(values)
        for name, structure, n in zip(carried, structures, leaf_counts):
            scope[name] = unflatten(structure, [tensor(next(it)) for _ in range(n)])

    def _check_constants_unchanged(self, before: dict, after: dict, kind: str, body=(), line: int = 0) -> None:
        for name, value in after.items():
            if name in before and not is_runtime(before[name]) and after[name] is not before[name]:
                if isinstance(before[name], shared_memory_descriptor) and assigned_before_read(body, name):
                    # Each iteration makes its own view before using it: nothing is carried.  Its
                    # last value would be a loop result, which descriptors cannot be yet.
                    self.hidden[name] = (f"the shared memory descriptor '{name}' is reassigned inside the runtime "
                                         f"{kind} at line {line}; its value after the {kind} is not supported yet: "
                                         f"compute the view again after the {kind}")
                    self.scope.pop(name, None)
                    continue
                if isinstance(before[name], shared_memory_descriptor):
                    self.error(f"the shared memory descriptor '{name}' is reassigned inside a runtime {kind}; "
                               "descriptors cannot be carried through loops or branches yet: compute the view "
                               f"(e.g. bufs.index(i)) under a new name inside the {kind}", TypeMismatchError)
                if is_runtime(value) or structure_mismatch(flatten(before[name])[1], flatten(value)[1]):
                    self.error(f"the compile-time value '{name}' = {before[name]!r} is reassigned inside a runtime "
                               f"{kind}; assign a runtime value (a plain number, not a gl.constexpr) before the "
                               f"{kind} to make it a loop variable", TypeMismatchError)

    # -------------------------------------------------------------------- if
    def visit_If(self, node):
        test = self.visit(node.test)
        if not isinstance(test, tensor):
            self.visit_block(node.body if test else node.orelse)
            return
        cond = self._condition(test, "if")
        then_block, else_block = Block(), Block()
        then_scope = self._region(then_block, "if", lambda: self.visit_block(node.body))
        else_scope = self._region(else_block, "if", lambda: self.visit_block(node.orelse))
        names, then_vals, else_vals = [], [], []
        for name in assigned_names(node.body + node.orelse):
            t, e = then_scope.get(name), else_scope.get(name)
            if name not in then_scope or name not in else_scope:
                branch = "then" if name in then_scope else "else"
                self.hidden[name] = f"it is assigned only in the {branch} branch of the if at line {node.lineno}"
                self.scope.pop(name, None)
                continue
            (t_leaves, t_struct), (e_leaves, e_struct) = flatten(t), flatten(e)
            problem = structure_mismatch(t_struct, e_struct)
            if not t_leaves and not e_leaves:
                if problem:
                    self.error(f"'{name}' gets different compile-time values in the two branches of a runtime if "
                               f"({t!r} and {e!r})", TypeMismatchError)
                self.scope[name] = t
                continue
            if problem:
                if isinstance(t, tensor) or isinstance(e, tensor):
                    show = lambda v: v.type if isinstance(v, tensor) else repr(v)  # noqa: E731
                    problem = f"type {show(t)} in the then branch and {show(e)} in the else branch"
                else:
                    problem = f"{problem} in its two branches"
                self.error(f"'{name}' has {problem} of a runtime if; both branches must give it one type",
                           TypeMismatchError)
            names.append((name, t_struct, len(t_leaves)))
            then_vals += t_leaves
            else_vals += e_leaves
        for block, vals in ((then_block, then_vals), (else_block, else_vals)):
            with self.sem.builder.at_end_of(block):
                self.sem.create("yield", vals, [])
        op = self.sem.create("if", [cond], [v.type for v in then_vals], regions=[then_block, else_block])
        self._name_results(op.results, [(n, c) for n, _, c in names])
        self._bind_leaves(self.scope, [n for n, _, _ in names], [s for _, s, _ in names], [c for _, _, c in names],
                          op.results)

    def visit_returning(self, node, rest) -> bool:
        """A statement with a ``return`` inside, followed by ``rest``; True when it was
        generated together with ``rest``, False when it must be visited on its own (a runtime
        ``for`` loop, whose ``return`` is then refused)."""
        if isinstance(node, ast.If):
            self.visit_returning_if(node, rest)
            return True
        it = node.iter
        if isinstance(it, ast.Call) and self.visit(it.func) is range:
            return False
        # An unrolled loop: its copies and ``rest`` form one continuation, so a runtime
        # ``if`` with a ``return`` inside any copy sees everything that follows it.
        if node.orelse:
            self.error("for ... else is not supported in kernels", UnsupportedSyntaxError)
        stmts = []
        for value in self._static_values(self.visit(it)):
            stmts.append(ast.copy_location(StaticBind(node.target, value), node))
            stmts += node.body
        self.visit_block(stmts + list(rest))
        return True

    def visit_StaticBind(self, node) -> None:
        self.assign(node.target, node.value, node, sanitize=False)

    def _static_values(self, iterable):
        """The values an unrolled ``for`` loop over ``iterable`` takes."""
        if isinstance(iterable, static_range):
            return iterable.range
        if isinstance(iterable, (tuple, list)):
            return iterable
        self.error(f"kernels can loop over range(...), gl.static_range(...) or a compile-time tuple, "
                   f"got {iterable!r}", UnsupportedSyntaxError)

    def visit_returning_if(self, node, rest) -> None:
        """An ``if`` with a ``return`` inside, followed by the statements ``rest`` of its block.

        A compile-time condition picks a branch, which continues with ``rest``.  A runtime
        condition becomes an ``if`` op whose two regions each run their branch followed by
        ``rest`` (every path then ends in a return, explicit or by falling off the end); the
        regions yield the two return values, which must agree like the two values of a
        variable assigned in both branches.  The function has returned after the op.
        """
        test = self.visit(node.test)
        if not isinstance(test, tensor):
            self.visit_block((node.body if test else node.orelse) + list(rest))
            return
        loops = [kind for kind in self.runtime_regions if kind.endswith("loop")]
        if loops:
            first = next(n for n in ast.walk(node) if isinstance(n, ast.Return))
            raise UnsupportedSyntaxError(
                f"return inside a runtime {loops[-1]} is not supported (as in Gluon; here inside a runtime if): "
                f"assign the result to a variable and return it after the {loops[-1]}", self.loc(first))
        cond = self._condition(test, "if")
        blocks, returned = [Block(), Block()], []

        def branch(stmts):
            self.returned, self.return_value, self.return_loc = False, None, None
            self.visit_block(stmts)
            returned.append((self.return_value, self.return_loc if self.returned else None))

        for block, stmts in zip(blocks, (node.body, node.orelse)):
            self._region(block, "if", lambda: branch(stmts + list(rest)))
        (then_value, then_loc), (else_value, else_loc) = returned
        then_value, else_value = self._promote_returns(blocks, then_value, else_value)
        (then_leaves, structure), (else_leaves, else_structure) = flatten(then_value), flatten(else_value)
        problem = structure_mismatch(structure, else_structure)
        if problem:
            raise TypeMismatchError(
                f"the function returns {problem} on the two paths of the runtime if at line "
                f"{self.loc(node).line}; every "
                "return must give one type", self.sem.builder.loc,
                notes=[(f"the {path} path returns here", loc) for path, loc in (("then", then_loc), ("else", else_loc))
                       if loc is not None])
        for block, leaves in zip(blocks, (then_leaves, else_leaves)):
            with self.sem.builder.at_end_of(block):
                self.sem.create("yield", leaves, [])
        op = self.sem.create("if", [cond], [v.type for v in then_leaves], regions=blocks)
        self.returned = True
        self.return_value = unflatten(structure, [tensor(r) for r in op.results])

    def _promote_returns(self, blocks, a, b):
        """Python numbers returned on one path where the other returns a runtime scalar or a
        different number become runtime scalars (Triton's rule), created in their own path's
        region."""
        numbers = all(isinstance(v, (tensor, bool, int, float)) for v in (a, b))
        differ = isinstance(a, tensor) or isinstance(b, tensor) or type(a) is not type(b) or a != b
        if numbers and differ:
            if not isinstance(a, tensor):
                with self.sem.builder.at_end_of(blocks[0]):
                    a = self.sem.to_tensor(a)
            if not isinstance(b, tensor):
                with self.sem.builder.at_end_of(blocks[1]):
                    b = self.sem.to_tensor(b)
        elif type(a) is tuple and type(b) is tuple and len(a) == len(b):
            pairs = [self._promote_returns(blocks, x, y) for x, y in zip(a, b)]
            a, b = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        return a, b

    def visit_IfExp(self, node):
        test = self.visit(node.test)
        if not isinstance(test, tensor):
            return self.visit(node.body if test else node.orelse)
        cond = self._condition(test, "conditional expression")
        blocks, values = [Block(), Block()], []
        for block, expr in zip(blocks, (node.body, node.orelse)):
            out = {}
            self._region(block, "conditional expression", lambda: out.setdefault("v", self.visit(expr)))
            with self.sem.builder.at_end_of(block):
                values.append(self.sem.to_tensor(out["v"]))
        if not _same_type(values[0].type, values[1].type):
            self.error(f"the two values of a runtime conditional expression have different types "
                       f"{values[0].type} and {values[1].type}", TypeMismatchError)
        for block, v in zip(blocks, values):
            with self.sem.builder.at_end_of(block):
                self.sem.create("yield", [v], [])
        return tensor(self.sem.create("if", [cond], [values[0].type], regions=blocks).result)

    # ------------------------------------------------------------------- for
    def visit_For(self, node):
        if node.orelse:
            self.error("for ... else is not supported in kernels", UnsupportedSyntaxError)
        it = node.iter
        if isinstance(it, ast.Call) and self.visit(it.func) is range:
            if it.keywords:
                self.error("range() takes no keyword arguments", UnsupportedSyntaxError)
            bounds = [self.visit(a) for a in it.args]
            if not 1 <= len(bounds) <= 3:
                self.error(f"range expects 1 to 3 arguments, got {len(bounds)}", TypeMismatchError)
            if len(bounds) == 1:
                bounds = [0] + bounds
            if len(bounds) == 2:
                bounds.append(1)
            return self._runtime_for(node, *bounds)
        for value in self._static_values(self.visit(it)):
            if self.returned:
                break
            self.assign(node.target, value, node, sanitize=False)
            self.visit_block(node.body)

    def _runtime_for(self, node, lb, ub, step):
        if not isinstance(node.target, ast.Name):
            self.error("the target of a runtime for loop must be a single name", UnsupportedSyntaxError)
        reverse = not isinstance(step, tensor) and step < 0
        if not isinstance(step, tensor) and step == 0:
            self.error("range() step must not be zero", TypeMismatchError)
        if reverse:  # range(a, b, -s) visits a, a-s, …: iterate range(b, a, s) as a - (iv - b)
            lb, ub, step = ub, lb, -step
        lb, ub, step = (self.sem.to_tensor(v) for v in (lb, ub, step))
        for v in (lb, ub, step):
            if v.is_block() or not v.dtype.is_int() or v.dtype.is_bool():
                self.error(f"range bounds must be integer scalars, got {v.type}", TypeMismatchError)
        iv_type = integer_promote(integer_promote(lb.dtype, ub.dtype), step.dtype)
        lb, ub, step = (self.sem.cast(v, iv_type) for v in (lb, ub, step))
        target = node.target.id
        carried = [n for n in self._carried(node.body) if n != target]  # the induction variable is not carried
        inits = [self.scope[n] for n in carried]
        structures, leaves = self._carried_values(carried)
        counts = [len(f) for f in leaves]
        flat_inits = [v for f in leaves for v in f]
        body = Block([iv_type] + [v.type for v in flat_inits], [target] + _leaf_names(carried, counts))

        def gen_body():
            iv = tensor(body.args[0])
            if reverse:
                iv = self.sem.arith("sub", self.sem.arith("add", lb, ub), iv)
            self.scope[target] = iv
            self._bind_leaves(self.scope, carried, structures, counts, body.args[1:])
            self.visit_block(node.body)
            self._yield_carried(carried, inits, "for loop")

        before = {n: v for n, v in self.scope.items() if n != target}  # the target may rebind any old value
        after = self._region(body, "for loop", gen_body)
        self._check_constants_unchanged(before, after, "for loop", node.body, node.lineno)
        op = self.sem.create("for", [lb, ub, step] + flat_inits, [v.type for v in flat_inits], regions=[body])
        self._bind_results(node.body, carried, structures, counts, op, "for loop", node.lineno)
        self.scope.pop(target, None)
        self.hidden[target] = (f"it is the induction variable of the runtime for loop at line {node.lineno}, "
                               "which has no value after the loop (as in Gluon); to keep its last value, assign "
                               "it inside the body to a variable initialised before the loop")

    def _yield_carried(self, carried, inits, kind: str) -> None:
        outs = []
        for name, init in zip(carried, inits):
            if name not in self.scope:
                self.error(f"'{name}' is not defined at the end of the {kind} body", TypeMismatchError)
            outs += self._check_carried(name, init, self.scope[name], kind)
        self.sem.create("yield", outs, [])

    def _bind_results(self, body, carried, structures, counts, op, kind: str, line: int) -> None:
        for name in assigned_names(body):
            if name not in self.scope:  # (a descriptor rebound per iteration already says why)
                self.hidden.setdefault(name, f"it is assigned only inside the {kind} at line {line}")
        self._name_results(op.results, list(zip(carried, counts)))
        self._bind_leaves(self.scope, carried, structures, counts, op.results)

    # ----------------------------------------------------------------- while
    def visit_While(self, node):
        if node.orelse:
            self.error("while ... else is not supported in kernels", UnsupportedSyntaxError)
        carried = self._carried(node.body)
        inits = [self.scope[n] for n in carried]
        structures, leaves = self._carried_values(carried)
        counts = [len(f) for f in leaves]
        flat_inits = [v for f in leaves for v in f]
        types = [v.type for v in flat_inits]
        arg_names = _leaf_names(carried, counts)
        before_block, after_block = Block(types, arg_names), Block(types, arg_names)

        def gen_before():
            self._bind_leaves(self.scope, carried, structures, counts, before_block.args)
            test = self.visit(node.test)
            if not isinstance(test, tensor):
                self.error(f"the condition of a while loop must be a runtime value, got the compile-time {test!r}"
                           " (a while loop without break needs a condition that can change)", TypeMismatchError)
            cond = self._condition(test, "while loop")
            self.sem.create("condition", [cond] + list(before_block.args), [])

        def gen_after():
            self._bind_leaves(self.scope, carried, structures, counts, after_block.args)
            self.visit_block(node.body)
            self._yield_carried(carried, inits, "while loop")

        before = dict(self.scope)
        self._region(before_block, "while loop", gen_before)
        after = self._region(after_block, "while loop", gen_after)
        self._check_constants_unchanged(before, after, "while loop", [ast.Expr(node.test)] + node.body, node.lineno)
        op = self.sem.create("while", flat_inits, types, regions=[before_block, after_block])
        self._bind_results(node.body, carried, structures, counts, op, "while loop", node.lineno)
