"""Shared-memory layouts: which element of a tile lives at each shared-memory offset.

Every class is a thin, validating constructor with Gluon's name and parameters; its
meaning is :meth:`SharedLayout.to_linear_layout`, a
:class:`~gluonkit.layouts.linear.LinearLayout` from ``offset`` (the element offset inside
one CTA's buffer) and ``block`` (the CTA of a cluster) to ``dim0 … dimN-1``.  The bases are
Triton's, basis for basis (``swizzledSharedToLinearLayout``, ``nvmmaSharedToLinearLayout``).

Swizzling, in one picture: a row of the tile is cut into ``vec``-element chunks, and the
chunk index is XORed with a *phase* that depends on the row.  Because XOR with a
row-dependent constant is linear over GF(2), the offset bit that steps one row maps to
"one row down, and ``vec * phase`` columns across"; the column bits stay the identity, so
every chunk stays contiguous.  ``NVMMASharedLayout`` is the hardware's version (TMA
swizzle modes and the wgmma/tcgen05 shared-memory descriptors): chunks of 16 bytes, rows of
``swizzle_byte_width`` bytes, phases repeating every 8 rows of 128 bytes.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from .distributed import check_shape, out_dim_names, shape_per_cta, with_cta_bases
from .base import TensorLayout
from .linear import LinearLayout, is_power_of_two, log2_exact

NVMMA_SWIZZLE_WIDTHS = (0, 32, 64, 128)
NVMMA_ELEMENT_BITWIDTHS = (8, 16, 32, 64)
TMA_MAX_BOX_DIM = 256  # a TMA box has at most 256 elements along every dimension


def bitwidth_of(dtype, owner: str = "dtype") -> int:
    """The element size in bits of ``dtype``.

    Accepts an int (a bit width), any object with ``primitive_bitwidth`` (gluonkit and
    Triton dtypes), or anything ``numpy.dtype`` understands (``np.float16``, ``"bfloat16"``
    is not one: pass a gluonkit dtype or an int for types numpy lacks).
    """
    if isinstance(dtype, bool):
        raise ValueError(f"{owner}: expected a dtype or a bit width, got {dtype!r}")
    if isinstance(dtype, int):
        bits = dtype
    elif hasattr(dtype, "primitive_bitwidth"):
        bits = int(dtype.primitive_bitwidth)
    else:
        import numpy as np

        try:
            bits = np.dtype(dtype).itemsize * 8
        except TypeError:
            raise ValueError(
                f"{owner}: expected an int bit width, an object with .primitive_bitwidth "
                f"or a numpy dtype, got {dtype!r}"
            ) from None
    if bits <= 0:
        raise ValueError(f"{owner}: bit width must be positive, got {bits}")
    return bits


class SharedLayout(TensorLayout):
    """Base of every shared-memory layout: ``offset``, ``block`` → ``dim0 …`` (see
    :class:`~gluonkit.layouts.base.TensorLayout`)."""


# --------------------------------------------------------------------------- NVMMA
class NVMMASharedLayout(SharedLayout):
    """The shared-memory layout that TMA writes and wgmma / tcgen05.mma read.

    The contiguous dimension (the last one, or the first when ``transposed``) is cut
    into rows of ``swizzle_byte_width`` bytes; inside each group of 8 such rows the
    16-byte chunks are permuted by XOR with a row-dependent phase (the PTX "128B / 64B /
    32B swizzle" modes; 0 means no swizzle).  ``fp4_padded`` is the padded fp4 format in
    which each 8 bytes of data are followed by 8 bytes of padding (128-byte swizzle,
    ``element_bitwidth=8`` for the packed pairs).
    ``cga_layout`` lists, per CTA bit, which dimensions the cluster splits (bases in units
    of one CTA's tile; a zero basis shares the tile).
    """

    def __init__(
        self,
        swizzle_byte_width: int,
        element_bitwidth: int,
        rank: int = 2,
        transposed: bool = False,
        fp4_padded: bool = False,
        cga_layout: Sequence[Sequence[int]] | None = None,
    ):
        if swizzle_byte_width not in NVMMA_SWIZZLE_WIDTHS:
            raise ValueError(
                f"NVMMASharedLayout: swizzle_byte_width must be one of {list(NVMMA_SWIZZLE_WIDTHS)}, "
                f"got {swizzle_byte_width!r}"
            )
        if element_bitwidth not in NVMMA_ELEMENT_BITWIDTHS:
            raise ValueError(
                f"NVMMASharedLayout: element_bitwidth must be one of {list(NVMMA_ELEMENT_BITWIDTHS)}, "
                f"got {element_bitwidth!r}"
            )
        if not isinstance(rank, int) or rank < 1:
            raise ValueError(f"NVMMASharedLayout: rank must be a positive int, got {rank!r}")
        if fp4_padded and (swizzle_byte_width != 128 or element_bitwidth != 8):
            raise ValueError(
                "NVMMASharedLayout: fp4_padded needs swizzle_byte_width=128 and element_bitwidth=8, "
                f"got swizzle_byte_width={swizzle_byte_width}, element_bitwidth={element_bitwidth}"
            )
        self.swizzle_byte_width = swizzle_byte_width
        self.element_bitwidth = element_bitwidth
        self._rank = rank
        self.transposed = bool(transposed)
        self.fp4_padded = bool(fp4_padded)
        self.cga_layout = cga_bases("NVMMASharedLayout", cga_layout, rank)

    @staticmethod
    def get_default_for(block_shape, dtype, transposed=False, fp4_padded=False, cga_layout=None):
        """The widest swizzle that a tile of ``block_shape`` can use (Gluon's rule).

        The contiguous dimension's byte size per CTA (doubled for ``fp4_padded``) picks
        128, 64 or 32 when it is at least that large and a multiple of it, else 0; tiles of
        rank 1 or with fewer than 8 rows (product of the other dimensions) get 0.
        ``dtype``: see :func:`bitwidth_of`.
        """
        block_shape = [int(s) for s in block_shape]
        bits = bitwidth_of(dtype, "NVMMASharedLayout.get_default_for")
        rank = len(block_shape)
        per_cta = shape_per_cta("NVMMASharedLayout.get_default_for", block_shape, cga_bases(
            "NVMMASharedLayout.get_default_for", cga_layout, rank))
        if transposed:
            per_cta = per_cta[1:] + per_cta[:1]
        contig_bytes = per_cta[-1] * (2 if fp4_padded else 1) * bits // 8
        swizzle = 0
        for width in (128, 64, 32):
            if contig_bytes >= width and contig_bytes % width == 0:
                swizzle = width
                break
        rows = 1
        for s in per_cta[:-1]:
            rows *= s
        if rank < 2 or rows < 8:
            swizzle = 0
        return NVMMASharedLayout(swizzle, bits, rank, transposed, fp4_padded, cga_layout)

    @property
    def rank(self) -> int:
        return self._rank

    # Triton's swizzle parameters, derived from the byte width (vec elements per 16-byte
    # chunk, per_phase rows share one phase, max_phase phases before the pattern repeats).
    @property
    def vec(self) -> int:
        return 1 if self.swizzle_byte_width == 0 else 128 // self.element_bitwidth

    @property
    def per_phase(self) -> int:
        return 1 if self.swizzle_byte_width == 0 else 128 // self.swizzle_byte_width

    @property
    def max_phase(self) -> int:
        return 1 if self.swizzle_byte_width == 0 else self.swizzle_byte_width // 16

    @property
    def alignment(self) -> int:
        """Byte alignment the buffer needs so the swizzle pattern starts at a pattern boundary."""
        return 128 * self.max_phase

    def tma_block_shape(self, shape: Sequence[int], packed: bool = True) -> List[int]:
        """The TMA box for one CTA's ``shape``: each dimension at most 256, and the
        contiguous one exactly ``swizzle_byte_width`` bytes when swizzled.

        ``packed=False`` counts fp4 elements (two per byte) for ``fp4_padded``.
        """
        shape = check_shape("NVMMASharedLayout", shape, self.rank)
        box = shape_per_cta("NVMMASharedLayout", shape, self.cga_layout)
        contig = 0 if self.transposed else self.rank - 1
        if self.fp4_padded:
            box[contig] *= 2
        box = [min(s, TMA_MAX_BOX_DIM) for s in box]
        if self.swizzle_byte_width:
            width = 8 * self.swizzle_byte_width // self.element_bitwidth
            if box[contig] < width:
                raise ValueError(
                    f"NVMMASharedLayout: shape {list(shape)} is too small for a "
                    f"{self.swizzle_byte_width}-byte swizzle: dimension {contig} must hold at least "
                    f"{width // (2 if self.fp4_padded else 1)} elements per CTA"
                )
            box[contig] = width
        if self.fp4_padded and packed:
            box[contig] //= 2
        return box

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape("NVMMASharedLayout", shape, self.rank)
        per_cta = shape_per_cta("NVMMASharedLayout", shape, self.cga_layout)
        box = self.tma_block_shape(shape)
        names = out_dim_names(self.rank)
        if self.swizzle_byte_width == 0:
            # Row-major over the TMA box (last dimension fastest; dim0 fastest when
            # transposed), then whole boxes.
            if self.transposed and self.rank > 2:
                raise ValueError(
                    "NVMMASharedLayout: an unswizzled transposed layout is defined for rank 2 only "
                    f"(Triton 3.9's rank-{self.rank} version leaves offsets unused); got shape {list(shape)}"
                )
            order = range(self.rank) if self.transposed else reversed(range(self.rank))
            tile = LinearLayout.empty()
            for d in order:
                tile = tile * LinearLayout.identity_1d(box[d], "offset", names[d])
            tile = _grow(tile, "offset", dict(zip(names, per_cta))).transpose_outs(names)
            return with_cta_bases(tile, self.cga_layout)
        if self.rank < 2:
            raise ValueError("NVMMASharedLayout: a swizzled layout needs rank >= 2, got rank 1")
        # Collapse the box to 2-D (rows x contiguous), tile it with the 8-row core matrix,
        # then reshape back (row-major) and move the contiguous dim first if transposed.
        rows = 1
        for s in box[:-1]:
            rows *= s
        collapsed = [rows, box[-1]]
        if self.transposed:
            collapsed.reverse()
        core = self._core_matrix()
        if collapsed[0] < core.out_dim_size("dim0") or collapsed[1] < core.out_dim_size("dim1"):
            raise ValueError(
                f"NVMMASharedLayout: shape {list(shape)} is smaller than one swizzle pattern "
                f"({core.out_dim_size('dim0')} x {core.out_dim_size('dim1')} elements)"
            )
        tile = _grow(core, "offset", {"dim0": collapsed[0], "dim1": collapsed[1]})
        if self.transposed:
            tile = _reshape_row_major(tile, box[1:] + box[:1])
            # dim0 of the tile is the contiguous (last of the rotated) dimension.
            tile = _rename_outs(tile.transpose_outs(names[-1:] + names[:-1]), names)
        else:
            tile = _reshape_row_major(tile, box)
        tile = _grow(tile, "offset", dict(zip(names, per_cta)))
        return with_cta_bases(tile, self.cga_layout)

    def _core_matrix(self) -> LinearLayout:
        """8 rows x one swizzle width of columns: ``offset`` → (row, column).

        Column bits are the identity; the offset bit of row ``r`` also moves
        ``vec * ((r // per_phase) % max_phase)`` columns (the XOR of the 16-byte chunk index).
        With ``fp4_padded`` the offsets address padded bytes: the upper 8 of every 16 offsets
        repeat the lower 8 (padding aliases data), so a column ``c`` is stored at packed
        column ``c // 16 * 8 + c % 8``.
        """
        cols = 8 * max(16, self.swizzle_byte_width) // self.element_bitwidth

        def packed(c: int) -> int:
            return c // 16 * 8 + c % 8 if self.fp4_padded else c

        bases = [[0, packed(1 << i)] for i in range(log2_exact(cols))]
        for r in (1, 2, 4):
            bases.append([r, packed(self.vec * ((r // self.per_phase) % self.max_phase))])
        return LinearLayout({"offset": bases}, ["dim0", "dim1"])

    def _key(self) -> tuple:
        return (self.swizzle_byte_width, self.element_bitwidth, self._rank, self.transposed,
                self.fp4_padded, self.cga_layout)

    def __repr__(self) -> str:
        return (
            f"NVMMASharedLayout(swizzle_byte_width={self.swizzle_byte_width}, "
            f"element_bitwidth={self.element_bitwidth}, rank={self._rank}, "
            f"transposed={self.transposed}, fp4_padded={self.fp4_padded}, "
            f"cga_layout={show_vectors(self.cga_layout)})"
        )


# ------------------------------------------------------------------------ swizzled
class SwizzledSharedLayout(SharedLayout):
    """A generic XOR-swizzled layout (Gluon's ``SwizzledSharedLayout``).

    ``order`` lists the dimensions from fastest to slowest.  Row ``r`` of the two fastest
    dimensions XORs its ``vec``-element chunk index with ``(r // per_phase) % max_phase``;
    further dimensions are stacked whole.  ``vec=1, per_phase=1, max_phase=1`` is the
    plain (unswizzled) layout.
    """

    def __init__(self, vec: int, per_phase: int, max_phase: int, order: Sequence[int],
                 cga_layout: Sequence[Sequence[int]] | None = None):
        for name, value in (("vec", vec), ("per_phase", per_phase), ("max_phase", max_phase)):
            if not is_power_of_two(value):
                raise ValueError(f"SwizzledSharedLayout: {name} must be a power of two, got {value!r}")
        order = tuple(int(d) for d in order)
        if sorted(order) != list(range(len(order))) or not order:
            raise ValueError(
                f"SwizzledSharedLayout: order must be a permutation of 0..rank-1, got {list(order)}"
            )
        self.vec, self.per_phase, self.max_phase, self.order = vec, per_phase, max_phase, order
        self.cga_layout = cga_bases("SwizzledSharedLayout", cga_layout, len(order))

    @property
    def rank(self) -> int:
        return len(self.order)

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape("SwizzledSharedLayout", shape, self.rank)
        per_cta = shape_per_cta("SwizzledSharedLayout", shape, self.cga_layout)
        names = out_dim_names(self.rank)
        if self.rank == 1:
            tile = LinearLayout.identity_1d(per_cta[0], "offset", "dim0")
            return with_cta_bases(tile, self.cga_layout)
        col, row = self.order[0], self.order[1]
        n_cols, n_rows = per_cta[col], per_cta[row]
        bases = [[0, 1 << i] for i in range(log2_exact(n_cols))]
        for i in range(log2_exact(n_rows)):
            r = 1 << i
            bases.append([r, (self.vec * ((r // self.per_phase) % self.max_phase)) % n_cols])
        tile = LinearLayout({"offset": bases}, {names[row]: n_rows, names[col]: n_cols})
        for d in self.order[2:]:
            tile = tile * LinearLayout.identity_1d(per_cta[d], "offset", names[d])
        return with_cta_bases(tile.transpose_outs(names), self.cga_layout)

    def _key(self) -> tuple:
        return (self.vec, self.per_phase, self.max_phase, self.order, self.cga_layout)

    def __repr__(self) -> str:
        return (
            f"SwizzledSharedLayout(vec={self.vec}, per_phase={self.per_phase}, "
            f"max_phase={self.max_phase}, order={list(self.order)}, cga_layout={show_vectors(self.cga_layout)})"
        )


# -------------------------------------------------------------------------- linear
class SharedLinearLayout(SharedLayout):
    """A shared layout given directly by its bases (Gluon's ``SharedLinearLayout``).

    ``offset_bases[i]`` is the element that offset ``2**i`` holds; ``block_bases`` the
    same per CTA bit (in elements).  The buffer's shape is, per dimension, the next power of
    two above the largest coordinate (1 for a dimension no basis reaches, as in Gluon).
    ``alignment``: the byte alignment the allocation needs.
    """

    def __init__(self, offset_bases, block_bases=(), alignment: int = 16):
        if not offset_bases:
            raise ValueError("SharedLinearLayout: offset_bases must not be empty")
        rank = len(offset_bases[0])
        if rank == 0:
            raise ValueError("SharedLinearLayout: offset_bases must have at least one dimension")
        self.offset_bases = _vectors("SharedLinearLayout", "offset_bases", offset_bases, rank)
        self.block_bases = _vectors("SharedLinearLayout", "block_bases", block_bases, rank)
        if not is_power_of_two(alignment):
            raise ValueError(f"SharedLinearLayout: alignment must be a power of two, got {alignment!r}")
        self.alignment = alignment
        largest = [max([0] + [v[d] for v in self.offset_bases + self.block_bases]) for d in range(rank)]
        self.shape = tuple(1 << m.bit_length() for m in largest)
        self._linear = LinearLayout(
            {"offset": self.offset_bases, "block": self.block_bases},
            dict(zip(out_dim_names(rank), self.shape)),
        )

    @property
    def rank(self) -> int:
        return len(self.shape)

    def to_linear_layout(self, shape: Sequence[int] | None = None) -> LinearLayout:
        _check_own_shape("SharedLinearLayout", self.shape, shape)
        return self._linear

    def _key(self) -> tuple:
        return (self.offset_bases, self.block_bases, self.alignment)

    def __repr__(self) -> str:
        return (
            f"SharedLinearLayout(offset_bases={show_vectors(self.offset_bases)}, "
            f"block_bases={show_vectors(self.block_bases)}, alignment={self.alignment})"
        )


# -------------------------------------------------------------------------- padded
class PaddedSharedLayout(SharedLayout):
    """A linear layout plus padding (Gluon's ``PaddedSharedLayout``).

    The linear component maps a *logical* offset to an element (``offset_bases``, as in
    :class:`SharedLinearLayout`); the element is then stored at the *padded* offset: after
    every ``interval`` logical elements, ``padding`` elements are skipped, summed over the
    ``interval_padding_pairs`` (see :meth:`padded_offset`).  ``cga_layout`` bases are in
    units of one CTA's tile; ``shape`` is the whole buffer's shape.
    """

    def __init__(self, interval_padding_pairs, offset_bases, cga_layout, shape):
        self.shape = check_shape("PaddedSharedLayout", shape)
        if not self.shape:
            raise ValueError("PaddedSharedLayout: shape must have rank >= 1, got []")
        rank = len(self.shape)
        pairs = []
        for i, pair in enumerate(interval_padding_pairs):
            pair = tuple(pair)
            if len(pair) != 2 or not all(is_power_of_two(x) for x in pair):
                raise ValueError(
                    "PaddedSharedLayout: interval_padding_pairs must be [interval, padding] pairs "
                    f"of powers of two, got {list(pair)} at index {i}"
                )
            pairs.append(pair)
        if not pairs:
            raise ValueError("PaddedSharedLayout: interval_padding_pairs must not be empty")
        intervals = [p[0] for p in pairs]
        if len(set(intervals)) != len(intervals):
            raise ValueError(f"PaddedSharedLayout: intervals must be distinct, got {intervals}")
        self.interval_padding_pairs = tuple(pairs)
        self.offset_bases = _vectors("PaddedSharedLayout", "offset_bases", offset_bases, rank)
        self.cga_layout = cga_bases("PaddedSharedLayout", cga_layout, rank)
        per_cta = shape_per_cta("PaddedSharedLayout", self.shape, self.cga_layout)
        for i, v in enumerate(self.offset_bases):
            if any(c >= s for c, s in zip(v, per_cta)):
                raise ValueError(
                    f"PaddedSharedLayout: offset_bases[{i}] = {list(v)} lies outside one CTA's "
                    f"shape {per_cta}"
                )
        tile = LinearLayout({"offset": self.offset_bases}, dict(zip(out_dim_names(rank), per_cta)))
        self._linear = with_cta_bases(tile, self.cga_layout)

    @staticmethod
    def with_identity_for(interval_padding_pairs, shape, order, cga_layout=()):
        """Padding over a plain row-major (per ``order``, fastest first) linear component."""
        shape = check_shape("PaddedSharedLayout.with_identity_for", shape)
        order = [int(d) for d in order]
        if sorted(order) != list(range(len(shape))):
            raise ValueError(
                "PaddedSharedLayout.with_identity_for: order must be a permutation of "
                f"0..{len(shape) - 1}, got {order}"
            )
        per_cta = shape_per_cta("PaddedSharedLayout.with_identity_for", shape,
                                 cga_bases("PaddedSharedLayout.with_identity_for", cga_layout, len(shape)))
        bases = []
        for d in order:
            for i in range(log2_exact(per_cta[d])):
                bases.append([1 << i if j == d else 0 for j in range(len(shape))])
        return PaddedSharedLayout(interval_padding_pairs, bases, cga_layout, shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def to_linear_layout(self, shape: Sequence[int] | None = None) -> LinearLayout:
        """The linear component (logical offset → element); padding is :meth:`padded_offset`."""
        _check_own_shape("PaddedSharedLayout", self.shape, shape)
        return self._linear

    def padded_offset(self, offset: int) -> int:
        """Where logical ``offset`` is stored: ``offset + sum((offset // interval) * padding)``."""
        return offset + sum((offset // interval) * padding for interval, padding in self.interval_padding_pairs)

    def _key(self) -> tuple:
        return (self.interval_padding_pairs, self.offset_bases, self.cga_layout, self.shape)

    def __repr__(self) -> str:
        return (
            f"PaddedSharedLayout(interval_padding_pairs={show_vectors(self.interval_padding_pairs)}, "
            f"offset_bases={show_vectors(self.offset_bases)}, cga_layout={show_vectors(self.cga_layout)}, "
            f"shape={list(self.shape)})"
        )


# ------------------------------------------------------------------------- helpers
def show_vectors(vectors) -> List[List[int]]:
    """Basis vectors as lists, the way Gluon's reprs print them."""
    return [list(v) for v in vectors]


def _vectors(owner: str, what: str, vectors, rank: int) -> Tuple[Tuple[int, ...], ...]:
    """Validate a list of basis vectors of ``rank`` non-negative ints."""
    out = []
    for i, v in enumerate(vectors or ()):
        v = tuple(int(c) for c in v)
        if len(v) != rank or any(c < 0 for c in v):
            raise ValueError(
                f"{owner}: {what}[{i}] must be {rank} non-negative ints (one per dimension), got {list(v)}"
            )
        out.append(v)
    return tuple(out)


def cga_bases(owner: str, cga_layout, rank: int) -> Tuple[Tuple[int, ...], ...]:
    """Validate CTA bases: per CTA bit, the CTA-tile index it moves to (0 = shared tile)."""
    bases = _vectors(owner, "cga_layout", cga_layout, rank)
    for i, v in enumerate(bases):
        if any(c and not is_power_of_two(c) for c in v):
            raise ValueError(f"{owner}: cga_layout[{i}] must have power-of-two entries, got {list(v)}")
    return bases


def _grow(layout: LinearLayout, in_dim: str, sizes: Dict[str, int]) -> LinearLayout:
    """Repeat ``layout`` along ``in_dim`` until each output reaches ``sizes`` (Triton's
    ``ensureLayoutNotSmallerThan``: outputs in the layout's order, new bits highest)."""
    for o in layout.out_dims:
        have, want = layout.out_dim_size(o), sizes[o]
        if want > have:
            layout = layout * LinearLayout.identity_1d(want // have, in_dim, o)
    return layout


def _rename_outs(layout: LinearLayout, names: Sequence[str]) -> LinearLayout:
    """The same bases with the output dimensions renamed positionally."""
    sizes = [layout.out_dim_size(o) for o in layout.out_dims]
    return LinearLayout(layout.bases, dict(zip(names, sizes)))


def _reshape_row_major(layout: LinearLayout, shape: Sequence[int]) -> LinearLayout:
    """Reshape the outputs as a row-major (last dimension fastest) array of ``shape``."""
    names = out_dim_names(len(shape))
    rev = layout.transpose_outs(list(reversed(layout.out_dims)))
    return rev.reshape_outs([(names[d], shape[d]) for d in reversed(range(len(shape)))]).transpose_outs(names)


def _check_own_shape(owner: str, own: Tuple[int, ...], shape) -> None:
    if shape is not None and tuple(shape) != tuple(own):
        raise ValueError(f"{owner} is defined for shape {list(own)}, asked for {list(shape)}")
