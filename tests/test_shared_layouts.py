"""Shared-memory layouts: hand-derived bases, the PTX swizzle formula, bijectivity."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluonkit.layouts.shared import (
    NVMMASharedLayout,
    PaddedSharedLayout,
    SharedLinearLayout,
    SwizzledSharedLayout,
)

# 128-byte swizzle of 16-bit elements.  A row is 128 bytes = 64 elements, a 16-byte chunk
# 8 elements.  Offsets 1..32 walk the columns; offset 64 starts row 1, whose chunk index
# is XORed with 1 (8 columns); row 2 XORs chunk 2 (16 columns), row 4 chunk 4 (32
# columns); rows 8, 16, 32 start a new 8-row pattern (no XOR).
FP16_128B_64x64 = [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [0, 32],
                   [1, 8], [2, 16], [4, 32], [8, 0], [16, 0], [32, 0]]


def test_nvmma_128b_fp16_64x64():
    for bits in (16,):  # fp16 and bf16 share the element size
        ll = NVMMASharedLayout(128, bits).to_linear_layout([64, 64])
        assert ll.bases == {"offset": FP16_128B_64x64, "block": []}
        assert ll.out_dim_sizes == {"dim0": 64, "dim1": 64}


def test_nvmma_128b_fp16_128x64_adds_a_row_bit():
    # Twice the rows: one more plain row bit (row 64) on top.
    ll = NVMMASharedLayout(128, 16).to_linear_layout([128, 64])
    assert ll.bases["offset"] == FP16_128B_64x64 + [[64, 0]]


def test_nvmma_wider_than_the_swizzle_stacks_whole_boxes():
    # 128 fp16 columns are two 128-byte TMA boxes: the second box is the highest bit.
    ll = NVMMASharedLayout(128, 16).to_linear_layout([64, 128])
    assert ll.bases["offset"] == FP16_128B_64x64 + [[0, 64]]


def test_nvmma_64b_fp16_phases_change_every_two_rows():
    # 64-byte rows = 32 elements; chunk XOR (row // 2) % 4: row 1 -> 0, row 2 -> chunk 1
    # (8 columns), row 4 -> chunk 2 (16 columns).
    ll = NVMMASharedLayout(64, 16).to_linear_layout([8, 32])
    assert ll.bases["offset"] == [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [1, 0], [2, 8], [4, 16]]


def test_nvmma_transposed_swaps_the_roles_of_the_dims():
    ll = NVMMASharedLayout(128, 16, transposed=True).to_linear_layout([64, 64])
    assert ll.bases["offset"] == [[c, r] for r, c in FP16_128B_64x64]


def _swizzled_byte(byte: int, swizzle: int) -> int:
    """The PTX / TMA swizzle: byte-address bits [4, 4+k) ^= bits [7, 7+k), k = log2(swizzle/16)."""
    mask = swizzle // 16 - 1
    return byte ^ (((byte >> 7) & mask) << 4)


@given(
    swizzle=st.sampled_from([32, 64, 128]),
    bits=st.sampled_from([8, 16, 32]),
    extra_rows=st.integers(0, 3),
)
def test_nvmma_matches_the_ptx_swizzle_formula(swizzle, bits, extra_rows):
    cols = swizzle * 8 // bits  # one box width
    rows = 8 << extra_rows
    ll = NVMMASharedLayout(swizzle, bits).to_linear_layout([rows, cols])
    # Where does element (r, c) live?  Compare with the swizzled row-major byte address.
    where = ll.sublayout(["offset"], ["dim0", "dim1"]).invert()
    esize = bits // 8
    for r in range(rows):
        for c in range(0, cols, max(1, cols // 8)):
            offset = where.apply({"dim0": r, "dim1": c})["offset"]
            assert offset * esize == _swizzled_byte((r * cols + c) * esize, swizzle)


@given(
    swizzle=st.sampled_from([0, 32, 64, 128]),
    bits=st.sampled_from([8, 16, 32, 64]),
    transposed=st.booleans(),
    log_rows=st.integers(3, 7),
    log_extra_cols=st.integers(0, 2),
)
def test_nvmma_is_a_bijection_that_keeps_16_byte_chunks_contiguous(swizzle, bits, transposed, log_rows, log_extra_cols):
    cols = max(16, swizzle) * 8 // bits << log_extra_cols
    shape = [cols, 1 << log_rows] if transposed else [1 << log_rows, cols]
    ll = NVMMASharedLayout(swizzle, bits, transposed=transposed).to_linear_layout(shape)
    assert ll.is_invertible()
    if swizzle == 0:
        return  # row-major whatever `transposed` says (as in Triton); rows may be < 16 bytes
    contig = 0 if transposed else 1
    vec = 128 // bits
    table = ll.table()
    # Each aligned run of `vec` offsets (16 bytes) is one row's run of consecutive elements.
    for start in range(0, len(table), vec):
        run = table[start : start + vec]
        assert (run[:, 1 - contig] == run[0, 1 - contig]).all()
        assert (np.diff(run[:, contig]) == 1).all()


def test_nvmma_fp4_padded_aliases_padding_bytes():
    # 64 bytes of packed fp4 pairs padded to 128: offsets 8..15 of every 16 repeat 0..7.
    ll = NVMMASharedLayout(128, 8, fp4_padded=True).to_linear_layout([8, 64])
    assert ll.bases["offset"][:7] == [[0, 1], [0, 2], [0, 4], [0, 0], [0, 8], [0, 16], [0, 32]]
    # Row r's chunk (16 padded bytes = 8 data bytes) is XORed with r: 8 data columns.
    assert ll.bases["offset"][7:] == [[1, 8], [2, 16], [4, 32]]


def test_nvmma_cga_layout_splits_rows_over_two_ctas():
    ll = NVMMASharedLayout(128, 16, cga_layout=[[1, 0]]).to_linear_layout([128, 64])
    assert ll.bases["offset"] == FP16_128B_64x64  # each CTA holds 64 rows
    assert ll.bases["block"] == [[64, 0]]


def _default_rule(shape, bits, transposed):
    """Gluon's rule restated: widest of 128/64/32 dividing the contiguous byte size."""
    if transposed:
        shape = shape[1:] + shape[:1]
    nbytes = shape[-1] * bits // 8
    rows = int(np.prod(shape[:-1]))
    if len(shape) < 2 or rows < 8:
        return 0
    return next((w for w in (128, 64, 32) if nbytes >= w and nbytes % w == 0), 0)


