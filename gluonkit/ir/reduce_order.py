"""The order in which one thread combines the registers it holds of one reduced element.

A balanced pairwise tree over the registers in increasing register order: ``(r0 ⊕ r1) ⊕ (r2 ⊕
r3)`` and so on, an odd one out carried to the next round.  The lowering (:mod:`gluonkit.lower.ops.reduce`)
and the interpreter (:mod:`gluonkit.interpret.reduce`) both call :func:`combine_pairwise`, so
floating-point results agree bit for bit.  A tree rather than a chain: the ``n - 1`` combines
are the same, but their dependent depth is ``log2 n`` instead of ``n - 1`` (a row max over 32
registers was a 31-deep FMNMX chain on attention's critical path).

Partials held by different warps, or by different CTAs of a cluster, are combined by
:func:`combine_butterfly`, the order of a butterfly exchange as index 0 sees it.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

__all__ = ["combine_butterfly", "combine_pairwise"]

T = TypeVar("T")


def combine_pairwise(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """``items`` (at least one) combined as a balanced tree, neighbours first, in order."""
    items = list(items)
    while len(items) > 1:
        paired = [combine(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        items = paired + items[len(paired) * 2:]
    return items[0]


def combine_butterfly(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """``items`` (a power of two of them, one per warp or CTA, in index order) combined as a
    butterfly exchange does, highest index bit first, as index 0 sees it: at bit ``b`` every
    index ``i`` combines ``f(p[i], p[i ^ 2**b])``.  With a commutative ``combine`` every index
    of a real butterfly ends with these bits; where the partials are gathered instead (through
    shared memory), every reader evaluates this one expression and all agree exactly."""
    items = list(items)
    for bit in reversed(range(len(items).bit_length() - 1)):
        items = [combine(items[i], items[i ^ (1 << bit)]) for i in range(len(items))]
    return items[0]
