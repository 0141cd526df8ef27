"""Hopper's warpgroup MMA in kernels: ``warpgroup_mma``, ``warpgroup_mma_wait``, ``warpgroup_mma_init``.

Gluon's names and signatures (``triton.experimental.gluon.language.nvidia.hopper``)::

    acc = warpgroup_mma(a_smem, b_smem, acc)                    # acc = a @ b + acc, synchronous
    tok = warpgroup_mma(a_smem, b_smem, acc, is_async=True)     # issued; runs in the background
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[tok])     # now the result is usable

``a`` is an ``[M, K]`` shared-memory descriptor (``NVMMASharedLayout``) or a tensor in
``DotOperandLayout(0, acc.layout, 32 // bits)``; ``b`` a ``[K, N]`` descriptor (for float32
(tf32) and fp8 inputs K-major only: ``b_smem.permute((1, 0))`` of an ``[N, K]`` buffer); ``acc`` an
``[M, N]`` float32 tensor in ``NVMMADistributedLayout(version=[3, 0], ...)``, or the
:class:`warpgroup_mma_accumulator` of an earlier asynchronous call (chained MMAs accumulate
in flight).  An asynchronous call returns that accumulator *token*, not a tensor: tensor
operations on it are refused at compile time, and ``warpgroup_mma_wait`` turns it back into
a tensor once at most ``num_outstanding`` asynchronous MMAs remain in flight.  The token is
a runtime value: it is carried through loops and branches (alone, in tuples or in
aggregates) like the tensor it holds, keeping the kind the variable had before the loop
(:mod:`gluonkit.lang.values`), so the wait can sit at the top of the next iteration.  ``deps`` may
also list the shared-memory buffers the MMAs read; the wait returns every dep (one value, or
a tuple for several), and the interpreter reports a buffer overwritten, or a result read,
while an MMA that uses it is still in flight.
"""

from __future__ import annotations

from ...ir.types import SharedMemoryDescType, TensorType
from ...ir.verify_wgmma import wgmma_precision_problem, wgmma_shape_problem
from ..errors import ArgumentError, LayoutMismatchError, TypeMismatchError
from ..shared_memory import shared_memory_descriptor
from ..tensor import builtin, tensor

__all__ = ["warpgroup_mma", "warpgroup_mma_wait", "warpgroup_mma_init", "warpgroup_mma_accumulator"]

_PRECISIONS = (None, "tf32", "tf32x3", "ieee")


class warpgroup_mma_accumulator:  # noqa: N801 - Gluon's spelling
    """The in-flight result of an asynchronous ``warpgroup_mma`` (Gluon's accumulator token).

    Pass it as ``acc`` to the next ``warpgroup_mma``, or to ``warpgroup_mma_wait(deps=[...])``
    to get the tensor.
    """

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    @property
    def type(self) -> TensorType:
        return self.handle.type

    def __repr__(self) -> str:
        return (f"warpgroup_mma_accumulator({self.type}) (an asynchronous warpgroup_mma result: "
                "warpgroup_mma_wait(deps=[acc]) gives the tensor)")


@builtin
def warpgroup_mma_init(value, _semantic=None) -> warpgroup_mma_accumulator:
    """``value`` (an accumulator tensor) as an accumulator token, as Gluon's ``warpgroup_mma_init``."""
    value = _semantic.require_tensor(value, "warpgroup_mma_init's value", block=True)
    return warpgroup_mma_accumulator(value.handle)


