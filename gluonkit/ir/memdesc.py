"""Where each element of a shared-memory view lives: the offset arithmetic of descriptors.

Every stage that touches shared memory (the frontend computing result types, the
verifier, the interpreter and the lowering) asks this module, so they agree by
construction.  Offsets are in elements of the view's type from the buffer's start:

* a *tile* (the last ``layout.rank`` dimensions of ``alloc_shape``) is placed by the shared
  layout's linear layout ``offset → (dim…)``; a coordinate's offset is its preimage
  (the pseudo-inverse, which picks the earliest offset where the layout repeats elements);
* *stage* dimensions stack whole tiles row-major (``stage_strides``);
* a view made by ``slice`` XORs a constant into every tile offset (the preimage of the
  slice's start; starts are multiples of the power-of-two length, so start + c = start ^ c
  and the map stays linear), and ``index`` adds ``i * stride`` of the stage it drops.

So the offset of view coordinate ``c`` is ``base + (view_to_offset(c) ^ xor)``, where
``base`` is the sum of the ``index`` contributions (multiples of the tile size, so adding
and XOR-ing commute with the tile bits) and ``xor`` the slices' constant.
"""

from __future__ import annotations

from functools import lru_cache
from typing import List, Optional, Sequence

from ..layouts.linear import LinearLayout, is_power_of_two
from ..layouts.shared import PaddedSharedLayout, SharedLayout, SharedLinearLayout
from .types import SharedMemoryDescType

__all__ = [
    "layout_problem", "tile_shape", "tile_layout", "tile_elements", "stage_strides", "alloc_elements",
    "view_to_offset", "slice_xor", "permuted_layout", "reshaped_layout", "alignment_of", "cta_shares", "cta_share_slots", "cta_share_type",
    "shares_stride",
]


def layout_problem(layout, shape: Sequence[int]) -> Optional[str]:
    """Why ``layout`` cannot place a buffer of ``shape`` (``None`` when it can)."""
    if not isinstance(layout, SharedLayout):
        return f"the layout must be a shared layout (NVMMASharedLayout, SwizzledSharedLayout, …), got {layout!r}"
    if isinstance(layout, PaddedSharedLayout):
        return "PaddedSharedLayout buffers are not supported by allocate_shared_memory yet"
    shape = list(shape)
    if len(shape) < layout.rank:
        return f"the layout has rank {layout.rank} but the shape {shape} has rank {len(shape)}"
    stages, tile = shape[:len(shape) - layout.rank], shape[len(shape) - layout.rank:]
    if any(not isinstance(s, int) or s <= 0 for s in stages):
        return f"the leading (stage) dimensions {stages} must be positive ints"
    if any(not is_power_of_two(s) for s in tile):
        return f"the tile dimensions {tile} must be powers of two"
    try:
        ll = layout.to_linear_layout(tile)
    except ValueError as e:
        return str(e)
    if not ll.is_surjective():
        return f"{layout!r} does not reach every element of a {tile} tile"
    return None


def tile_shape(ty: SharedMemoryDescType) -> List[int]:
    """The shape of one tile of the underlying buffer (the layout's dimensions)."""
    return list(ty.alloc_shape[ty.num_stage_dims:])


def tile_layout(ty: SharedMemoryDescType) -> LinearLayout:
    """``offset → tile dims`` for one tile of the buffer."""
    ll = ty.layout.to_linear_layout(tile_shape(ty))
    return ll.sublayout(["offset"], ll.out_dims)


def tile_elements(ty: SharedMemoryDescType) -> int:
    """Elements (offsets) one tile occupies."""
    return tile_layout(ty).in_dim_size("offset")


def stage_strides(ty: SharedMemoryDescType) -> List[int]:
    """For each stage dimension, the elements between consecutive indices."""
    strides = []
    stride = tile_elements(ty)
    for size in reversed(ty.alloc_shape[:ty.num_stage_dims]):
        strides.append(stride)
        stride *= size
    return strides[::-1]


def alloc_elements(ty: SharedMemoryDescType) -> int:
    """Elements of the whole buffer underlying a view of type ``ty``."""
    n = tile_elements(ty)
    for size in ty.alloc_shape[:ty.num_stage_dims]:
        n *= size
    return n