class _Dtype:
    def __init__(self, bits):
        self.primitive_bitwidth = bits


@given(
    shape=st.lists(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 256]), min_size=1, max_size=3),
    bits=st.sampled_from([8, 16, 32, 64]),
    transposed=st.booleans(),
)
def test_get_default_for_picks_the_widest_legal_swizzle(shape, bits, transposed):
    layout = NVMMASharedLayout.get_default_for(shape, _Dtype(bits), transposed=transposed)
    assert layout.swizzle_byte_width == _default_rule(list(shape), bits, transposed)
    assert (layout.element_bitwidth, layout.rank, layout.transposed) == (bits, len(shape), transposed)


def test_get_default_for_accepts_ints_and_numpy_dtypes():
    assert NVMMASharedLayout.get_default_for([64, 64], np.float16) == NVMMASharedLayout(128, 16)
    assert NVMMASharedLayout.get_default_for([64, 16], 16) == NVMMASharedLayout(32, 16)
    assert NVMMASharedLayout.get_default_for([4, 64], np.float32) == NVMMASharedLayout(0, 32)


def test_swizzled_shared_example():
    # vec=2, per_phase=2, max_phase=4 on 16x16: columns are the identity; row r moves
    # 2 * ((r // 2) % 4) columns: r=1 -> 0, r=2 -> 2, r=4 -> 4, r=8 -> 2*(4%4) = 0.
    ll = SwizzledSharedLayout(2, 2, 4, [1, 0]).to_linear_layout([16, 16])
    assert ll.bases["offset"] == [[0, 1], [0, 2], [0, 4], [0, 8], [1, 0], [2, 2], [4, 4], [8, 0]]


def test_swizzled_shared_column_major_and_rank_3():
    # order [0, 1, 2]: dim0 fastest; row (dim1) 1 moves vec=4 along dim0; dim2 stacks on top.
    ll = SwizzledSharedLayout(4, 1, 2, [0, 1, 2]).to_linear_layout([8, 2, 2])
    assert ll.bases["offset"] == [[1, 0, 0], [2, 0, 0], [4, 0, 0], [4, 1, 0], [0, 0, 1]]


