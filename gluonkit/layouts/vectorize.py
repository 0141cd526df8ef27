"""Vector widths of memory accesses, read off the linear layouts.

A thread can move several of its registers with one instruction when they hold elements
that sit next to each other in memory, in order, starting at an address aligned to the
vector's size.  For shared memory the question is answered by the composition
*distributed → offset* (``dist.invert_and_compose(shared)``); for global memory by the
distributed layout and what is known of the pointer's strides and alignment.  Both are
capped at 16 bytes, the widest ``ld``/``st`` a thread can issue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from .linear import LinearLayout, is_power_of_two

MAX_VECTOR_BYTES = 16


def as_linear_layout(layout, shape: Sequence[int] | None, what: str) -> LinearLayout:
    """``layout`` itself if it is a :class:`LinearLayout`, else ``layout.to_linear_layout(shape)``.

    ``what`` names the parameter in error messages.
    """
    if isinstance(layout, LinearLayout):
        if shape is not None:
            sizes = [layout.out_dim_size(o) for o in layout.out_dims]
            if sizes != list(shape):
                raise ValueError(f"{what} is a linear layout of shape {sizes}, but shape {list(shape)} was given")
        return layout
    if not hasattr(layout, "to_linear_layout"):
        raise ValueError(f"{what} must be a layout (with to_linear_layout) or a LinearLayout, got {layout!r}")
    if shape is None:
        raise ValueError(f"{what} is a {type(layout).__name__}: a shape is needed to make its linear layout")
    return layout.to_linear_layout(list(shape))


def check_bitwidth(element_bitwidth) -> int:
    """The element size in bits: an int, or an object with ``primitive_bitwidth`` or ``itemsize`` (bytes)."""
    if hasattr(element_bitwidth, "primitive_bitwidth"):
        element_bitwidth = element_bitwidth.primitive_bitwidth
    elif hasattr(element_bitwidth, "itemsize"):
        element_bitwidth = 8 * element_bitwidth.itemsize
    if not is_power_of_two(element_bitwidth) or element_bitwidth > 64:
        raise ValueError(f"element_bitwidth must be a power of two from 1 to 64, got {element_bitwidth!r}")
    return element_bitwidth


def distinct_register_bits(layout: LinearLayout) -> list:
    """Register bits that select a new element: bits whose basis is not a combination of
    earlier register bases.  The others only repeat elements the thread already has."""
    free = layout.sublayout(["register"], layout.out_dims).free_variable_masks()["register"]
    return [i for i in range(layout.in_dim_size_log2("register")) if not (free >> i) & 1]


@dataclass(frozen=True)
class SharedVector:
    """How a distributed tensor is cut into vectors for ``ld.shared``/``st.shared``.

    ``register_bits[i]`` is the register bit that moves the access one ``2**i`` elements
    further in shared memory; together they address the ``elements`` of one vector.
    ``other_bits`` are the remaining distinct register bits: each combination of them is
    one instruction.  Register bits in neither list repeat data (broadcast) and are skipped.
    """

    elements: int
    element_bitwidth: int
    register_bits: Tuple[int, ...]
    other_bits: Tuple[int, ...]

    @property
    def bytes(self) -> int:
        return max(1, self.elements * self.element_bitwidth // 8)

    def register_groups(self) -> np.ndarray:
        """Register indices of every vector: shape (instructions, elements), element order."""
        within = _subset_sums(self.register_bits)
        starts = _subset_sums(self.other_bits)
        return starts[:, None] | within[None, :]


def _subset_sums(bits: Sequence[int]) -> np.ndarray:
    """Every integer whose set bits are a subset of ``bits``, ordered by ``bits`` as digits."""
    out = np.zeros(1, dtype=np.int64)
    for b in bits:
        out = np.concatenate([out, out | (1 << b)])
    return out


def vector_of_offsets(to_offset: LinearLayout, element_bitwidth: int, max_vector_bytes: int = MAX_VECTOR_BYTES) -> SharedVector:
    """The widest vectorization of a map ``register, lane, warp, … → offset``.

    Vector bit ``i`` needs a distinct register bit whose basis is exactly offset ``2**i``;
    every other basis (other registers, lanes, warps, blocks) must keep the low offset bits
    at zero, so each vector starts aligned and its elements stay in order.  Widths are
    capped at ``max_vector_bytes``.
    """
    bits = check_bitwidth(element_bitwidth)
    offsets = to_offset.sublayout(to_offset.in_dims, ["offset"])
    regs = distinct_register_bits(offsets)
    reg_offsets = {i: offsets.basis("register", i)[0] for i in regs}
    others = [v[0] for d in offsets.in_dims if d != "register" for v in offsets.bases[d]]
    chosen: list = []
    while (2 << len(chosen)) * bits <= 8 * max_vector_bytes:
        k = len(chosen)
        match = [i for i in regs if i not in chosen and reg_offsets[i] == 1 << k]
        if not match:
            break
        rest = others + [reg_offsets[i] for i in regs if i not in chosen and i != match[0]]
        if any(o & ((2 << k) - 1) for o in rest):
            break
        chosen.append(match[0])
    return SharedVector(1 << len(chosen), bits, tuple(chosen), tuple(i for i in regs if i not in chosen))


def shared_vectorization(distributed, shared, shape=None, element_bitwidth=32, max_vector_bytes=MAX_VECTOR_BYTES) -> SharedVector:
    """The vectors in which ``distributed`` registers are stored to / loaded from ``shared``.

    ``distributed`` and ``shared`` are layout objects (with ``shape``) or linear layouts;
    ``max_vector_bytes`` may be lowered to the shared buffer's known alignment.
    """
    dist = as_linear_layout(distributed, shape, "distributed")
    smem = as_linear_layout(shared, shape, "shared")
    if not smem.has_in_dim("offset"):
        raise ValueError(f"shared must have the input dimension 'offset', got {smem.in_dims}")
    return vector_of_offsets(dist.invert_and_compose(smem), element_bitwidth, max_vector_bytes)


def shared_vector_width(distributed, shared, shape=None, element_bitwidth=32, max_vector_bytes=MAX_VECTOR_BYTES) -> int:
    """Elements per ``ld.shared``/``st.shared`` of ``distributed`` data in ``shared``."""
    return shared_vectorization(distributed, shared, shape, element_bitwidth, max_vector_bytes).elements


def aligned_register_run(layout: LinearLayout, dim: int, limit: int | None = None) -> int:
    """The largest ``2**k`` (at most ``limit``) such that registers ``0 … 2**k-1`` step
    ``1, 2, 4, …`` along output ``dim`` and every other basis keeps ``dim``'s coordinate a
    multiple of ``2**k``: each group of ``2**k`` registers then holds consecutive elements
    starting at an aligned coordinate (one vector access when the memory is contiguous)."""
    regs = [list(v) for v in layout.bases.get("register", [])]
    others = [list(v) for d in layout.in_dims if d != "register" for v in layout.bases[d]]
    k = 0
    while k < len(regs) and (limit is None or (2 << k) <= limit):
        step = [0] * len(regs[k])
        step[dim] = 1 << k
        if regs[k] != step or any(v[dim] & ((2 << k) - 1) for v in others + regs[k + 1:]):
            break
        k += 1
    return 1 << k


def global_vector_width(
    layout,
    shape=None,
    element_bitwidth=32,
    *,
    strides: Sequence[int] | None = None,
    base_alignment: int = 16,
    max_vector_bytes: int = MAX_VECTOR_BYTES,
) -> int:
    """Elements per vectorized global ``ld``/``st`` of a tensor held in ``layout``.

    The tensor's element ``(i0, i1, …)`` lives at ``base + sum(i_d * strides[d])`` elements;
    ``strides`` defaults to a dense row-major tensor of ``shape``.  A stride matters only
    through its largest power-of-two divisor, so a stride known only to be divisible by 16
    may be given as 16.  ``base_alignment`` is the known byte alignment of ``base``.

    Registers ``0 … v-1`` form a vector when register bit ``i`` steps ``2**i`` along a
    stride-1 dimension, every other basis keeps that coordinate a multiple of ``v`` and every
    vector's start address is aligned to its size.
    """
    ll = as_linear_layout(layout, shape, "layout")
    bits = check_bitwidth(element_bitwidth)
    sizes = [ll.out_dim_size(o) for o in ll.out_dims]
    if strides is None:
        strides = [int(np.prod(sizes[d + 1 :], dtype=np.int64)) for d in range(len(sizes))]
    strides = list(strides)
    if len(strides) != len(sizes) or any(not isinstance(s, (int, np.integer)) or s < 0 for s in strides):
        raise ValueError(f"strides must be {len(sizes)} non-negative ints, one per dimension, got {strides}")
    if not is_power_of_two(base_alignment):
        raise ValueError(f"base_alignment must be a power of two (bytes), got {base_alignment!r}")
    if not ll.has_in_dim("register") or ll.in_dim_size("register") == 1:
        return 1
    first = ll.basis("register", 0)
    nonzero = [d for d, c in enumerate(first) if c]
    if len(nonzero) != 1 or first[nonzero[0]] != 1 or strides[nonzero[0]] != 1:
        return 1
    c = nonzero[0]
    # Largest aligned size, in bits, that every vector start address is sure to have.
    align_bits = 8 * min(base_alignment, max_vector_bytes)
    for d, s in enumerate(strides):
        if d != c and sizes[d] > 1 and s:
            align_bits = min(align_bits, (s & -s) * bits)
    return aligned_register_run(ll, c, align_bits // bits)
