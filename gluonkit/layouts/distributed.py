"""Distributed layouts: which thread (block, warp, lane) and register holds each element.

Every class here is a thin, validating constructor with Gluon's name and parameters; the
meaning of a layout is its :meth:`DistributedLayout.to_linear_layout`, a
:class:`~gluonkit.layouts.linear.LinearLayout` from ``register``, ``lane``, ``warp``,
``block`` to ``dim0 … dimN-1``.
"""

from __future__ import annotations

import numbers
from typing import List, Sequence, Tuple

from .base import TensorLayout
from .linear import LinearLayout, is_power_of_two

DISTRIBUTED_IN_DIMS = ("register", "lane", "warp", "block")


def out_dim_names(rank: int) -> List[str]:
    """``["dim0", …, "dim{rank-1}"]``: the output dimension names of a rank-``rank`` tensor."""
    return [f"dim{i}" for i in range(rank)]


def check_shape(owner: str, shape: Sequence[int], rank: int | None = None) -> Tuple[int, ...]:
    """Validate a tensor shape (positive powers of two, and of ``rank`` if given)."""
    shape = tuple(shape)
    if rank is not None and len(shape) != rank:
        raise ValueError(f"{owner}: shape must have rank {rank} like the layout, got {list(shape)}")
    for i, s in enumerate(shape):
        if not is_power_of_two(s):
            raise ValueError(f"{owner}: shape[{i}] must be a power of two, got {list(shape)}")
    return shape


class DistributedLayout(TensorLayout):
    """Base of every layout of a tensor held in registers: ``register``, ``lane``, ``warp``,
    ``block`` → ``dim0 …`` (see :class:`~gluonkit.layouts.base.TensorLayout`)."""