@lru_cache(maxsize=1024)
def cta_shares(ty: SharedMemoryDescType) -> int:
    """Into how many CTA shares the buffer's layout splits it (1: every CTA holds it whole)."""
    ll = ty.layout.to_linear_layout(tile_shape(ty))
    return 1 << sum(1 for v in ll.bases.get("block", []) if any(v)) if ll.has_in_dim("block") else 1


def cta_share_slots(ty: SharedMemoryDescType) -> int:
    """How many share indexes the interpreter's array of split buffer ``ty`` has room for: a
    share's index is its CTA rank without the bits the layout replicates, so a replicated bit
    below a splitting one leaves unused slots (2 ** (the last splitting bit + 1))."""
    bases = ty.layout.to_linear_layout(tile_shape(ty)).bases.get("block", [])
    return 1 << max((i + 1 for i, v in enumerate(bases) if any(v)), default=0)


def _tile_inverse(ty: SharedMemoryDescType, share_stride: int = 0) -> LinearLayout:
    """``tile dims → offset`` (the pseudo-inverse of :func:`tile_layout`).

    A buffer split between CTAs: a coordinate maps to its offset in the CTA that holds it
    (every CTA uses the same offsets for its share); with ``share_stride`` the holding CTA's
    share index times it is added (a power of two above the whole buffer: the interpreter
    keeps every share of a buffer in one array, :func:`shares_stride`)."""
    if cta_shares(ty) == 1:
        return tile_layout(ty).pseudoinvert()
    ll = ty.layout.to_linear_layout(tile_shape(ty))
    inverse = ll.sublayout(["offset", "block"], ll.out_dims).pseudoinvert()
    bases = {d: [[b[0] + b[1] * share_stride] for b in vs] for d, vs in inverse.bases.items()}
    size = share_stride * cta_share_slots(ty) if share_stride else inverse.out_dim_size("offset")
    return LinearLayout(bases, {"offset": size})


