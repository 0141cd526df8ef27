"""Layout arithmetic for layout inference: how one tensor's layout follows from another's.

Every function here answers "given the layout of this side of an op, what must the other
side's layout be?" for one op family, from the linear layouts, so inference and the
verifier agree on what each op does to a layout:

* ``expand_dims`` / ``reduce`` relate a layout to its :class:`SliceLayout`;
* ``permute``, ``reshape``, ``join`` and ``split`` move the basis vectors of the operand's
  linear layout to the result's coordinates (these relabel elements; no data moves), and
  give a :class:`DistributedLinearLayout` where no named class fits;
* :func:`default_blocked_layout` is the layout of a group of values nothing pins.

A relation that cannot hold (an ``expand_dims`` operand that is not a slice, a ``split``
whose last dimension is spread over threads) raises :class:`Underivable` with the reason.
"""

from __future__ import annotations

from typing import List, Sequence

from ...layouts.distributed import BlockedLayout, DistributedLayout, DistributedLinearLayout, SliceLayout
from ...layouts.linear import LinearLayout

__all__ = [
    "Underivable", "linear_at", "fit_to_shape", "same_layout", "slice_of", "parent_of_slice",
    "permute_layout", "reshape_layout", "join_layout", "split_layout", "default_blocked_layout",
]

_IN_DIMS = ("register", "lane", "warp", "block")


class Underivable(Exception):
    """The layout on one side of an op does not determine a valid layout on the other."""


# ------------------------------------------------------------------------------ basics
def fit_to_shape(layout: DistributedLayout, shape: Sequence[int]) -> DistributedLayout:
    """``layout`` as a layout of a tensor of ``shape``.

    Named layouts describe every shape already.  A :class:`DistributedLinearLayout` is tied
    to one shape; a group of values joined by ``broadcast`` has several shapes (``[1, N]``
    and ``[M, N]``), so the smaller one gets the larger one's layout fitted to its shape by
    :meth:`DistributedLinearLayout.to_linear_layout` (Triton 3.9's rule: register bases
    outside the shape removed, lane and warp bases broadcast).
    """
    shape = tuple(int(s) for s in shape)
    if not isinstance(layout, DistributedLinearLayout) or layout.shape == shape:
        return layout
    if len(shape) != len(layout.shape) or any(s > t for s, t in zip(shape, layout.shape)):
        raise Underivable(f"layout {layout!r} (for shape {list(layout.shape)}) cannot describe "
                          f"a tensor of shape {list(shape)}")
    return DistributedLinearLayout.from_linear_layout(layout.to_linear_layout(shape))


def linear_at(layout: DistributedLayout, shape: Sequence[int]) -> LinearLayout:
    """The linear layout of ``layout`` for a tensor of ``shape``."""
    return fit_to_shape(layout, shape).to_linear_layout(list(shape))


def same_layout(a: DistributedLayout, b: DistributedLayout, shape: Sequence[int]) -> bool:
    """``a`` and ``b`` place a tensor of ``shape`` identically (equal linear layouts)."""
    if a == b:
        return True
    try:
        return linear_at(a, shape) == linear_at(b, shape)
    except (ValueError, Underivable):
        return False


def _from_bases(bases, shape) -> DistributedLinearLayout:
    return DistributedLinearLayout(*(bases.get(d, []) for d in _IN_DIMS), shape)


def _bases(layout: DistributedLayout, shape) -> dict:
    ll = linear_at(layout, shape)
    return {d: [list(v) for v in ll.bases.get(d, [])] for d in _IN_DIMS}


# ----------------------------------------------------------------- expand_dims, reduce
def slice_of(parent: DistributedLayout, axis: int, shape: Sequence[int]) -> DistributedLayout:
    """The layout of ``parent``'s tensors with dimension ``axis`` removed (``shape`` is the
    sliced tensor's shape).

    That is ``SliceLayout(axis, parent)``, except for a :class:`DistributedLinearLayout`
    parent: it is tied to its own shape and cannot lay out the size-1 parent shape a
    slice asks it for, so the slice is computed here as a linear layout (the ``axis``
    coordinate dropped from every basis, register bases that became zero removed).
    """
    if not isinstance(parent, DistributedLinearLayout):
        return SliceLayout(axis, parent)

    def drop(vectors):
        return [list(v[:axis]) + list(v[axis + 1:]) for v in vectors]

    return DistributedLinearLayout([v for v in drop(parent.reg_bases) if any(v)], drop(parent.lane_bases),
                                   drop(parent.warp_bases), drop(parent.block_bases), list(shape))


def parent_of_slice(layout: DistributedLayout, axis: int, what: str) -> DistributedLayout:
    """``P`` where ``layout`` is ``SliceLayout(axis, P)``; :class:`Underivable` otherwise.

    Only a :class:`SliceLayout` names its parent: many parents slice to the same linear
    layout, so a non-slice layout does not determine one (Gluon's rule too).
    """
    if isinstance(layout, SliceLayout) and layout.dim == axis:
        return layout.parent
    raise Underivable(f"{what} must be in SliceLayout({axis}, parent) to determine the parent "
                      f"layout, but it is {layout!r}")


