"""Layout-inference rules: what each IR op says about its tensors' layouts.

Every catalogue op has exactly one rule (a test checks ``INFER_RULES`` against
:data:`gluonkit.ir.OPS`).  A rule records constraints in a
:class:`~gluonkit.lower.infer.constraints.Constraints`:

* ``unify`` — element-wise ops, ``broadcast``, ``hint``, loads and stores, control-flow
  values (loop-carried values, block arguments, yields and results), and
  ``set_auto_layout`` (its concrete result pins its operand's group);
* ``relate`` — ``expand_dims`` and ``reduce`` (slice relations), ``permute``, ``reshape``,
  ``join``, ``split`` (relabelings of the linear layout);
* nothing — ops without tensor operands (``constant``, ``arange``, ``splat``: their
  result takes whatever its group gets), ``convert_layout``, whose whole point is
  that operand and result layouts are independent, and the shared-memory ops: a
  ``local_load`` result has the layout it was given (or its own group when that is
  ``AutoLayout``) and ``local_store`` accepts a tensor in any layout, since shared memory
  is addressed by element, not by thread.
"""

from __future__ import annotations

from typing import Callable, Dict

from ...ir import OPS, Operation, TensorType
from . import derive as derive
from .constraints import Constraints, Relation

__all__ = ["INFER_RULES", "infer_rule"]

INFER_RULES: Dict[str, Callable[[Operation, Constraints], None]] = {}


def infer_rule(*names: str):
    """Register the decorated function as the inference rule of ops ``names``."""
    for name in names:
        if name not in OPS:
            raise KeyError(f"inference rule for unknown op {name!r}")

    def register(fn):
        for name in names:
            INFER_RULES[name] = fn
        return fn

    return register


@infer_rule("constant", "program_id", "num_programs", "arange", "splat", "convert_layout",
            "yield", "condition", "return", "device_print", "device_assert", "assume",
            "local_alloc", "local_load", "local_store", "memdesc_index", "memdesc_slice", "memdesc_permute",
            "memdesc_reshape", "memdesc_reinterpret", "mbarrier_init", "mbarrier_expect", "mbarrier_arrive",
            "mbarrier_wait", "mbarrier_invalidate", "fence_async_shared", "thread_barrier",
            "cluster_barrier", "clc_try_cancel", "clc_load_result",
            "async_tma_copy_global_to_shared", "async_tma_copy_shared_to_global", "async_tma_store_wait",
            "async_tma_gather", "async_tma_scatter",
            "tmem_alloc", "tmem_load", "tmem_store", "tmem_index", "tmem_slice", "tmem_reinterpret",
            "tcgen05_mma", "tcgen05_commit", "tcgen05_copy", "tcgen05_mma_scaled")
def _no_constraint(op: Operation, c: Constraints) -> None:
    """No tie between layouts (terminators are handled by their parent op's rule)."""


@infer_rule("binary", "unary", "compare", "fma", "packed_arith", "select", "cast", "addptr", "broadcast", "hint",
            "load", "store", "set_auto_layout")
def _same_layout(op: Operation, c: Constraints) -> None:
    c.unify(op.operands + op.results, op)


@infer_rule("warpgroup_mma")
def _warpgroup_mma(op: Operation, c: Constraints) -> None:
    """The accumulator and the result share one layout; A (registers) is pinned by the verifier."""
    c.unify([op.operands[2], op.results[0]], op)


@infer_rule("warpgroup_mma_wait")
def _warpgroup_mma_wait(op: Operation, c: Constraints) -> None:
    """Each dep and its result are one value."""
    for dep, result in zip(op.operands, op.results):
        if isinstance(dep.type, TensorType):
            c.unify([dep, result], op)


# --------------------------------------------------------------------- slice relations
@infer_rule("expand_dims")
def _expand_dims(op: Operation, c: Constraints) -> None:
    axis = op.attrs["axis"]
    c.relate(Relation(
        op, op.operands[0], op.results[0],
        forward=lambda layout: derive.parent_of_slice(layout, axis, "the operand of expand_dims"),
        backward=lambda layout: derive.slice_of(layout, axis, op.operands[0].type.shape),
    ))


@infer_rule("reduce")
def _reduce(op: Operation, c: Constraints) -> None:
    axis = op.attrs["axis"]
    c.unify(op.operands, op)
    shape = [s for i, s in enumerate(op.operands[0].type.shape) if i != axis]
    for result in op.results:
        if isinstance(result.type, TensorType):
            c.relate(Relation(
                op, op.operands[0], result,
                forward=lambda layout: derive.slice_of(layout, axis, shape),
                backward=lambda layout: derive.parent_of_slice(layout, axis, "the result of reduce"),
            ))


