"""Where each element of a tensor-memory (TMEM) view lives, and how threads reach it.

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA.  Every stage that touches it (the
frontend, the verifier, the interpreter, the lowering) asks this module, so they agree by
construction:

* a *tile* (the last two dimensions of ``alloc_shape``) is placed by the layout's linear
  layout ``row, col → dim0, dim1`` (:mod:`gluonkit.layouts.tmem`), where ``col`` counts
  element *slots*: one slot is one element's bits, so a 32-bit column holds ``32 // bits``
  slots (:func:`tile_columns`);
* stage dimensions put whole tiles side by side along the columns (:func:`stage_columns`);
* a descriptor's runtime value is an address ``(lane, column)``: the allocation's first
  column, plus what ``index`` (whole tiles) and ``slice`` (:func:`slice_offset`) added;
* a load or store in a register layout ``R`` (``register, lane, warp → dim0, dim1`` of the
  view) touches the cells :func:`access_map` gives: ``register, lane, warp → row, slot``
  relative to the view's address.  Warp ``w`` may only reach lanes ``32*(w%4) … +31``; a
  register layout that breaks this rule is rejected with the reason.

:func:`plan_columns` gives each allocation of a kernel its first column (every allocation
a power of two ≥ 32 columns, aligned to its size) and the total the kernel allocates; more
than 512 is an error listing every allocation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..layouts.linear import LinearLayout, is_power_of_two
from ..layouts.tmem import TMEM_ROWS, TensorMemoryLayout, TensorMemoryScalesLayout
from .diagnostics import CompilationError
from .types import TensorMemoryDescType

__all__ = ["TMEM_COLUMNS", "MIN_ALLOC_COLUMNS", "layout_problem", "tile_layout", "tile_columns", "stage_columns",
           "alloc_columns", "slice_offset", "access_map", "AccessMap", "plan_columns", "ColumnPlan", "cta_group"]

TMEM_COLUMNS = 512
MIN_ALLOC_COLUMNS = 32  # tcgen05.alloc takes a power of two from 32 to 512 columns


def layout_problem(layout, shape: Sequence[int], element) -> Optional[str]:
    """Why ``layout`` cannot place a TMEM buffer of ``shape`` ``element`` values (``None`` when it can)."""
    if not isinstance(layout, (TensorMemoryLayout, TensorMemoryScalesLayout)):
        return f"the layout must be a TensorMemoryLayout or TensorMemoryScalesLayout, got {layout!r}"
    shape = list(shape)
    if len(shape) < 2:
        return f"a tensor-memory buffer has at least two dimensions (M, N), got shape {shape}"
    bits = element.primitive_bitwidth
    if bits not in (8, 16, 32):
        return f"tensor memory holds 8-, 16- or 32-bit elements, got {element} ({bits} bits)"
    if isinstance(layout, TensorMemoryLayout) and layout.col_stride * bits > 32:
        return (f"col_stride {layout.col_stride} with {bits}-bit {element} elements spreads one element over more "
                f"than a 32-bit column; use col_stride={32 // bits} or less")
    stages, tile = shape[:-2], shape[-2:]
    if any(not isinstance(s, int) or s <= 0 for s in stages):
        return f"the leading (stage) dimensions {stages} must be positive ints"
    if any(not is_power_of_two(s) for s in tile):
        return f"the tile dimensions {tile} must be powers of two"
    cga = [list(v) for v in layout.cga_layout]
    if isinstance(layout, TensorMemoryScalesLayout):
        pair = cga[:1] in ([[1, 0]], [[0, 0]])  # a pair's A scales by rows, B's in both CTAs (more bits: pairs)
    else:
        pair = getattr(layout, "two_ctas", False) and cga[:1] == [[1, 0]]
    if any(any(v) for v in cga) and not pair:  # (all-zero bases: every CTA holds its own)
        return (f"{layout!r} spreads the buffer over a CTA cluster, which gluonkit builds only for CTA pairs: "
                "TensorMemoryLayout(..., cga_layout=[[1, 0], ...], two_ctas=True) for the accumulator (rank bit 0 "
                "the pair), TensorMemoryScalesLayout(cga_layout=[[1, 0], ...] or [[0, 0], ...]) for block scales")
    try:
        ll = layout.to_linear_layout(tile)
    except ValueError as e:
        return str(e)
    if ll.in_dim_size("row") > TMEM_ROWS:
        return f"{layout!r} needs {ll.in_dim_size('row')} lanes; TMEM has {TMEM_ROWS}"
    if not ll.is_surjective():
        return f"{layout!r} does not reach every element of a {tile} tile"
    return None


def cta_group(func) -> int:
    """2 when some tensor memory of kernel ``func`` has a ``two_ctas`` layout (its MMAs are
    ``cta_group::2``: every tcgen05 instruction of a kernel uses one cta_group, and the CTA
    pair allocates and frees its tensor memory together), else 1."""
    return 2 if any(op.name == "tmem_alloc" and getattr(op.results[0].type.layout, "two_ctas", False)
                    for op in func.walk()) else 1


def tile_layout(ty: TensorMemoryDescType) -> LinearLayout:
    """``row, col → dim0, dim1`` for one tile of the buffer underlying ``ty`` (``col`` in slots)."""
    return ty.layout.to_linear_layout(list(ty.alloc_shape[-2:]))


def _slots_per_column(ty: TensorMemoryDescType) -> int:
    return 32 // ty.element.primitive_bitwidth


def tile_columns(ty: TensorMemoryDescType) -> int:
    """32-bit columns one tile occupies (at least one)."""
    return max(1, tile_layout(ty).in_dim_size("col") // _slots_per_column(ty))


def stage_columns(ty: TensorMemoryDescType) -> List[int]:
    """For each stage dimension of ``ty``'s buffer, the columns between consecutive indices."""
    strides, stride = [], tile_columns(ty)
    for size in reversed(ty.alloc_shape[:-2]):
        strides.append(stride)
        stride *= size
    return strides[::-1]


