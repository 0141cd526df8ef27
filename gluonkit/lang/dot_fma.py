"""Gluon 3.9's ``dot_fma``: a small matrix product on the CUDA cores, one FMA per product.

The operands stay in registers: Gluon gives ``a`` and ``b`` dot-operand layouts over the
accumulator's blocked layout, so each thread already holds the rows of ``a`` and the
columns of ``b`` its accumulator elements need.  The verifier checks that property on the
linear layouts (:func:`gluonkit.ir.verify_collective.dot_fma_layout_problem`), so any
layouts with those bases are accepted, not only ``DotOperandLayout`` objects.
"""

from __future__ import annotations

from ..ir.types import float16, float32, float64
from ..layouts.distributed import AutoLayout
from .errors import LayoutMismatchError, ShapeMismatchError, TypeMismatchError
from .tensor import builtin

__all__ = ["dot_fma"]


@builtin
def dot_fma(a, b, acc, _semantic=None):
    """``acc + a @ b`` for float tensors of rank 2 (``[M, K] @ [K, N]``) or 3 (batched), with
    ``fma`` over ``k`` in increasing order in ``acc``'s element type.  ``a``/``b`` need
    ``DotOperandLayout(0|1, acc.layout, 0)`` (or layouts with the same bases)."""
    sem = _semantic
    a = sem.require_tensor(a, "dot_fma a", block=True)
    b = sem.require_tensor(b, "dot_fma b", block=True)
    acc = sem.require_tensor(acc, "dot_fma acc", block=True)
    if not (a.rank == b.rank == acc.rank and acc.rank in (2, 3)):
        sem.error(f"dot_fma needs a, b and acc of rank 2 (or 3, batched), got ranks {a.rank}, {b.rank}, {acc.rank}",
                  ShapeMismatchError)
    if a.shape[:-2] != b.shape[:-2] or acc.shape != a.shape[:-1] + b.shape[-1:] or a.shape[-1] != b.shape[-2]:
        sem.error(f"dot_fma shapes do not chain: a {list(a.shape)} @ b {list(b.shape)} + acc {list(acc.shape)}",
                  ShapeMismatchError)
    if a.dtype != b.dtype or not a.dtype.is_floating() or acc.dtype not in (float16, float32, float64):
        sem.error(f"dot_fma needs a and b of one float type and a float16/float32/float64 acc, got {a.dtype}, "
                  f"{b.dtype}, {acc.dtype}", TypeMismatchError)
    for name, x in (("a", a), ("b", b), ("acc", acc)):
        if isinstance(x.layout, AutoLayout):
            sem.error(f"dot_fma needs concrete layouts; {name} has AutoLayout (give acc a BlockedLayout and "
                      "a/b DotOperandLayout(0|1, acc_layout, 0))", LayoutMismatchError)
    return sem.create1("dot_fma", [a, b, acc], acc.type)
