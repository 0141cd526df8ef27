"""Tensor-memory (TMEM, Blackwell) layouts and the register layouts of tcgen05.ld / st.

TMEM is 128 lanes ("rows") x 512 columns of 32 bits per CTA.  A TMEM layout maps
``row``, ``col`` → ``dim0``, ``dim1`` (Triton's ``tensorMemoryToLinearLayout``); ``col``
counts element slots, so a column index step of ``col_stride`` is one 32-bit column and
the lower slots of a column are unused (zero bases) for unpacked sub-32-bit elements.
A zero basis at rows 32 or 64 means the tile is duplicated in another lane quarter; any
other zero basis marks slots that hold no element.

Warp ``w`` of a warpgroup can only reach TMEM lanes ``32*(w%4) … 32*(w%4)+31``, so the
register layout of a load or store (:func:`get_tmem_reg_layout`) is fixed by the
instruction shape: the 32x32b atom gives thread ``t`` of warp ``w`` lane ``32*(w%4)+t`` and
one register per column; the 16x64b / 16x128b / 16x256b atoms cover 16 lanes with the
thread arrangements of the PTX ISA's tcgen05 "matrix fragments" figures.  Registers then
walk the remaining columns; warps beyond four take further column blocks.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .base import LayoutBase
from .distributed import DistributedLinearLayout, check_shape
from .linear import LinearLayout, is_power_of_two, log2_exact
from .shared import bitwidth_of, cga_bases, shape_per_cta, show_vectors

TMEM_ROWS = 128

# tcgen05.ld/st atoms at 32 bits per element: register and lane bases as (row, col).
_ATOMS: Dict[str, Tuple[List[List[int]], List[List[int]]]] = {
    # thread t holds lane t, one column per register
    "32x32b": ([], [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0]]),
    # thread t: lane 8*(t%2) + t//4, column (t//2)%2
    "16x64b": ([], [[8, 0], [0, 1], [1, 0], [2, 0], [4, 0]]),
    # thread t: lanes t//4 and t//4 + 8 (register bit 0), column t%4
    "16x128b": ([[8, 0]], [[0, 1], [0, 2], [1, 0], [2, 0], [4, 0]]),
    # thread t: lanes t//4 (+8), columns 2*(t%4) and 2*(t%4)+1
    "16x256b": ([[0, 1], [8, 0]], [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]),
}

#: The atoms by instruction shape (what the lowering matches a register layout against).
TMEM_ATOMS = _ATOMS


class TensorMemoryLayout(LayoutBase):
    """The TMEM layout of an MMA accumulator or operand (Gluon's ``TensorMemoryLayout``).

    ``block = (M, N)``: the tile of one MMA, ``M`` in {64, 128} rows.  ``col_stride``: TMEM
    element slots between logically adjacent columns; 1 packs (32-bit elements, or two
    16-bit per 32-bit column), ``32 // bitwidth`` leaves one element per 32-bit column.
    ``cga_layout``: per CTA bit of the cluster, which dimension it splits (``[1, 0]`` halves
    dim0, ``[0, 1]`` dim1; empty for one CTA); the linear layout is that of one CTA's share.
    ``two_ctas``: the layout of a cta_group::2 MMA (``cga_layout[0]`` must be ``[1, 0]``;
    M=64 then spans all 128 lanes).  ``fp4_padded``: operand A of an fp4 MMA whose packed
    byte pairs (the descriptor's ``i8`` elements) each take two column slots, one byte per
    logical fp4 element.
    """

    rank = 2

    def __init__(self, block: Sequence[int], col_stride: int, cga_layout=None, two_ctas: bool = False,
                 fp4_padded: bool = False):
        owner = "TensorMemoryLayout"
        self._block_is_list = isinstance(block, list)
        block = tuple(int(b) for b in block)
        if len(block) != 2 or block[0] not in (64, 128) or not is_power_of_two(block[1]):
            raise ValueError(
                f"{owner}: block must be (M, N) with M in (64, 128) and N a power of two, got {list(block)}"
            )
        if not is_power_of_two(col_stride) or col_stride > 32:
            raise ValueError(f"{owner}: col_stride must be a power of two from 1 to 32, got {col_stride!r}")
        self.block = block
        self.col_stride = col_stride
        self.cga_layout = cga_bases(owner, cga_layout, 2)
        self.two_ctas = bool(two_ctas)
        self.fp4_padded = bool(fp4_padded)
        if self.two_ctas and (not self.cga_layout or self.cga_layout[0] != (1, 0)):
            raise ValueError(
                f"{owner}: two_ctas needs a cga_layout whose first basis is [1, 0] (the CTA pair splits "
                f"dim0), got cga_layout={show_vectors(self.cga_layout)}"
            )

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        """``row``, ``col`` → ``dim0``, ``dim1`` for one CTA's share of a tensor of ``shape``."""
        shape = check_shape("TensorMemoryLayout", shape, 2)
        m, n = shape_per_cta("TensorMemoryLayout", shape, self.cga_layout)
        block_m, block_n = self.block[0], min(self.block[1], n)
        # Unused slots first: col_stride - 1 per element, and a second slot per packed fp4
        # pair when fp4_padded (one byte of TMEM per logical fp4 element).
        unused = log2_exact(self.col_stride) + int(self.fp4_padded)
        cols = [[0, 0]] * unused + [[0, 1 << i] for i in range(log2_exact(block_n))]
        if block_m == 64 and not self.two_ctas:
            # Each lane quarter holds 16 rows; its lanes 16..31 hold the next 64 rows, else
            # the next N block, else nothing.
            if m > 64:
                spare = [64, 0]
            elif n > block_n:
                spare = [0, block_n]
            else:
                spare = [0, 0]
            rows = [[1, 0], [2, 0], [4, 0], [8, 0], spare, [16, 0], [32, 0]]
        else:
            rows = [[1 << i, 0] for i in range(log2_exact(block_m))]
            if block_m == 64:  # two CTAs: the upper 64 lanes hold the upper half of the columns
                rows.append(cols.pop())
        tile = LinearLayout({"row": rows, "col": cols}, ["dim0", "dim1"])
        reps_m = m // tile.out_dim_size("dim0")
        reps_n = n // tile.out_dim_size("dim1")
        if reps_m == 0 or reps_n == 0:
            raise ValueError(
                f"TensorMemoryLayout: shape {list(shape)} is smaller than one block "
                f"{tile.out_dim_size('dim0')} x {tile.out_dim_size('dim1')} per CTA"
            )
        # Further blocks along dim0, then dim1.
        return (
            tile
            * LinearLayout.identity_1d(reps_m, "col", "dim0")
            * LinearLayout.identity_1d(reps_n, "col", "dim1")
        )

    def _key(self) -> tuple:
        return (self.block, self.col_stride, self.cga_layout, self.two_ctas, self.fp4_padded)

    def __repr__(self) -> str:
        block = list(self.block) if self._block_is_list else self.block
        return (
            f"TensorMemoryLayout(block={block}, col_stride={self.col_stride}, "
            f"cga_layout={show_vectors(self.cga_layout)}, two_ctas={self.two_ctas}, fp4_padded={self.fp4_padded})"
        )


class TensorMemoryScalesLayout(LayoutBase):
    """The TMEM layout of block-scale factors of tcgen05.mma (Gluon's name).

    Rows 0..31 hold dim0 0..31 (repeated in each lane quarter: the zero bases at rows 32
    and 64), 4 columns hold dim1 0..3, the next column slot holds dim0 + 32 (the PTX
    "scale factor A/B layout" figures); larger tensors repeat over further columns, dim0
    first.  ``cga_layout`` as for :class:`TensorMemoryLayout` (one CTA's share).
    """

    rank = 2

    def __init__(self, cga_layout=None):
        self.cga_layout = cga_bases("TensorMemoryScalesLayout", cga_layout, 2)

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape("TensorMemoryScalesLayout", shape, 2)
        m, n = shape_per_cta("TensorMemoryScalesLayout", shape, self.cga_layout)
        rows = [[1 << i, 0] for i in range(5)] + [[0, 0], [0, 0]]
        cols = [[0, 1], [0, 2], [32, 0]]
        cols += [[64 << i, 0] for i in range(log2_exact(max(1, m // 64)))]
        cols += [[0, 4 << i] for i in range(log2_exact(max(1, n // 4)))]
        return _zero_beyond(LinearLayout({"row": rows, "col": cols}, ["dim0", "dim1"]), (m, n))

    def _key(self) -> tuple:
        return (self.cga_layout,)

    def __repr__(self) -> str:
        return f"TensorMemoryScalesLayout(cga_layout={show_vectors(self.cga_layout)})"


def scales_copy_bases(rows: int, scales: int) -> List[List[int]]:
    """The shared-memory offset bases ``tcgen05_copy`` reads ``[rows, scales]`` block scales from.

    Each block of 128 rows x 4 scales is what one ``tcgen05.cp .warpx4.32x128b`` moves: 32 rows
    of 16 bytes, scale ``(32g + r, c)`` at byte ``16r + 4g + c``; blocks follow along the
    scales, then along the rows (the "packed block" order of cuBLAS' scale layout).  Use as
    ``SharedLinearLayout(scales_copy_bases(rows, scales), alignment=128)``.  ``rows`` is a
    multiple of 128 and ``scales`` of 4, both powers of two.
    """
    if rows < 128 or scales < 4 or not is_power_of_two(rows) or not is_power_of_two(scales):
        raise ValueError(f"scales_copy_bases: rows must be a power of two >= 128 and scales >= 4, got {rows}, {scales}")
    bases = [[0, 1], [0, 2], [32, 0], [64, 0], [1, 0], [2, 0], [4, 0], [8, 0], [16, 0]]
    bases += [[0, 4 << i] for i in range(log2_exact(scales // 4))]
    return bases + [[128 << i, 0] for i in range(log2_exact(rows // 128))]


def get_tmem_reg_layout(element_ty, shape, layout, num_warps: int, instr_variant: str = "32x32b"):
    """The register layout of a tcgen05.ld / st of a ``shape`` tensor in TMEM ``layout``.

    Returns a :class:`DistributedLinearLayout` (Gluon's ``get_tmem_reg_layout``, one CTA).
    ``element_ty``: see :func:`~gluonkit.layouts.shared.bitwidth_of`.  ``instr_variant``:
    one of ``"32x32b"``, ``"16x64b"``, ``"16x128b"``, ``"16x256b"``, or ``"32x32b_splitn"``:
    the 32x32b layout with the column bit ``N / 2`` moved into the highest register, so the
    loaded tensor can be split in two halves along N without data movement.  Sub-32-bit
    elements that share a 32-bit column go to consecutive registers.  ``num_warps`` is a
    power of two >= 4; warps beyond the first four take further column blocks (or repeat
    data when there are too few columns).
    """
    bits = bitwidth_of(element_ty, "get_tmem_reg_layout")
    if not is_power_of_two(bits) or bits > 32:
        raise ValueError(f"get_tmem_reg_layout: element_ty must be 1 to 32 bits (a power of two), got {bits} bits")
    if instr_variant == "16x32bx2":
        raise ValueError(
            "get_tmem_reg_layout: the 16x32bx2 atom is chosen implicitly (a 32x32b layout whose "
            "lanes 16..31 hold the upper columns); request instr_variant='32x32b'"
        )
    splitn = instr_variant == "32x32b_splitn"
    if splitn:
        instr_variant = "32x32b"
    if instr_variant not in _ATOMS:
        raise ValueError(
            f"get_tmem_reg_layout: instr_variant must be one of {list(_ATOMS) + ['32x32b_splitn']}, "
            f"got {instr_variant!r}"
        )
    if not is_power_of_two(num_warps) or num_warps < 4:
        raise ValueError(f"get_tmem_reg_layout: num_warps must be a power of two >= 4, got {num_warps!r} (each warp "
                         "of a warpgroup reaches its own 32 TMEM lanes: run tensor-memory loads and stores in a "
                         "partition of 4 or more warps)")
    if not isinstance(layout, (TensorMemoryLayout, TensorMemoryScalesLayout)):
        raise ValueError(f"get_tmem_reg_layout: layout must be a TensorMemoryLayout, got {layout!r}")
    if isinstance(layout, TensorMemoryLayout) and layout.col_stride * bits > 32:
        raise ValueError(
            f"get_tmem_reg_layout: layout.col_stride * element bits must be at most 32, "
            f"got col_stride {layout.col_stride} with {bits}-bit elements"
        )
    shape = check_shape("get_tmem_reg_layout", shape, 2)
    result = _ld_st_layout(layout.to_linear_layout(shape), instr_variant, num_warps, bits)
    if result is None:
        raise ValueError(
            f"get_tmem_reg_layout: the {instr_variant} instruction cannot access shape {list(shape)} "
            f"of {layout!r} with num_warps={num_warps}"
        )
    b = result.bases
    if splitn:
        _move_half_n_into_registers(b, shape[1], bits)
    # A cluster layout: each CTA reaches its own share (TMEM is per CTA), placed by its rank.
    per_cta = shape_per_cta("get_tmem_reg_layout", shape, layout.cga_layout)
    block = [[c * e for c, e in zip(v, per_cta)] for v in layout.cga_layout]
    return DistributedLinearLayout(b["register"], b["lane"], b["warp"], block, shape)


def _move_half_n_into_registers(bases: Dict[str, List[List[int]]], n: int, bits: int) -> None:
    """Make ``[0, n // 2]`` the last register basis (in place), for ``32x32b_splitn``.

    With no registers, the lane that holds the upper half becomes a register (that lane
    then repeats the lower half).  Otherwise the last register trades places with the
    lane or warp basis (not one of the first two warp bits: those select TMEM lane
    quarters) that steps ``n // 2``; this needs more registers than one 32-bit word holds.
    """
    half = [0, n // 2]
    regs = bases["register"]
    if not regs:
        if bases["lane"][-1] != half:
            raise ValueError(
                f"get_tmem_reg_layout: 32x32b_splitn with one register needs the last lane to step "
                f"{half}, got lane bases {bases['lane']}"
            )
        regs.append(half)
        bases["lane"][-1] = [0, 0]
        return
    if regs[-1] == half:
        return
    if len(regs) <= log2_exact(32 // bits):
        raise ValueError(
            f"get_tmem_reg_layout: 32x32b_splitn needs more than {32 // bits} {bits}-bit registers "
            f"per thread (two 32x32b.x1 loads); load with '32x32b' and convert_layout instead"
        )
    for dim, first in (("lane", 0), ("warp", 2)):
        for i in range(first, len(bases[dim])):
            if bases[dim][i] == half:
                regs[-1], bases[dim][i] = bases[dim][i], regs[-1]
                return
    raise ValueError(
        f"get_tmem_reg_layout: 32x32b_splitn needs a lane or warp (beyond the first two warp bits) "
        f"that steps {half}; got {bases}"
    )


# --------------------------------------------------------------------- internals
def _ld_st_layout(ll: LinearLayout, atom: str, num_warps: int, bits: int) -> Optional[LinearLayout]:
    """``register``, ``lane``, ``warp`` → ``dim0``, ``dim1`` for TMEM layout ``ll``, or None.

    Sub-32-bit elements are first grouped into 32-bit registers: consecutive dim1 elements
    in consecutive column slots become consecutive registers (packed), unpacked 16-bit
    pairs likewise, and otherwise unused slots are dropped (software padding).
    """
    if bits != 32:
        best, quot, c = 1, ll, 2
        while bits * c <= 32:
            q = _divide_cols(ll, [1 << i for i in range(log2_exact(c))], c)
            if q is None:
                break
            best, quot, c = c, q, 2 * c
        if best > 1:
            return _prepend_registers(_ld_st_layout(quot, atom, num_warps, bits * best), best)
        unpacked = _divide_cols(ll, [0, 1], 2) if bits == 16 else None
        if unpacked is not None:
            return _prepend_registers(_ld_st_layout(unpacked, atom, num_warps, 32), 2)
        padded = _divide_cols(ll, [0] * log2_exact(32 // bits), 1)
        if padded is not None:
            return _ld_st_layout(padded, atom, num_warps, 32)
        if ll.in_dim_size("col") == 1:
            return _ld_st_layout(ll, atom, num_warps, 32)
        return None
    return _ld_st_layout_32(ll, atom, num_warps)


def _ld_st_layout_32(ll: LinearLayout, atom: str, num_warps: int) -> Optional[LinearLayout]:
    """The 32-bit case: tile the atom over ``ll``'s rows and columns, then compose.

    The atom gives ``register``, ``lane`` → (row, col).  Rows 32 and 64 go to warps 1 and
    2 (the lane quarters).  Row 16, if the atom does not reach it and ``ll`` stores data
    there, goes to warp 4 (8+ warps) or to a register.  The remaining columns go to
    registers and then to the extra warps; when the layout has nothing at row 16, the
    32x32b atom's lane 16 takes the upper half of the columns instead (lowered as
    16x32bx2).  The result is the composition with ``ll``.
    """
    reg, lane = (list(map(list, vs)) for vs in _ATOMS[atom])
    tile_cols = 1 << max(c for _, c in reg + lane).bit_length()
    n_cols = ll.in_dim_size("col")
    missing = n_cols // tile_cols
    if missing == 0:
        return None
    instr32 = atom == "32x32b"
    empty_row16 = ll.basis("row", 4) == [0, 0]

    # The lowering recovers the tile as ll^-1 o (ll o tile): the atom's own bases must
    # not collapse under ll (32x32b's lane 16 is lowered separately).
    atom_only = LinearLayout({"register": reg, "lane": lane[:4] if instr32 else lane},
                             {"row": TMEM_ROWS, "col": tile_cols})
    if not atom_only.compose(ll).is_injective():
        return None

    row16 = None
    if not instr32 and not empty_row16:
        row16 = "warp" if num_warps > 4 else "register"
    warps_to_tile = num_warps // (8 if row16 == "warp" else 4)
    warp_broadcast = warps_to_tile // min(missing, warps_to_tile)
    warps_to_tile //= warp_broadcast
    missing //= warps_to_tile

    if missing > 1 and instr32 and empty_row16:
        reg += [[0, 1 << i] for i in range(log2_exact(missing // 2))]
        lane = lane[:4] + [[0, missing // 2]]
    elif missing > 1:
        reg += [[0, tile_cols << i] for i in range(log2_exact(missing))]
    warp = [[32, 0], [64, 0]]
    if row16 == "warp":
        warp.append([16, 0])
    elif row16 == "register":
        reg.append([16, 0])
    cols = tile_cols * missing
    warp += [[0, cols << i] for i in range(log2_exact(warps_to_tile))]
    warp += [[0, 0]] * log2_exact(warp_broadcast)
    tile = LinearLayout({"register": reg, "lane": lane, "warp": warp}, {"row": TMEM_ROWS, "col": n_cols})
    return tile.compose(ll)


def _divide_cols(ll: LinearLayout, low_dim1: Sequence[int], scale: int) -> Optional[LinearLayout]:
    """``ll`` without its lowest ``col`` bases, if those map to dim1 ``low_dim1`` (dim0 0).

    Every other basis must be a multiple of ``scale`` in dim1, which is divided out
    (Triton's ``divideLeft`` by a ``col`` → ``dim1`` layout of dim1 size ``scale``).
    """
    k = len(low_dim1)
    b = ll.bases
    if len(b["col"]) < k or any(b["col"][i] != [0, low_dim1[i]] for i in range(k)):
        return None
    rest = {"row": b["row"], "col": b["col"][k:]}
    if any(v[1] % scale for vs in rest.values() for v in vs):
        return None
    bases = {d: [[v[0], v[1] // scale] for v in vs] for d, vs in rest.items()}
    return LinearLayout(bases, {"dim0": ll.out_dim_size("dim0"), "dim1": max(1, ll.out_dim_size("dim1") // scale)})


def _prepend_registers(layout: Optional[LinearLayout], count: int) -> Optional[LinearLayout]:
    """``count`` consecutive dim1 elements per thread in the lowest registers, then ``layout``."""
    if layout is None:
        return None
    return (LinearLayout.identity_1d(count, "register", "dim1") * layout).transpose_outs(["dim0", "dim1"])


def _zero_beyond(layout: LinearLayout, shape: Sequence[int]) -> LinearLayout:
    """Clear the largest coordinates of each output until it fits ``shape`` (Triton's
    ``ensureLayoutNotLargerThan``): the cleared input bits become broadcast/undefined."""
    bases = layout.bases
    for j, (o, want) in enumerate(zip(layout.out_dims, shape)):
        have = layout.out_dim_size(o)
        hits = sorted(((v[j], d, i) for d, vs in bases.items() for i, v in enumerate(vs) if v[j]), reverse=True)
        for _, d, i in hits:
            if have <= want:
                break
            bases[d][i][j] = 0
            have //= 2
    return LinearLayout(bases, dict(zip(layout.out_dims, (min(s, w) for s, w in zip(layout.out_dim_sizes.values(), shape)))))