class DistributedLinearLayout(DistributedLayout):
    """A distributed layout given directly by its basis vectors (Gluon's name).

    ``reg_bases``, ``lane_bases``, ``warp_bases`` and ``block_bases`` are lists of basis
    vectors (lowest bit first, one coordinate per dimension, ``dim0`` first) for a tensor of
    ``shape``; there must be 5 lane bases (32 lanes).  Used for another shape, the layout
    is fitted like Triton's linear encoding: larger dimensions wrap into more registers,
    smaller ones broadcast.
    """

    def __init__(self, reg_bases, lane_bases, warp_bases, block_bases, shape):
        self.shape = check_shape("DistributedLinearLayout", shape)
        self.reg_bases = _vectors("reg_bases", reg_bases, len(self.shape))
        self.lane_bases = _vectors("lane_bases", lane_bases, len(self.shape))
        self.warp_bases = _vectors("warp_bases", warp_bases, len(self.shape))
        self.block_bases = _vectors("block_bases", block_bases, len(self.shape))
        if len(self.lane_bases) != 5:
            raise ValueError(
                "DistributedLinearLayout: lane_bases must have 5 vectors (32 lanes), "
                f"got {len(self.lane_bases)}"
            )
        self._linear = LinearLayout(
            {
                "register": self.reg_bases,
                "lane": self.lane_bases,
                "warp": self.warp_bases,
                "block": self.block_bases,
            },
            dict(zip(out_dim_names(len(self.shape)), self.shape)),
        )

    @classmethod
    def from_linear_layout(cls, layout: LinearLayout) -> "DistributedLinearLayout":
        """Wrap a linear layout with the four distributed input dimensions."""
        missing = [d for d in layout.in_dims if d not in DISTRIBUTED_IN_DIMS]
        if missing:
            raise ValueError(f"not a distributed layout: unknown input dimensions {missing}")
        b = layout.bases
        shape = [layout.out_dim_size(o) for o in layout.out_dims]
        return cls(b.get("register", []), b.get("lane", []), b.get("warp", []), b.get("block", []), shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_warps(self) -> int:
        return 1 << len(self.warp_bases)

    @property
    def order(self) -> Tuple[int, ...]:
        """Dimensions from fastest to slowest, as Triton's linear encoding derives it: the
        dimensions the register bases step along, in the order they first appear, then the
        rest from the last dimension down."""
        order: List[int] = []
        for v in self.reg_bases:
            first = next((j for j, c in enumerate(v) if c), None)
            if first is not None and first not in order:
                order.append(first)
        return tuple(order + [d for d in reversed(range(self.rank)) if d not in order])

    def to_linear_layout(self, shape: Sequence[int] | None = None) -> LinearLayout:
        """The bases as given for ``self.shape``; other shapes are fitted as Triton does for
        linear encodings: larger dims wrap into more registers (dimensions in :attr:`order`),
        register bases outside a smaller dim are removed, lane and warp bases broadcast."""
        if shape is None or tuple(shape) == self.shape:
            return self._linear
        shape = check_shape("DistributedLinearLayout", shape, self.rank)
        names = out_dim_names(self.rank)
        tile = self._linear.transpose_outs([names[d] for d in self.order])
        return fit_to_shape(tile, shape, broadcast_registers=False)

    def _key(self) -> tuple:
        return (self.reg_bases, self.lane_bases, self.warp_bases, self.block_bases, self.shape)

    def __repr__(self) -> str:
        def show(vs):
            return [list(v) for v in vs]

        return (
            f"DistributedLinearLayout(reg_bases={show(self.reg_bases)}, "
            f"lane_bases={show(self.lane_bases)}, warp_bases={show(self.warp_bases)}, "
            f"block_bases={show(self.block_bases)}, shape={list(self.shape)})"
        )


class AutoLayout(DistributedLayout):
    """A layout left to inference: the compiler picks it from the values it meets.

    It has no linear layout of its own; asking for one is an error that names the fix.
    """

    @property
    def rank(self) -> int:
        raise ValueError(f"{type(self).__name__} has no rank until layout inference resolves it")

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        raise ValueError(
            f"{type(self).__name__} has no linear layout: it is resolved by layout inference; "
            "use set_auto_layout or a concrete layout where one is needed"
        )

    def _key(self) -> tuple:
        return ()

    def __repr__(self) -> str:
        return "AutoLayout()"


class CoalescedLayout(AutoLayout):
    """A layout left to the compiler, meant for coalesced global memory access (Gluon's name).

    Like :class:`AutoLayout` it has no rank or linear layout of its own; layout inference
    resolves it together with the values it meets, and where nothing pins it, to the
    default blocked layout (consecutive elements on consecutive lanes, which is coalesced).
    Unlike Triton, gluonkit does not widen it to several elements per thread from pointer
    alignment (see docs/decisions.rst).
    """

    def __repr__(self) -> str:
        return "CoalescedLayout()"


# ------------------------------------------------------------------ shared helpers
def identity_nd(in_dim: str, sizes: Sequence[int], order: Sequence[int]) -> LinearLayout:
    """``in_dim`` laid over ``dim0…`` with ``sizes[d]`` along dim ``d``, ``order[0]`` fastest.

    The output dimensions come out in ``order`` (minor to major), not in ``dim0…`` order:
    :func:`fit_to_shape` relies on that order to decide which dimension repeats first.
    """
    layout = LinearLayout.empty()
    for d in order:
        layout = layout * LinearLayout.identity_1d(sizes[d], in_dim, f"dim{d}")
    return layout


def fit_to_shape(tile: LinearLayout, shape: Sequence[int], broadcast_registers: bool = True) -> LinearLayout:
    """Fit the layout of one CTA's tile (inputs ``register``/``lane``/``warp``) to ``shape``.

    This is Triton's ``combineCtaCgaWithShape`` for a single CTA:

    * a dimension of ``shape`` larger than the tile wraps: ``register`` bases are appended
      that step over whole tiles.  Dimensions are visited in the tile's output-dimension
      order (Triton's ``ensureLayoutNotSmallerThan`` walks ``getOutDimNames()`` of the CTA
      layout, which is minor to major: ``order`` for a blocked layout, the ``repOrder`` for
      MMA layouts), so all extra registers of the first such dimension come before those of
      the next;
    * a dimension smaller than the tile broadcasts: every basis whose coordinate along it
      does not fit is cut (``ensureLayoutNotLargerThan``).  Lane and warp bases get a zero
      coordinate there (those threads hold copies).  Register bases get a zero coordinate
      too when ``broadcast_registers`` (Triton's MMA and dot-operand layouts), or are
      *removed* otherwise (Triton 3.9's blocked and linear layouts): a thread then holds
      fewer registers instead of duplicate ones.

    The result has all four distributed input dimensions (``block`` empty) and outputs
    ``dim0 … dimN-1`` in that order with exactly the sizes of ``shape``.
    """
    names = out_dim_names(len(shape))
    size_of = dict(zip(names, shape))
    if sorted(tile.out_dims) != sorted(names):
        raise ValueError(f"fit_to_shape: tile outputs {tile.out_dims} do not match a rank-{len(shape)} shape")
    for o in tile.out_dims:
        if size_of[o] > tile.out_dim_size(o):
            tile = tile * LinearLayout.identity_1d(size_of[o] // tile.out_dim_size(o), "register", o)
    limits = [size_of[o] for o in tile.out_dims]
    bases = {d: tile.bases.get(d, []) for d in DISTRIBUTED_IN_DIMS}
    if not broadcast_registers:
        bases["register"] = [v for v in bases["register"] if all(c < lim for c, lim in zip(v, limits))]
    # Every nonzero coordinate along one dimension is a distinct power of two, so the
    # bases to broadcast are exactly those whose coordinate does not fit in the shape.
    for vectors in bases.values():
        for v in vectors:
            for j, lim in enumerate(limits):
                if v[j] >= lim:
                    v[j] = 0
    fitted = LinearLayout(bases, dict(zip(tile.out_dims, limits)))
    return fitted.transpose_outs(names)


def cluster_bases(owner: str, cga_layout, rank: int) -> Tuple[Tuple[int, ...], ...]:
    """Gluon's ``cga_layout`` of a layout that may split a tensor between CTAs.

    Each basis (one per CTA bit) is a CTA-tile index: ``[1, 0]`` puts CTA 1 on the second
    half of dim 0 (``docs/clusters.rst``, "Splitting tensors between CTAs").  All-zero bases
    only replicate and are dropped, so such a layout equals its one-CTA form.
    """
    bases = tuple(tuple(v) for v in (cga_layout or ()))
    if not any(any(v) for v in bases):
        return ()
    for i, v in enumerate(bases):
        if len(v) != rank or not all(_is_int(c) and c >= 0 and (c == 0 or is_power_of_two(c)) for c in v):
            raise ValueError(f"{owner}: cga_layout[{i}] must be {rank} non-negative powers of two or zeros "
                             f"(one per dimension), got {list(v)}")
    return bases


def replicated_cta_bits(cga_layout, num_ctas: int) -> int:
    """The bits of a CTA rank (below ``num_ctas``) along which ``cga_layout`` replicates: its
    all-zero bases, and every bit past its last basis.  CTAs whose ranks differ only in these
    bits hold the same data, which is what a multicast copy fills in one go."""
    split = sum(1 << i for i, v in enumerate(cga_layout or ()) if any(v))
    return (num_ctas - 1) & ~split


def cta_class(bits: int, rank: int, num_ctas: int) -> List[int]:
    """The ranks that differ from ``rank`` only in ``bits`` (``rank`` included), in order."""
    return [r for r in range(num_ctas) if r & ~bits == rank & ~bits]


def cta_extent(cga_layout, rank: int) -> List[int]:
    """How many CTA tiles the cluster's ``cga_layout`` spans along each dimension."""
    return [2 * max(v[d] for v in cga_layout) if any(v[d] for v in cga_layout) else 1 for d in range(rank)]


def shape_per_cta(owner: str, shape: Sequence[int], cga_layout) -> List[int]:
    """One CTA's share of ``shape`` under ``cga_layout``; an error naming ``owner`` when the
    cluster's split does not divide it."""
    extent = cta_extent(cga_layout, len(shape))
    for d, (s, e) in enumerate(zip(shape, extent)):
        if s % e:
            raise ValueError(
                f"{owner}: shape {list(shape)} is not divisible by the CTA split {extent} "
                f"of cga_layout {[list(v) for v in cga_layout]} (dimension {d})"
            )
    return [s // e for s, e in zip(shape, extent)]


def cta_offset(cga_layout, share: Sequence[int], rank: int) -> List[int]:
    """Where CTA ``rank``'s share (of shape ``share``) starts in the cluster's tensor: each set
    rank bit moves it by its basis times the share."""
    offset = [0] * len(share)
    for bit, basis in enumerate(cga_layout or ()):
        if rank >> bit & 1:
            offset = [o ^ (b * s) for o, b, s in zip(offset, basis, share)]
    return offset


def with_cta_bases(tile: LinearLayout, cga_layout) -> LinearLayout:
    """Append the ``block`` input to one CTA's layout: each CTA bit moves by whole tiles."""
    names = tile.out_dims
    extent = cta_extent(cga_layout, len(names))
    return tile * LinearLayout({"block": [list(v) for v in cga_layout]}, dict(zip(names, extent)))


def _int_list(owner: str, name: str, values) -> Tuple[int, ...]:
    """``values`` as a tuple of ints; a ``ValueError`` naming ``name`` otherwise."""
    try:
        items = tuple(values)
    except TypeError:
        items = None
    if items is None or not all(_is_int(v) for v in items):
        raise ValueError(f"{owner}: {name} must be a list of ints, got {values!r}")
    return tuple(int(v) for v in items)


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_powers_of_two(owner: str, name: str, values: Sequence[int]) -> None:
    if not all(is_power_of_two(v) for v in values):
        raise ValueError(f"{owner}: {name} entries must be powers of two, got {list(values)}")


def _product(values: Sequence[int]) -> int:
    p = 1
    for v in values:
        p *= v
    return p


# ------------------------------------------------------------------------ BlockedLayout
class BlockedLayout(DistributedLayout):
    """Each thread holds a block of ``size_per_thread`` elements; lanes, then warps, tile it.

    The tile is built along ``order`` (``order[0]`` is the fastest-varying dimension) from
    ``size_per_thread`` (registers), ``threads_per_warp`` (lanes, product 32) and
    ``warps_per_cta`` (warps).  For a tensor shape, the tile repeats (more registers) where
    the shape is larger and is broadcast where it is smaller (see :func:`fit_to_shape`).
    ``cga_layout`` (the cluster's CTA bases): see :func:`cluster_bases`; a split layout
    gives each CTA ``shape_per_cta`` elements, tiled as above.
    """

    def __init__(self, size_per_thread, threads_per_warp, warps_per_cta, order, cga_layout=None):
        owner = "BlockedLayout"
        self.size_per_thread = _int_list(owner, "size_per_thread", size_per_thread)
        self.threads_per_warp = _int_list(owner, "threads_per_warp", threads_per_warp)
        self.warps_per_cta = _int_list(owner, "warps_per_cta", warps_per_cta)
        self.order = _int_list(owner, "order", order)
        rank = len(self.size_per_thread)
        if rank == 0:
            raise ValueError(f"{owner}: size_per_thread must have at least one dimension, got []")
        for name in ("threads_per_warp", "warps_per_cta", "order"):
            if len(getattr(self, name)) != rank:
                raise ValueError(
                    f"{owner}: {name} must have rank {rank} like size_per_thread, "
                    f"got {list(getattr(self, name))}"
                )
        for name in ("size_per_thread", "threads_per_warp", "warps_per_cta"):
            _check_powers_of_two(owner, name, getattr(self, name))
        if _product(self.threads_per_warp) != 32:
            raise ValueError(
                f"{owner}: threads_per_warp must multiply to 32, got {list(self.threads_per_warp)} "
                f"(product {_product(self.threads_per_warp)})"
            )
        if sorted(self.order) != list(range(rank)):
            raise ValueError(f"{owner}: order must be a permutation of {list(range(rank))}, got {list(self.order)}")
        self.cga_layout = cluster_bases(owner, cga_layout, rank)

    @property
    def rank(self) -> int:
        return len(self.size_per_thread)

    @property
    def num_warps(self) -> int:
        """Warps the layout spans (product of ``warps_per_cta``); must equal the kernel's."""
        return _product(self.warps_per_cta)

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape("BlockedLayout", shape, self.rank)
        # A size-1 dimension (a SliceLayout's parent) is broadcast over the CTAs.
        cga = tuple(tuple(c if shape[d] > 1 else 0 for d, c in enumerate(v)) for v in self.cga_layout)
        per_cta = shape_per_cta("BlockedLayout", shape, cga)
        tile = (
            identity_nd("register", self.size_per_thread, self.order)
            * identity_nd("lane", self.threads_per_warp, self.order)
            * identity_nd("warp", self.warps_per_cta, self.order)
        )
        return with_cta_bases(fit_to_shape(tile, per_cta, broadcast_registers=False), cga)

    def _key(self) -> tuple:
        return (self.size_per_thread, self.threads_per_warp, self.warps_per_cta, self.order, self.cga_layout)

    def __repr__(self) -> str:
        return (
            f"BlockedLayout(size_per_thread={list(self.size_per_thread)}, "
            f"threads_per_warp={list(self.threads_per_warp)}, "
            f"warps_per_cta={list(self.warps_per_cta)}, order={list(self.order)}, "
            f"cga_layout={[list(v) for v in self.cga_layout]})"
        )


# -------------------------------------------------------------------------- SliceLayout
class SliceLayout(DistributedLayout):
    """The layout of ``parent`` with dimension ``dim`` removed (the result of a reduction
    along ``dim``, or the operand of ``expand_dims(…, dim)``).

    As in Triton, the parent is evaluated for the shape with size 1 inserted at ``dim``
    (so its bases along ``dim`` are broadcast), the output ``dim`` is dropped, and register
    bases that became all-zero are removed; lane and warp bases keep their zero vectors.
    """

    def __init__(self, dim: int, parent: DistributedLayout):
        if not isinstance(parent, DistributedLayout) or isinstance(parent, AutoLayout):
            raise ValueError(f"SliceLayout: parent must be a concrete distributed layout, got {parent!r}")
        if parent.rank < 2:
            raise ValueError(f"SliceLayout: parent must have rank at least 2, got {parent!r} of rank {parent.rank}")
        if not _is_int(dim) or not 0 <= dim < parent.rank:
            raise ValueError(
                f"SliceLayout: dim must be in [0, {parent.rank}) for a parent of rank {parent.rank}, got {dim!r}"
            )
        self.dim = int(dim)
        self.parent = parent

    @property
    def rank(self) -> int:
        return self.parent.rank - 1

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    @property
    def cga_layout(self) -> Tuple[Tuple[int, ...], ...]:
        """The parent's CTA bases without dimension ``dim`` (empty: one CTA)."""
        return tuple(v[: self.dim] + v[self.dim + 1 :] for v in getattr(self.parent, "cga_layout", ()))

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape("SliceLayout", shape, self.rank)
        parent_shape = shape[: self.dim] + (1,) + shape[self.dim :]
        parent = self.parent.to_linear_layout(parent_shape)
        bases = {}
        for d, vectors in parent.bases.items():
            kept = [v[: self.dim] + v[self.dim + 1 :] for v in vectors]
            if d == "register":
                kept = [v for v in kept if any(v)]
            bases[d] = kept
        return LinearLayout(bases, dict(zip(out_dim_names(self.rank), shape)))

    def _key(self) -> tuple:
        return (self.dim, self.parent)

    def __repr__(self) -> str:
        return f"SliceLayout(dim={self.dim}, parent={self.parent!r})"


def _vectors(what: str, vectors, rank: int) -> Tuple[Tuple[int, ...], ...]:
    """Validate a list of basis vectors of ``rank`` non-negative ints."""
    out = []
    for i, v in enumerate(vectors):
        v = tuple(int(c) for c in v)
        if len(v) != rank or any(c < 0 for c in v):
            raise ValueError(
                f"DistributedLinearLayout: {what}[{i}] must be {rank} non-negative ints "
                f"(one per dimension), got {list(v)}"
            )
        out.append(v)
    return tuple(out)