def alloc_columns(ty: TensorMemoryDescType) -> int:
    """Columns the buffer of ``ty`` needs, before rounding to an allocation size."""
    n = tile_columns(ty)
    for size in ty.alloc_shape[:-2]:
        n *= size
    return n


def slice_offset(ty: TensorMemoryDescType, dim: int, start: int) -> Tuple[int, int]:
    """``(lanes, columns)`` a slice of ``ty`` starting at ``start`` along tile dimension ``dim`` adds.

    Raises ``ValueError`` when the start is not at a 32-bit column boundary (a slice of packed
    16-bit elements starting at an odd column slot).
    """
    tile_dim = dim - ty.num_stage_dims
    cell = tile_layout(ty).pseudoinvert().apply({f"dim{tile_dim}": start})
    slots = _slots_per_column(ty)
    if cell["col"] % slots:
        raise ValueError(f"a slice starting at {start} along dim {dim} begins inside a 32-bit TMEM column "
                         f"(slot {cell['col']} of {slots} per column); start at a multiple of a whole column")
    return cell["row"], cell["col"] // slots


@dataclass(frozen=True)
class AccessMap:
    """How one load/store reaches TMEM: ``cells`` maps ``register, lane, warp`` to ``row, col`` (col in
    element slots) relative to the view's address."""

    cells: LinearLayout