# ------------------------------------------------------------------------- relabelings
@infer_rule("permute")
def _permute(op: Operation, c: Constraints) -> None:
    order = list(op.attrs["order"])
    inverse = [order.index(i) for i in range(len(order))]
    src, dst = op.operands[0], op.results[0]
    c.relate(Relation(
        op, src, dst,
        forward=lambda layout: derive.permute_layout(layout, src.type.shape, order),
        backward=lambda layout: derive.permute_layout(layout, dst.type.shape, inverse),
    ))


@infer_rule("reshape")
def _reshape(op: Operation, c: Constraints) -> None:
    src, dst = op.operands[0], op.results[0]
    c.relate(Relation(
        op, src, dst,
        forward=lambda layout: derive.reshape_layout(layout, src.type.shape, dst.type.shape),
        backward=lambda layout: derive.reshape_layout(layout, dst.type.shape, src.type.shape),
    ))


@infer_rule("join")
def _join(op: Operation, c: Constraints) -> None:
    c.unify(op.operands, op)
    src, dst = op.operands[0], op.results[0]
    c.relate(Relation(
        op, src, dst,
        forward=lambda layout: derive.join_layout(layout, src.type.shape),
        backward=lambda layout: derive.split_layout(layout, dst.type.shape),
    ))


@infer_rule("split")
def _split(op: Operation, c: Constraints) -> None:
    c.unify(op.results, op)
    src, dst = op.operands[0], op.results[0]
    c.relate(Relation(
        op, src, dst,
        forward=lambda layout: derive.split_layout(layout, src.type.shape),
        backward=lambda layout: derive.join_layout(layout, dst.type.shape),
    ))


# ------------------------------------------ scan, histogram, gather, map_elementwise
@infer_rule("scan", "map_elementwise")
def _scan_like(op: Operation, c: Constraints) -> None:
    """Each result element lives where the operands' elements do (a scan exchanges data
    along its axis but keeps the layout)."""
    c.unify(op.operands + op.results, op)


@infer_rule("histogram")
def _histogram(op: Operation, c: Constraints) -> None:
    """Input and mask share a layout; the counts' layout is the one the kernel gave."""
    c.unify(op.operands, op)


@infer_rule("dot_fma")
def _dot_fma(op: Operation, c: Constraints) -> None:
    """The result is the accumulator; a and b are concrete (the frontend requires it)."""
    c.unify([op.operands[2], op.results[0]], op)


@infer_rule("gather")
def _gather(op: Operation, c: Constraints) -> None:
    """The result has the index's layout; the source's layout is independent."""
    c.unify([op.operands[1], op.results[0]], op)


# ------------------------------------------------------------------------ control flow
@infer_rule("for")
def _for(op: Operation, c: Constraints) -> None:
    """init i, body argument i + 1 (after the induction variable), yield i and result i."""
    body = op.regions[0]
    for i, (init, result) in enumerate(zip(op.operands[3:], op.results)):
        c.unify([init, body.args[1 + i], body.terminator.operands[i], result], op)


@infer_rule("if")
def _if(op: Operation, c: Constraints) -> None:
    then, other = op.regions
    for i, result in enumerate(op.results):
        c.unify([result, then.terminator.operands[i], other.terminator.operands[i]], op)


@infer_rule("warp_specialize")
def _warp_specialize(op: Operation, c: Constraints) -> None:
    """Each result is what the default partition yields; partitions are otherwise inferred apart."""
    for result, value in zip(op.results, op.regions[0].terminator.operands):
        c.unify([result, value], op)


@infer_rule("while")
def _while(op: Operation, c: Constraints) -> None:
    """Inits, before-arguments and after-yields are one position's values; so are the
    values the condition forwards, the after-arguments and the results."""
    before, after = op.regions
    for i, init in enumerate(op.operands):
        c.unify([init, before.args[i], after.terminator.operands[i]], op)
    forwarded = before.terminator.operands[1:]
    for i, result in enumerate(op.results):
        c.unify([forwarded[i], after.args[i], result], op)


@infer_rule("atomic_rmw", "atomic_cas", "atomic_load", "atomic_store", "inline_asm_elementwise")
def _elementwise_memory(op: Operation, c: Constraints) -> None:
    """Atomics and inline assembly are element-wise: operands and results share one layout."""
    c.unify(op.operands + op.results, op)


@infer_rule("async_copy_global_to_shared")
def _async_copy(op: Operation, c: Constraints) -> None:
    """The pointers and the mask of a cp.async share one layout; shared memory is addressed by element."""
    c.unify(op.operands[1:], op)


@infer_rule("async_commit_group", "async_wait_group", "async_copy_mbarrier_arrive")
def _no_tensors(op: Operation, c: Constraints) -> None:
    """No tensor operands or results."""