def cta_share_type(ty: SharedMemoryDescType) -> SharedMemoryDescType:
    """One CTA's share of a view whose NVMMA layout splits it between CTAs: the per-CTA tile
    shape and the layout without its CTA bases (what a CTA's MMA descriptor and TMA box see)."""
    from ..layouts.distributed import cta_extent
    from ..layouts.shared import NVMMASharedLayout

    layout = ty.layout
    if cta_shares(ty) == 1:
        return ty
    if not isinstance(layout, NVMMASharedLayout):
        raise ValueError(f"{layout!r} splits the buffer between CTAs; only NVMMASharedLayout buffers may be split")
    extent = [1] * ty.num_stage_dims + cta_extent(layout.cga_layout, layout.rank)
    local = NVMMASharedLayout(layout.swizzle_byte_width, layout.element_bitwidth, layout.rank, layout.transposed,
                              layout.fp4_padded)
    return SharedMemoryDescType(ty.element, tuple(s // e for s, e in zip(ty.shape, extent)), local,
                                tuple(s // e for s, e in zip(ty.alloc_shape, extent)))


def shares_stride(ty: SharedMemoryDescType) -> int:
    """Elements between two CTAs' shares of split buffer ``ty`` (the allocation's type) in the
    interpreter's array: a power of two at least :func:`alloc_elements`."""
    return 1 << (alloc_elements(ty) - 1).bit_length()


def view_to_offset(ty: SharedMemoryDescType, share_stride: int = 0) -> LinearLayout:
    """``dim0 … dim{r-1}`` (sized by the view's shape) ``→ offset``, before ``base``/``xor``.

    Stage dimensions of the view must be powers of two (they are whenever the view is a
    tensor's shape); their strides then are powers of two too and the map is linear.
    ``share_stride``: see :func:`_tile_inverse`.
    """
    n_stage = ty.num_stage_dims
    inverse = _tile_inverse(ty, share_stride)
    bases = {}
    for d, size in enumerate(ty.shape):
        bits = size.bit_length() - 1
        if d < n_stage:
            stride = stage_strides(ty)[d]
            bases[f"dim{d}"] = [[stride << b] for b in range(bits)]
        else:
            name = f"dim{d - n_stage}"
            bases[f"dim{d}"] = [[inverse.basis(name, b)[0]] for b in range(bits)]
    total = share_stride * cta_share_slots(ty) if share_stride and cta_shares(ty) > 1 else alloc_elements(ty)
    return LinearLayout(bases, {"offset": 1 << (total - 1).bit_length() if total > 1 else 1})


def slice_xor(ty: SharedMemoryDescType, dim: int, start: int) -> int:
    """The offset constant a slice starting at ``start`` along tile dimension ``dim`` XORs in."""
    inverse = _tile_inverse(ty)
    return inverse.apply({f"dim{dim - ty.num_stage_dims}": start})["offset"]


def _linear_shared(ll: LinearLayout, source) -> SharedLinearLayout:
    """The view's placement as a ``SharedLinearLayout``, with the alignment of the buffer's layout ``source`` (as
    Gluon 3.9 keeps it: a view does not move the buffer)."""
    return SharedLinearLayout([list(v) for v in ll.bases["offset"]], alignment=alignment_of(source))


def permuted_layout(ty: SharedMemoryDescType, order: Sequence[int]) -> SharedLayout:
    """The layout of the buffer with its dimensions reordered (result dim i = dim order[i]).

    The placement is the permuted linear layout; when one of Gluon's named layouts has
    exactly that placement (an NVMMA layout with ``transposed`` flipped, a swizzled layout
    with its order permuted) that name is used, so later ops can recognise it.
    """
    if list(order) == sorted(order):
        return ty.layout  # Gluon 3.9 keeps the layout of an identity permutation
    ll = tile_layout(ty)
    names = [f"dim{i}" for i in range(len(order))]
    moved = ll.transpose_outs([names[o] for o in order])
    permuted = LinearLayout(moved.bases, dict(zip(names, [ll.out_dim_size(names[o]) for o in order])))
    shape = [ty.alloc_shape[o] for o in order]
    for candidate in _named_candidates(ty.layout, order):
        try:
            if candidate.to_linear_layout(shape).sublayout(["offset"], names) == permuted:
                return candidate
        except ValueError:
            continue
    return _linear_shared(permuted, ty.layout)


def _named_candidates(layout, order):
    from ..layouts.shared import NVMMASharedLayout, SwizzledSharedLayout

    out = []
    if isinstance(layout, NVMMASharedLayout) and not layout.fp4_padded:
        cga = [[v[o] for o in order] for v in layout.cga_layout]  # a split moves with its dimension
        out.append(NVMMASharedLayout(layout.swizzle_byte_width, layout.element_bitwidth, layout.rank,
                                     not layout.transposed, cga_layout=cga or None))
    if type(layout) is SwizzledSharedLayout:
        inverse = [list(order).index(d) for d in range(len(order))]
        out.append(SwizzledSharedLayout(layout.vec, layout.per_phase, layout.max_phase,
                                        [inverse[d] for d in layout.order]))
    return out


def reshaped_layout(ty: SharedMemoryDescType, shape: Sequence[int]) -> SharedLayout:
    """The layout of the whole buffer seen with ``shape`` (row-major over every dimension)."""
    full = view_to_offset(ty).pseudoinvert() if ty.num_stage_dims else tile_layout(ty)
    full = full.sublayout(["offset"], full.out_dims)
    names = [f"dim{i}" for i in range(len(shape))]
    reversed_outs = full.transpose_outs(list(reversed(full.out_dims)))  # flatten last dim fastest
    reshaped = reversed_outs.reshape_outs([(names[d], shape[d]) for d in reversed(range(len(shape)))])
    return _linear_shared(reshaped.transpose_outs(names), ty.layout)


def alignment_of(layout) -> int:
    """Byte alignment a buffer with ``layout`` needs: 1024 for swizzled NVMMA tiles (TMA and
    the wgmma/tcgen05 descriptors address whole 8-row swizzle atoms), the layout's own
    alignment for linear layouts, 8 for mbarriers, else 16."""
    from ..layouts.barrier import MBarrierLayout
    from ..layouts.shared import NVMMASharedLayout

    if isinstance(layout, MBarrierLayout):
        return 8
    if isinstance(layout, NVMMASharedLayout):
        return 1024 if layout.swizzle_byte_width else 128
    if isinstance(layout, SharedLinearLayout):
        return max(16, layout.alignment)
    return 16