def access_map(ty: TensorMemoryDescType, reg_layout: LinearLayout) -> Tuple[Optional[AccessMap], Optional[str]]:
    """The cells a load/store of view ``ty`` in register layout ``reg_layout`` touches, or why it cannot.

    ``reg_layout`` maps ``register, lane, warp`` to the view's ``dim0, dim1``.  Each input basis
    goes to the TMEM cell the buffer's layout gives its element (the earliest one, when the layout
    stores copies), except that warp bits 0 and 1 go to the copy in lane quarter 1 and 2: warp
    ``w`` reaches lanes ``32*(w%4) … +31`` only, so its element must be there.
    """
    if len(ty.shape) != 2:
        return None, f"load and store need a 2-D view; index() the stage dimensions of {list(ty.shape)} first"
    tile = tile_layout(ty)
    inverse = tile.pseudoinvert()
    # Lane-quarter copies: (row 32 or 64, col 0) inputs the layout maps to nothing.
    kernel_rows = {1 << b for b in range(tile.in_dim_size_log2("row")) if tile.basis("row", b) == [0, 0]}
    bases: Dict[str, List[List[int]]] = {}
    for dim in ("register", "lane", "warp"):
        out = []
        for i in range(reg_layout.in_dim_size_log2(dim)):
            image = reg_layout.basis(dim, i)
            cell = inverse.apply({"dim0": image[0], "dim1": image[1]})
            row, col = cell["row"], cell["col"]
            if dim == "warp" and i < 2 and not row & (32 << i) and (32 << i) in kernel_rows:
                row |= 32 << i
            out.append([row, col])
        bases[dim] = out
    cells = LinearLayout(bases, {"row": TMEM_ROWS, "col": tile.in_dim_size("col")})
    for dim in ("register", "lane", "warp"):
        for i, (row, _) in enumerate(bases[dim]):
            want = (32 << i) if dim == "warp" and i < 2 else 0
            if row & 96 != want:
                who = f"{dim} bit {i}" + (f" (warp {1 << i})" if dim == "warp" else "")
                return None, (f"the register layout breaks the lane-quarter rule: {who} reaches TMEM lane {row}, but "
                              f"warp w may only access lanes 32*(w%4) … 32*(w%4)+31 (warp bits 0 and 1 must step "
                              f"lanes 32 and 64, registers and lanes stay within 32 lanes); use "
                              f"desc.get_reg_layout() or get_tmem_reg_layout(...)")
    return AccessMap(cells), None


@dataclass(frozen=True)
class ColumnPlan:
    """Each allocation's first column (by the result value's uid) and the columns the kernel allocates."""

    first_column: Dict[int, int]
    total: int


def _round_alloc(columns: int) -> int:
    size = MIN_ALLOC_COLUMNS
    while size < columns:
        size *= 2
    return size


def plan_columns(func) -> ColumnPlan:
    """Columns for the ``tmem_alloc`` ops of kernel ``func``, or a :class:`CompilationError` at the line of
    the allocation that does not fit, listing every allocation.

    Each allocation takes a power of two ≥ 32 columns, aligned to its size (largest first, so
    no space is lost); all of them live for the whole kernel (no reuse yet).  The kernel's
    total, rounded up to a power of two ≥ 32, is what ``tcgen05.alloc`` requests.
    """
    allocs = [op for op in func.walk() if op.name == "tmem_alloc"]
    sized = [(op, _round_alloc(alloc_columns(op.results[0].type))) for op in allocs]
    first: Dict[int, int] = {}
    used = 0
    for op, size in sorted(sized, key=lambda p: -p[1]):
        first[op.results[0].uid] = used
        used += size
    if used > TMEM_COLUMNS:
        lines = []
        for op, size in sized:
            ty = op.results[0].type
            lines.append(f"  line {op.loc.line}: {list(ty.shape)} {ty.element} -> {size} columns")
        raise CompilationError(
            f"the kernel allocates {used} tensor-memory columns but a CTA has {TMEM_COLUMNS}:\n" + "\n".join(lines)
            + "\nuse fewer or smaller buffers (e.g. fewer accumulator stages or a smaller BLOCK_N), or reuse one "
            "buffer through slice()/index()", allocs[-1].loc)
    return ColumnPlan(first, _round_alloc(used) if used else 0)
