"""Blackwell's block-scaled MMA in kernels: ``tcgen05_copy`` and ``tcgen05_mma_scaled``.

Gluon's names and signatures (``triton.experimental.gluon.language.nvidia.blackwell``)::

    tcgen05_copy(a_scale_smem, a_scale_tmem)          # shared -> tensor memory, in the background
    tcgen05_copy(b_scale_smem, b_scale_tmem)
    tcgen05_mma_scaled(a_smem, b_smem, acc_tmem, a_scale_tmem, b_scale_tmem, "e4m3", "e4m3",
                       use_acc=False, mbarriers=[done])   # acc = (a * a_scale) @ (b * b_scale)

The copies need no wait before the MMA: the PTX ISA orders a ``tcgen05.cp`` before the
``tcgen05.mma`` the same thread issues after it.  Anything else that touches the destination
(a ``load``, a ``store``, an MMA issued by another partition) must wait for a commit that
covers the copy, and a copy may not overwrite scales an MMA still in flight reads.  The formats,
shapes and placements are :mod:`gluonkit.ir.verify_tcgen05_scaled`'s; barriers work as for
:func:`~.tcgen05.tcgen05_mma`.
"""

from __future__ import annotations

from ...ir.verify_tcgen05_scaled import copy_problem, scaled_shape_problem
from ..errors import LayoutMismatchError, TypeMismatchError
from ..tensor import builtin
from .tcgen05 import _flag, _barriers, cluster_attrs
from .tmem import tensor_memory_descriptor

__all__ = ["tcgen05_copy", "tcgen05_mma_scaled"]


def _handles(sem, what: str, named):
    handles = []
    for value, name in named:
        handle = getattr(value, "handle", None)
        if handle is None:
            sem.error(f"{what}'s {name} must be a shared or tensor memory descriptor, got {value!r}", TypeMismatchError)
        handles.append(handle)
    return handles


def _report(sem, what: str, problem: str) -> None:
    sem.error(f"{what}: {problem}", LayoutMismatchError if "layout" in problem else TypeMismatchError)


@builtin
def tcgen05_copy(src, dst, _semantic=None):
    """Start copying shared memory ``src`` into tensor memory ``dst``: block scales into a
    ``TensorMemoryScalesLayout`` (see the module docstring) or a 32-bit tile into a ``TensorMemoryLayout``
    (Gluon 3.9 tutorial 10: e.g. ``C`` of ``D = A @ B + C`` for the MMAs issued after it to accumulate onto)."""
    sem = _semantic
    handles = _handles(sem, "tcgen05_copy", ((src, "src"), (dst, "dst")))
    if not isinstance(dst, tensor_memory_descriptor):
        sem.error(f"tcgen05_copy's dst must be a tensor memory descriptor (allocate_tensor_memory), got {dst!r}",
                  TypeMismatchError)
    problem = copy_problem(*(h.type for h in handles))
    if problem:
        _report(sem, "tcgen05_copy", problem)
    sem.create("tcgen05_copy", handles, [], {})


@builtin
def tcgen05_mma_scaled(a, b, acc, a_scale, b_scale, a_type, b_type, *, use_acc=True, pred=True, multicast=False,
                       mbarriers=None, mbarrier_preds=None, _semantic=None):
    """``acc = (a * a_scale) @ (b * b_scale) + (acc if use_acc else 0)`` on the tensor cores."""
    sem = _semantic
    named = ((a, "a"), (b, "b"), (acc, "acc"), (a_scale, "a_scale"), (b_scale, "b_scale"))
    handles = _handles(sem, "tcgen05_mma_scaled", named)
    for value, name in named[2:]:
        if not isinstance(value, tensor_memory_descriptor):
            sem.error(f"tcgen05_mma_scaled's {name} must be a tensor memory descriptor (allocate_tensor_memory), "
                      f"got {value!r}", TypeMismatchError)
    formats = [sem.require_constexpr(t, f"tcgen05_mma_scaled's {n}") for t, n in ((a_type, "a_type"),
                                                                                  (b_type, "b_type"))]
    problem = scaled_shape_problem(*(h.type for h in handles), *formats)
    if problem:
        _report(sem, "tcgen05_mma_scaled", problem)
    bars, preds = _barriers(sem, "tcgen05_mma_scaled", mbarriers, mbarrier_preds)
    attrs = {"a_type": formats[0], "b_type": formats[1], "num_barriers": len(bars), "is_async": mbarriers is not None,
             **cluster_attrs(sem, "tcgen05_mma_scaled", acc, handles[:2], mbarriers, multicast)}
    operands = handles + [_flag(sem, use_acc, "use_acc"), _flag(sem, pred, "pred")] + bars + preds
    sem.create("tcgen05_mma_scaled", operands, [], attrs)