@given(
    vec=st.sampled_from([1, 2, 4, 8]),
    per_phase=st.sampled_from([1, 2, 4]),
    max_phase=st.sampled_from([1, 2, 4, 8]),
    log_shape=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    data=st.data(),
)
def test_swizzled_shared_is_a_bijection(vec, per_phase, max_phase, log_shape, data):
    order = data.draw(st.permutations(list(range(len(log_shape)))))
    shape = [1 << k for k in log_shape]
    ll = SwizzledSharedLayout(vec, per_phase, max_phase, order).to_linear_layout(shape)
    assert ll.is_invertible()
    assert ll.out_dim_sizes == {f"dim{i}": s for i, s in enumerate(shape)}


def test_shared_linear_layout_round_trips_its_bases():
    layout = SharedLinearLayout([[0, 1], [0, 2], [1, 0]], block_bases=[[2, 0]])
    assert layout.shape == (4, 4)
    assert layout.to_linear_layout([4, 4]).bases == {"offset": [[0, 1], [0, 2], [1, 0]], "block": [[2, 0]]}
    with pytest.raises(ValueError, match="defined for shape"):
        layout.to_linear_layout([8, 4])


def test_padded_shared_offsets_and_identity_component():
    # Gluon's docstring example: pairs [[2, 1], [4, 2]] put e0 e1 p e2 e3 p p p e4 ...
    layout = PaddedSharedLayout.with_identity_for([[2, 1], [4, 2]], [4, 2], [1, 0])
    assert [layout.padded_offset(i) for i in range(6)] == [0, 1, 3, 4, 8, 9]
    assert layout.to_linear_layout([4, 2]).bases == {"offset": [[0, 1], [1, 0], [2, 0]], "block": []}
    # A row permutation: rows 0, 2, 4, 6 first (docstring's second example).
    permuted = PaddedSharedLayout([[8, 1]], [[0, 1], [0, 2], [2, 0], [4, 0], [1, 0]], [], [8, 4])
    assert permuted.to_linear_layout().apply({"offset": 8}) == {"dim0": 4, "dim1": 0}
    assert permuted.padded_offset(8) == 9


def test_equality_hash_and_repr():
    a, b = NVMMASharedLayout(128, 16), NVMMASharedLayout(128, 16, rank=2)
    assert a == b and hash(a) == hash(b) and a != NVMMASharedLayout(64, 16)
    assert repr(a) == ("NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2, "
                       "transposed=False, fp4_padded=False, cga_layout=[])")
    assert repr(SwizzledSharedLayout(1, 1, 1, [1, 0])) == (
        "SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0], cga_layout=[])")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: NVMMASharedLayout(16, 16), r"swizzle_byte_width must be one of \[0, 32, 64, 128\], got 16"),
        (lambda: NVMMASharedLayout(128, 12), "element_bitwidth must be one of"),
        (lambda: NVMMASharedLayout(64, 8, fp4_padded=True), "fp4_padded needs swizzle_byte_width=128"),
        (lambda: NVMMASharedLayout(128, 16).to_linear_layout([64, 32]), "too small for a 128-byte swizzle"),
        (lambda: NVMMASharedLayout(128, 16).to_linear_layout([4, 64]), "smaller than one swizzle pattern"),
        (lambda: NVMMASharedLayout(128, 16, cga_layout=[[0, 1, 0]]), r"cga_layout\[0\] must be 2"),
        (lambda: SwizzledSharedLayout(3, 1, 1, [1, 0]), "vec must be a power of two, got 3"),
        (lambda: SwizzledSharedLayout(1, 1, 1, [1, 1]), "order must be a permutation"),
        (lambda: SharedLinearLayout([]), "offset_bases must not be empty"),
        (lambda: SharedLinearLayout([[1]], alignment=3), "alignment must be a power of two"),
        (lambda: PaddedSharedLayout([[3, 1]], [[1]], [], [2]), "interval_padding_pairs must be"),
        (lambda: PaddedSharedLayout([[2, 1]], [[4]], [], [2]), r"offset_bases\[0\] = \[4\] lies outside"),
    ],
)
def test_invalid_parameters_name_the_parameter(make, message):
    with pytest.raises(ValueError, match=message):
        make()
