"""Shared-memory bank conflicts of a warp's ``ld.shared``/``st.shared``, from linear layouts.

Shared memory has 32 banks of 4 bytes; 32-bit word ``w`` lives in bank ``w % 32``.  One
*wavefront* serves up to 128 bytes: all 32 lanes when each moves at most 4 bytes, 16 lanes
for 8-byte vectors, 8 lanes for 16-byte vectors.  Within a wavefront, lanes that touch the
same word share it; distinct words in one bank are served one after another.  A
wavefront's cost is therefore the largest number of distinct words in any bank.

Following Gluon's ``bank_conflicts``, the answer is the number of *extra* wavefronts each
wavefront needs (0 = conflict-free).  Because every map here is linear over GF(2), the words
of a wavefront are a coset of one subspace ``W`` of word indices, every wavefront has the same
cost, and that cost is ``2 ** (dim W - rank of W's bank bits)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .linear import LinearLayout, gf2_rank
from .vectorize import (
    MAX_VECTOR_BYTES,
    SharedVector,
    as_linear_layout,
    check_bitwidth,
    vector_of_offsets,
)

NUM_BANKS = 32
BANK_BITS = 32
WAVEFRONT_BYTES = NUM_BANKS * BANK_BITS // 8


@dataclass(frozen=True)
class SharedAccess:
    """One warp's access of a distributed tensor in shared memory.

    ``vector``: how registers are grouped into ``ld``/``st`` instructions; ``instructions``:
    per thread; ``lanes_per_wavefront``: lanes served together; ``wavefronts``: the warp's
    total; ``conflicts``: extra wavefronts per wavefront (Gluon's ``bank_conflicts``).
    """

    vector: SharedVector
    instructions: int
    lanes_per_wavefront: int
    wavefronts: int
    conflicts: int


def analyze_offsets(to_offset: LinearLayout, element_bitwidth, max_vector_bytes: int = MAX_VECTOR_BYTES) -> SharedAccess:
    """The access of a map ``register, lane, warp, … → offset`` (elements), vectorized as wide as it can be."""
    bits = check_bitwidth(element_bitwidth)
    vec = vector_of_offsets(to_offset, bits, max_vector_bytes)
    offsets = to_offset.sublayout(to_offset.in_dims, ["offset"])
    words_per_access = max(1, vec.elements * bits // BANK_BITS)
    lanes = 32 // words_per_access
    lane_bases = offsets.bases.get("lane", [])[: lanes.bit_length() - 1]
    # The first words of a wavefront's elements span W: the images of the vector's register
    # bases and of the wavefront's lane bases.  (The further words of a 64-bit element add
    # an odd word to every even one: a new bank each time, so they change no count.)
    gens = [_words(offsets.basis("register", i)[0], bits) for i in vec.register_bits]
    gens += [_words(v[0], bits) for v in lane_bases]
    span = gf2_rank(gens)
    bank_span = gf2_rank([g & (NUM_BANKS - 1) for g in gens])
    per_wavefront = 1 << (span - bank_span)
    instructions = len(vec.register_groups())
    wavefronts = instructions * (32 // lanes) * per_wavefront
    return SharedAccess(vec, instructions, lanes, wavefronts, per_wavefront - 1)


def _words(offset: int, bits: int) -> int:
    """Word index of element ``offset``'s first bit (a linear map: a shift)."""
    return (offset * bits) // BANK_BITS


def analyze_shared_access(distributed, shared, shape=None, element_bitwidth=32, max_vector_bytes: int = MAX_VECTOR_BYTES) -> SharedAccess:
    """Vectors, wavefronts and conflicts of storing/loading ``distributed`` data in ``shared``.

    Loads and stores of one pair of layouts touch the same addresses, so they cost the same.
    """
    dist = as_linear_layout(distributed, shape, "distributed")
    smem = as_linear_layout(shared, shape, "shared")
    if not smem.has_in_dim("offset"):
        raise ValueError(f"shared must have the input dimension 'offset', got {smem.in_dims}")
    return analyze_offsets(dist.invert_and_compose(smem), element_bitwidth, max_vector_bytes)


def bank_conflicts(distributed, shared, shape=None, element_bitwidth=32, max_vector_bytes: int = MAX_VECTOR_BYTES) -> int:
    """Extra wavefronts per wavefront when a warp reads or writes ``distributed`` data in ``shared``.

    Gluon's ``bank_conflicts(distr_ty, shared_ty)`` with the type's parts spelled out:
    ``distributed`` and ``shared`` are layout objects (then ``shape`` is required) or linear
    layouts, ``element_bitwidth`` an int or a dtype-like object.  Accesses are vectorized up
    to ``max_vector_bytes`` (16) per thread; 0 means conflict-free.
    """
    return analyze_shared_access(distributed, shared, shape, element_bitwidth, max_vector_bytes).conflicts