# ------------------------------------------------------------ permute, reshape, join, split
def permute_layout(layout: DistributedLayout, src_shape, order: Sequence[int]) -> DistributedLayout:
    """The layout of ``permute(x, order)`` (result dim ``i`` is ``x`` dim ``order[i]``).

    The answer is ``x``'s basis vectors with their coordinates permuted.  A
    :class:`BlockedLayout` with its per-dimension parameters permuted (Triton's spelling)
    is returned instead when it is that same linear layout, register order included.
    """
    order = [int(i) for i in order]
    dst_shape = [src_shape[i] for i in order]
    bases = _bases(layout, src_shape)
    moved = _from_bases({d: [[v[i] for i in order] for v in vs] for d, vs in bases.items()}, dst_shape)
    if isinstance(layout, BlockedLayout) and not layout.cga_layout:
        where = {src: dst for dst, src in enumerate(order)}
        blocked = BlockedLayout(
            size_per_thread=[layout.size_per_thread[i] for i in order],
            threads_per_warp=[layout.threads_per_warp[i] for i in order],
            warps_per_cta=[layout.warps_per_cta[i] for i in order],
            order=[where[d] for d in layout.order],
        )
        if blocked.to_linear_layout(dst_shape) == moved.to_linear_layout(dst_shape):
            return blocked
    return moved


def _row_major_map(v: Sequence[int], src_shape, dst_shape) -> List[int]:
    """Coordinates ``v`` of a ``src_shape`` tensor, re-read in row-major ``dst_shape``.

    Sizes are powers of two, so the row-major flat index concatenates the coordinates' bit
    fields: the map is linear over GF(2) and can be applied to basis vectors one by one.
    """
    flat = 0
    for c, s in zip(v, src_shape):
        flat = flat * s + c
    out = []
    for s in reversed(dst_shape):
        out.append(flat % s)
        flat //= s
    return out[::-1]


def reshape_layout(layout: DistributedLayout, src_shape, dst_shape) -> DistributedLinearLayout:
    """The layout of a row-major ``reshape`` from ``src_shape`` to ``dst_shape``.

    Each thread keeps the same elements (no data moves), so each basis vector is the same
    flat row-major offset read in the new shape.
    """
    bases = _bases(layout, src_shape)
    moved = {d: [_row_major_map(v, src_shape, dst_shape) for v in vs] for d, vs in bases.items()}
    return _from_bases(moved, list(dst_shape))


def join_layout(layout: DistributedLayout, src_shape) -> DistributedLinearLayout:
    """The layout of ``join(a, b)`` for operands in ``layout``.

    The new last dimension (size 2) goes to the lowest register bit: each thread holds the
    ``a`` and ``b`` element of one position in consecutive registers (Triton's rule).
    """
    bases = {d: [v + [0] for v in vs] for d, vs in _bases(layout, src_shape).items()}
    bases["register"].insert(0, [0] * len(src_shape) + [1])
    return _from_bases(bases, list(src_shape) + [2])


def split_layout(layout: DistributedLayout, src_shape) -> DistributedLinearLayout:
    """The layout of both results of ``split(x)`` for ``x`` in ``layout`` (inverse of join).

    The last dimension (size 2) must be one register bit of each thread: a split only
    renames registers.  Otherwise :class:`Underivable` (convert the operand first).
    """
    bases = _bases(layout, src_shape)
    last = [0] * (len(src_shape) - 1) + [1]
    holders = [(d, i) for d, vs in bases.items() for i, v in enumerate(vs) if v[-1]]
    if len(holders) != 1 or holders[0][0] != "register" or bases["register"][holders[0][1]] != last:
        where = ", ".join(f"{d} basis {i} = {bases[d][i]}" for d, i in holders) or "no basis"
        raise Underivable(f"split needs the last dimension (size 2) held in one register bit of "
                          f"each thread, but {layout!r} places it in {where}")
    del bases["register"][holders[0][1]]
    return _from_bases({d: [v[:-1] for v in vs] for d, vs in bases.items()}, list(src_shape[:-1]))


# ----------------------------------------------------------------------------- default
def default_blocked_layout(shape: Sequence[int], num_warps: int,
                           threads_per_warp: int = 32) -> BlockedLayout:
    """The layout given to values nothing pins: Triton's default blocked encoding.

    One element per thread per repetition; lanes are handed out from the fastest
    (last) dimension towards the slowest, each dimension taking as many as its size
    needs, then warps likewise; the slowest dimension takes whatever lanes and warps
    remain (so small tensors are replicated rather than rejected).
    """
    rank = len(shape)
    order = list(range(rank - 1, -1, -1))
    lanes, warps = [1] * rank, [1] * rank
    lanes_left, warps_left, threads_left = threads_per_warp, num_warps, threads_per_warp * num_warps
    for dim in order[:-1]:
        threads = max(1, min(threads_left, shape[dim]))
        lanes[dim] = max(1, min(threads, lanes_left))
        warps[dim] = max(1, min(threads // lanes[dim], warps_left))
        lanes_left //= lanes[dim]
        warps_left //= warps[dim]
        threads_left //= threads
    lanes[order[-1]] = lanes_left
    warps[order[-1]] = warps_left
    return BlockedLayout(size_per_thread=[1] * rank, threads_per_warp=lanes,
                         warps_per_cta=warps, order=order)