@builtin
def warpgroup_mma(a, b, acc, *, use_acc=True, precision=None, max_num_imprecise_acc=None, is_async=False,
                  _semantic=None):
    """``a @ b + (acc if use_acc else 0)`` on the tensor cores (see the module docstring).

    ``use_acc`` may be a runtime boolean; ``precision`` only matters for float32 inputs,
    which wgmma multiplies as tf32 (``None`` or ``"tf32"``; ``"tf32x3"`` and ``"ieee"`` are
    refused: wgmma has no float32 product); fp16/bf16/fp8 products are exact.
    ``max_num_imprecise_acc`` is Gluon's fp8 accumulation knob (checked, and recorded).
    """
    sem = _semantic
    a_value = _operand(sem, a, "a", allow_tensor=True)
    b_value = _operand(sem, b, "b", allow_tensor=False)
    if isinstance(acc, warpgroup_mma_accumulator):
        acc_value = acc.handle
    else:
        acc_value = sem.require_tensor(acc, "warpgroup_mma's acc", block=True).handle
    problem = wgmma_shape_problem(a_value.type, b_value.type, acc_value.type)
    if problem:
        sem.error(f"warpgroup_mma: {problem}", LayoutMismatchError if "layout" in problem else TypeMismatchError)
    warps = acc_value.type.layout.num_warps
    if warps != sem.num_warps:
        sem.error(f"warpgroup_mma: acc's layout spreads over {warps} warps but the kernel runs with "
                  f"num_warps={sem.num_warps}", LayoutMismatchError)
    if precision not in _PRECISIONS:
        sem.error(f"warpgroup_mma: precision must be one of {list(_PRECISIONS)}, got {precision!r}", ArgumentError)
    problem = wgmma_precision_problem(a_value.type.element, precision)
    if problem:
        sem.error(f"warpgroup_mma: {problem}", ArgumentError)
    k = a_value.type.shape[1]
    if max_num_imprecise_acc is not None:
        max_num_imprecise_acc = sem.require_int(max_num_imprecise_acc, "warpgroup_mma's max_num_imprecise_acc")
        if not 0 <= max_num_imprecise_acc <= k:
            sem.error(f"warpgroup_mma: max_num_imprecise_acc must be in [0, K = {k}], got {max_num_imprecise_acc}",
                      ArgumentError)
    is_async = sem.require_constexpr(is_async, "warpgroup_mma's is_async")
    if not isinstance(is_async, bool):
        sem.error(f"warpgroup_mma: is_async must be True or False, got {is_async!r}", ArgumentError)
    flag = sem.to_bool(sem.to_tensor(use_acc), "use_acc")
    if flag.is_block():
        sem.error(f"warpgroup_mma: use_acc must be a scalar, got a tensor of shape {list(flag.shape)}",
                  TypeMismatchError)
    attrs = {"precision": precision, "max_num_imprecise_acc": max_num_imprecise_acc, "is_async": is_async}
    op = sem.create("warpgroup_mma", [a_value, b_value, acc_value, flag], [acc_value.type], attrs)
    return warpgroup_mma_accumulator(op.result) if is_async else tensor(op.result)


def _operand(sem, value, name: str, allow_tensor: bool):
    if isinstance(value, shared_memory_descriptor):
        return value.handle
    if allow_tensor and isinstance(value, tensor) and value.is_block():
        return value.handle
    where = "a shared memory descriptor or a DotOperandLayout tensor" if allow_tensor else \
        "a shared memory descriptor (wgmma reads B from shared memory)"
    sem.error(f"warpgroup_mma's {name} must be {where}, got {value!r}", TypeMismatchError)


@builtin
def warpgroup_mma_wait(num_outstanding=0, deps=None, _semantic=None):
    """Wait until at most ``num_outstanding`` asynchronous ``warpgroup_mma`` calls are in flight.

    Returns ``deps`` (accumulator tokens become tensors; descriptors pass through): the
    one value when there is one dep, else a tuple.
    """
    sem = _semantic
    n = sem.require_int(num_outstanding, "warpgroup_mma_wait's num_outstanding")
    if n < 0:
        sem.error(f"warpgroup_mma_wait: num_outstanding must be non-negative, got {n}", ArgumentError)
    if deps is None:
        sem.error("warpgroup_mma_wait: deps must be given: the accumulators (and buffers) the wait makes safe "
                  "to use, e.g. deps=[acc]", ArgumentError)
    if not isinstance(deps, (tuple, list)):
        deps = [deps]
    handles = []
    for dep in deps:
        if isinstance(dep, (warpgroup_mma_accumulator, shared_memory_descriptor)):
            handles.append(dep.handle)
        elif isinstance(dep, tensor) and dep.is_block():
            handles.append(dep.handle)
        else:
            sem.error(f"warpgroup_mma_wait: each dep must be an accumulator, a tensor or a shared memory "
                      f"descriptor, got {dep!r}", TypeMismatchError)
    op = sem.create("warpgroup_mma_wait", handles, [h.type for h in handles], {"num_outstanding": n})
    results = [shared_memory_descriptor(r) if isinstance(r.type, SharedMemoryDescType) else tensor(r)
               for r in op.results]
    return results[0] if len(results) == 1 else tuple(results)
