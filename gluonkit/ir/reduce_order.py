"""The order in which one thread combines the registers it holds of one reduced element.

A balanced pairwise tree over the registers in increasing register order: ``(r0 ⊕ r1) ⊕ (r2 ⊕
r3)`` and so on, an odd one out carried to the next round.  The lowering (:mod:`gluonkit.lower.ops.reduce`)
and the interpreter (:mod:`gluonkit.interpret.reduce`) both call :func:`combine_pairwise`, so
floating-point results agree bit for bit.  A tree rather than a chain: the ``n - 1`` combines
are the same, but their dependent depth is ``log2 n`` instead of ``n - 1`` (a row max over 32
registers was a 31-deep FMNMX chain on attention's critical path).
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

__all__ = ["combine_pairwise"]

T = TypeVar("T")


def combine_pairwise(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """``items`` (at least one) combined as a balanced tree, neighbours first, in order."""
    items = list(items)
    while len(items) > 1:
        paired = [combine(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = paired + items[len(paired) * 2:]
    return items[0]
