"""Views of SharedLinearLayout buffers (``index``/``slice``/``permute``/``reshape``) against the buffer itself.

Each view must reach every element at the byte the whole buffer keeps it at: the properties below
compare :func:`gluonkit.ir.memdesc.view_to_offset` of the view with the buffer's own map on random
invertible linear layouts (dimensions of size 1 included: Gluon 3.9 tutorial 11's 5-D scale
buffers have them).  ``tests/test_triton39_crosscheck.py`` compares the resulting layouts with
Triton 3.9's.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gluonkit.ir.memdesc import permuted_layout, reshaped_layout, slice_xor, view_to_offset
from gluonkit.ir.types import SharedMemoryDescType, uint8
from gluonkit.layouts import SharedLinearLayout


@st.composite
def linear_buffers(draw, max_rank=5, max_bits=8):
    """A random shape (powers of two, 1 allowed) and an invertible SharedLinearLayout of it: the unit
    vectors of every coordinate bit in a random order, each XOR-ed with some earlier ones (a swizzle)."""
    rank = draw(st.integers(1, max_rank))
    logs = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank).filter(lambda ls: 0 < sum(ls) <= max_bits))
    shape = tuple(1 << n for n in logs)
    units = [[(1 << b) if d == dim else 0 for d in range(rank)] for dim in range(rank) for b in range(logs[dim])]
    order = draw(st.permutations(range(len(units))))
    bases = []
    for i in order:
        vector = list(units[i])
        for j in draw(st.lists(st.sampled_from(order), max_size=2)):
            if j in order[:order.index(i)]:  # only earlier ones: stays invertible (triangular)
                vector = [a ^ b for a, b in zip(vector, units[j])]
        bases.append(vector)
    return shape, SharedLinearLayout(bases, alignment=128)


def _offsets(ty) -> np.ndarray:
    """The element offset of every coordinate of view ``ty`` (row-major over its shape)."""
    table = view_to_offset(ty).table()[:, 0]  # dim0 fastest
    return table.reshape(tuple(reversed(ty.shape))).transpose(tuple(reversed(range(len(ty.shape)))))


def _buffer(shape, layout) -> SharedMemoryDescType:
    return SharedMemoryDescType(uint8, shape, layout, shape)


@given(linear_buffers())
def test_the_layout_shape_is_gluons(buffer):
    """Gluon: per dimension, the next power of two above the largest coordinate of a basis (1 when none)."""
    shape, layout = buffer
    largest = [max([0] + [v[d] for v in layout.offset_bases]) for d in range(len(shape))]
    assert layout.shape == tuple(1 << m.bit_length() for m in largest) == shape


@given(linear_buffers(), st.data())
def test_permute_keeps_every_element_in_place(buffer, data):
    shape, layout = buffer
    order = data.draw(st.permutations(range(len(shape))))
    ty = _buffer(shape, layout)
    view = _buffer(tuple(shape[o] for o in order), permuted_layout(ty, order))
    np.testing.assert_array_equal(_offsets(view), _offsets(ty).transpose(order))


@given(linear_buffers(), st.data())
def test_reshape_keeps_every_element_in_place(buffer, data):
    shape, layout = buffer
    total = int(np.prod(shape)).bit_length() - 1
    cuts = sorted(data.draw(st.lists(st.integers(0, total), max_size=4)))
    new_shape = tuple(1 << (b - a) for a, b in zip([0] + cuts, cuts + [total]))
    ty = _buffer(shape, layout)
    view = _buffer(new_shape, reshaped_layout(ty, new_shape))
    np.testing.assert_array_equal(_offsets(view).reshape(-1), _offsets(ty).reshape(-1))


@given(linear_buffers(max_rank=4), st.data())
def test_index_of_a_stage_reaches_the_tile(buffer, data):
    """``[stages] + shape`` with a layout of ``shape``: stage s is the tile at s * tile size."""
    shape, layout = buffer
    stages = data.draw(st.sampled_from([1, 2, 4]))
    ty = SharedMemoryDescType(uint8, (stages,) + shape, layout, (stages,) + shape)
    whole = _offsets(ty)
    tile = SharedMemoryDescType(uint8, shape, layout, shape)
    for s in range(stages):
        np.testing.assert_array_equal(whole[s], _offsets(tile) + s * int(np.prod(shape)))


@given(linear_buffers(), st.data())
def test_slice_reaches_the_sliced_elements(buffer, data):
    shape, layout = buffer
    dim = data.draw(st.sampled_from([d for d, s in enumerate(shape) if s > 1] or [0]))
    length = data.draw(st.sampled_from([1 << i for i in range(shape[dim].bit_length())]))
    start = data.draw(st.sampled_from(range(0, shape[dim], length)))
    ty = _buffer(shape, layout)
    sliced = SharedMemoryDescType(uint8, shape[:dim] + (length,) + shape[dim + 1:], layout, shape)
    expect = np.take(_offsets(ty), range(start, start + length), axis=dim)
    np.testing.assert_array_equal(_offsets(sliced) ^ slice_xor(ty, dim, start), expect)


def test_tutorial_11_unswizzles_the_packed_scale_block():
    """The 5-D TMA box of packed scale blocks viewed as [128 * REP_M, 4 * REP_K] (Gluon 3.9 tutorial 11)."""
    from gluonkit.layouts import NVMMASharedLayout
    for rep_m, rep_k in itertools.product([1, 2], [1, 2]):
        box = (1, rep_m, rep_k, 2, 256)
        ty = SharedMemoryDescType(uint8, box, NVMMASharedLayout(0, 8, rank=5), box)
        five = (rep_m, rep_k, 32, 4, 4)
        ty = _buffer(five, reshaped_layout(ty, five))
        order = (0, 3, 2, 1, 4)
        ty = _buffer(tuple(five[o] for o in order), permuted_layout(ty, order))
        flat = (128 * rep_m, 4 * rep_k)
        view = _buffer(flat, reshaped_layout(ty, flat))
        offsets = _offsets(view)
        rows, scales = np.meshgrid(np.arange(flat[0]), np.arange(flat[1]), indexing="ij")
        # scale (row, k) of the packed block layout: block (row // 128, k // 4), then 32 x 16 bytes
        block = (rows // 128 * rep_k + scales // 4) * 512
        np.testing.assert_array_equal(offsets, block + 16 * (rows % 32) + 4 * (rows % 128 // 32) + scales % 4)
        assert view.layout.alignment == 128
