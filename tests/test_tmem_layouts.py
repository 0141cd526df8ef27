"""Tensor-memory layouts and tcgen05.ld/st register layouts: hand derivations and PTX facts."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluonkit.layouts.distributed import DistributedLinearLayout
from gluonkit.layouts.tmem import TensorMemoryLayout, TensorMemoryScalesLayout, get_tmem_reg_layout

ROWS_128 = [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0], [32, 0], [64, 0]]


def test_tmem_128xN_block_is_row_and_column_identity():
    # M=128: TMEM lane r holds row r; packed column c holds column c.
    ll = TensorMemoryLayout((128, 64), col_stride=1).to_linear_layout([128, 64])
    assert ll.bases == {"row": ROWS_128, "col": [[0, 1 << i] for i in range(6)]}


def test_tmem_unpacked_16_bit_leaves_the_low_slot_empty():
    # col_stride 2: each 32-bit column holds one element, its second slot is unused.
    ll = TensorMemoryLayout((128, 32), col_stride=2).to_linear_layout([128, 32])
    assert ll.bases["col"] == [[0, 0]] + [[0, 1 << i] for i in range(5)]


def test_tmem_larger_tensor_repeats_blocks_dim0_first():
    # 256 x 128 with 128 x 64 blocks: columns 64.. hold rows 128.., then columns 128.. hold
    # the second column block.
    ll = TensorMemoryLayout((128, 64), 1).to_linear_layout([256, 128])
    assert ll.bases["col"][6:] == [[128, 0], [0, 64]]


def test_tmem_m64_uses_16_lanes_per_quarter():
    # M=64: rows 0..15 in lanes 0..15 of each quarter, rows 16.. in the next quarters
    # (lanes 32, 64); lanes 16..31 of each quarter hold nothing for a single block.
    ll = TensorMemoryLayout((64, 32), 1).to_linear_layout([64, 32])
    assert ll.bases["row"] == [[1, 0], [2, 0], [4, 0], [8, 0], [0, 0], [16, 0], [32, 0]]
    # ...or the second 32-column block when there is one.
    ll = TensorMemoryLayout((64, 32), 1).to_linear_layout([64, 64])
    assert ll.bases["row"][4] == [0, 32]


def test_32x32b_fp32_4_warps():
    # Thread t of warp w reads TMEM lane 32*w + t (lanes -> rows 1..16, warps -> rows 32,
    # 64); register j reads column j (registers -> columns 1..32).
    layout = get_tmem_reg_layout(np.float32, [128, 64], TensorMemoryLayout((128, 64), 1), 4)
    assert layout == DistributedLinearLayout(
        [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [0, 32]],
        [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0]],
        [[32, 0], [64, 0]],
        [],
        [128, 64],
    )


def test_32x32b_fp32_8_warps_split_the_columns():
    # Warps 4..7 reach the same lanes as warps 0..3 (w % 4) and take columns 32..63.
    layout = get_tmem_reg_layout(np.float32, [128, 64], TensorMemoryLayout((128, 64), 1), 8)
    assert layout.reg_bases == tuple((0, 1 << i) for i in range(5))
    assert layout.lane_bases == ((1, 0), (2, 0), (4, 0), (8, 0), (16, 0))
    assert layout.warp_bases == ((32, 0), (64, 0), (0, 32))


def test_32x32b_one_column_8_warps_replicates():
    # Too few columns for the second warpgroup: warp bit 2 is broadcast.
    layout = get_tmem_reg_layout(32, [128, 1], TensorMemoryLayout((128, 1), 1), 8)
    assert layout.warp_bases == ((32, 0), (64, 0), (0, 0))


def test_32x32b_packed_fp16_pairs_share_a_column():
    # Two fp16 per 32-bit column: register bit 0 is the pair, the rest as for fp32.
    layout = get_tmem_reg_layout(np.float16, [128, 64], TensorMemoryLayout((128, 64), 1), 4)
    assert layout.reg_bases == tuple((0, 1 << i) for i in range(6))
    assert layout.warp_bases == ((32, 0), (64, 0))


def test_32x32b_m64_uses_lane_16_for_the_upper_columns():
    # M=64 leaves lanes 16..31 of each quarter empty, so lane 16 reads columns 32.. via
    # the 16x32bx2 form: lanes -> rows 1..8 then column 32; warps -> rows 16, 32.
    layout = get_tmem_reg_layout(np.float32, [64, 64], TensorMemoryLayout((64, 64), 1), 4)
    assert layout.reg_bases == tuple((0, 1 << i) for i in range(5))
    assert layout.lane_bases == ((1, 0), (2, 0), (4, 0), (8, 0), (0, 32))
    assert layout.warp_bases == ((16, 0), (32, 0))


def test_16x256b_fragment():
    # PTX 16x256b: thread t holds lanes t//4 and t//4 + 8, columns 2*(t%4) and +1; the 8
    # columns repeat over registers; lanes 16..31 of the quarter go to a register (4 warps).
    layout = get_tmem_reg_layout(np.float32, [128, 64], TensorMemoryLayout((128, 64), 1), 4, "16x256b")
    assert layout.reg_bases == ((0, 1), (8, 0), (0, 8), (0, 16), (0, 32), (16, 0))
    assert layout.lane_bases == ((0, 2), (0, 4), (1, 0), (2, 0), (4, 0))
    assert layout.warp_bases == ((32, 0), (64, 0))


@given(
    variant=st.sampled_from(["32x32b", "16x64b", "16x128b", "16x256b"]),
    num_warps=st.sampled_from([4, 8, 16]),
    log_n=st.integers(5, 8),  # >= 8 32-bit columns even for packed 8-bit: every atom fits
    bits=st.sampled_from([8, 16, 32]),
    unpacked=st.booleans(),
)
def test_register_layouts_cover_every_element_once(variant, num_warps, log_n, bits, unpacked):
    n = 1 << log_n
    stride = 32 // bits if unpacked else 1
    layout = get_tmem_reg_layout(bits, [128, n], TensorMemoryLayout((128, n), stride), num_warps, variant)
    ll = layout.to_linear_layout()
    assert ll.is_surjective()
    # Only warp bits may replicate (too few columns for all warps); registers and lanes never.
    masks = ll.free_variable_masks()
    assert masks["register"] == 0 and masks["lane"] == 0


@given(num_warps=st.sampled_from([4, 8]), log_n=st.integers(2, 7))
def test_32x32b_warp_reads_its_lane_quarter(num_warps, log_n):
    # PTX: warp w of a warpgroup accesses TMEM lanes 32*(w%4) .. 32*(w%4)+31; with M=128
    # TMEM lane = row, so thread t of warp w holds row 32*(w%4) + t.
    n = 1 << log_n
    ll = get_tmem_reg_layout(32, [128, n], TensorMemoryLayout((128, n), 1), num_warps).to_linear_layout()
    table = ll.table().reshape(num_warps, 32, -1, 2)  # [warp, lane, register, (dim0, dim1)]
    for w in range(num_warps):
        for t in range(32):
            assert (table[w, t, :, 0] == 32 * (w % 4) + t).all()


def test_scales_layout_repeats_rows_in_every_quarter():
    ll = TensorMemoryScalesLayout().to_linear_layout([128, 4])
    # rows 0..31 -> dim0, rows 32/64 repeat; columns 1,2 -> dim1; column 4 -> dim0 32, 8 -> 64.
    assert ll.bases == {
        "row": [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0], [0, 0], [0, 0]],
        "col": [[0, 1], [0, 2], [32, 0], [64, 0]],
    }
    # 32 rows: the dim0-32 column slot is unused.
    assert TensorMemoryScalesLayout().to_linear_layout([32, 4]).bases["col"] == [[0, 1], [0, 2], [0, 0]]


def test_equality_hash_repr():
    a = TensorMemoryLayout((128, 64), 1)
    assert a == TensorMemoryLayout([128, 64], 1) and hash(a) == hash(TensorMemoryLayout((128, 64), 1))
    assert a != TensorMemoryLayout((128, 64), 2)
    assert repr(a) == "TensorMemoryLayout(block=(128, 64), col_stride=1, cga_layout=[], two_ctas=False, fp4_padded=False)"
    assert repr(TensorMemoryScalesLayout()) == "TensorMemoryScalesLayout(cga_layout=[])"


def test_32x32b_splitn_moves_the_half_n_column_bit_into_the_last_register():
    # 64 x 64 on 4 warps: plain 32x32b has lanes 16..31 on columns 32..63; splitn swaps
    # that lane bit with the last register, so splitting N in two halves is register-local.
    plain = get_tmem_reg_layout(32, [64, 64], TensorMemoryLayout((64, 64), 1), 4, "32x32b")
    split = get_tmem_reg_layout(32, [64, 64], TensorMemoryLayout((64, 64), 1), 4, "32x32b_splitn")
    assert plain.reg_bases[-1] == (0, 16) and plain.lane_bases[-1] == (0, 32)
    assert split.reg_bases == plain.reg_bases[:-1] + ((0, 32),)
    assert split.lane_bases == plain.lane_bases[:-1] + ((0, 16),)
    with pytest.raises(ValueError, match="16x32bx2 atom is chosen implicitly"):
        get_tmem_reg_layout(32, [64, 64], TensorMemoryLayout((64, 64), 1), 4, "16x32bx2")


def test_cga_layout_gives_one_ctas_share():
    # Two CTAs splitting dim0 ([1, 0]): each holds 128 of the 256 rows, as one 128 x 64 block.
    ll = TensorMemoryLayout((128, 64), 1, [[1, 0]]).to_linear_layout([256, 64])
    assert ll.bases == {"row": ROWS_128, "col": [[0, 1 << i] for i in range(6)]}
    assert ll.out_dim_sizes == {"dim0": 128, "dim1": 64}


def test_two_cta_m64_puts_the_upper_half_of_the_columns_in_the_upper_lanes():
    # cta_group::2 with M=64 per CTA: lanes 64..127 hold columns 32..63 of the CTA's 64 x 64.
    ll = TensorMemoryLayout((64, 64), 1, [[1, 0]], two_ctas=True).to_linear_layout([128, 64])
    assert ll.bases["row"] == [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0], [32, 0], [0, 32]]
    assert ll.bases["col"] == [[0, 1 << i] for i in range(5)]


def test_fp4_padded_gives_each_packed_byte_pair_two_slots():
    ll = TensorMemoryLayout((128, 64), 1, fp4_padded=True).to_linear_layout([128, 64])
    assert ll.bases["col"] == [[0, 0]] + [[0, 1 << i] for i in range(6)]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: TensorMemoryLayout((96, 64), 1), r"block must be \(M, N\) with M in \(64, 128\)"),
        (lambda: TensorMemoryLayout((128, 64), 3), "col_stride must be a power of two"),
        (lambda: TensorMemoryLayout((128, 64), 1, [[3, 0]]), "cga_layout.* power-of-two"),
        (lambda: TensorMemoryLayout((128, 64), 1, two_ctas=True), r"two_ctas needs a cga_layout .* \[1, 0\]"),
        (lambda: TensorMemoryLayout((128, 64), 1).to_linear_layout([64, 64]), "smaller than one block"),
        (lambda: get_tmem_reg_layout(32, [128, 64], TensorMemoryLayout((128, 64), 1, [[1, 0]]), 4), "smaller than one block"),
        (lambda: TensorMemoryLayout((128, 64), 1).to_linear_layout([64, 64]), "smaller than one block"),
        (lambda: get_tmem_reg_layout(32, [128, 64], TensorMemoryLayout((128, 64), 1), 2), "num_warps must be"),
        (lambda: get_tmem_reg_layout(32, [128, 64], TensorMemoryLayout((128, 64), 1), 4, "8x8b"), "instr_variant"),
        (lambda: get_tmem_reg_layout(32, [128, 64], TensorMemoryLayout((128, 64), 2), 4), "col_stride"),
        (lambda: get_tmem_reg_layout(64, [128, 64], TensorMemoryLayout((128, 64), 1), 4), "element_ty"),
        (lambda: get_tmem_reg_layout(32, [128, 4], TensorMemoryLayout((128, 4), 1), 4, "16x256b"), "cannot access"),
    ],
)
def test_invalid_parameters_name_the_parameter(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_split_tmem_layout_gives_a_register_layout_split_the_same_way():
    """Each CTA of a pair loads its own TMEM share: the CTA bit moves by the per-CTA rows."""
    layout = TensorMemoryLayout((128, 64), 1, [[1, 0]], two_ctas=True)
    split = get_tmem_reg_layout(32, [256, 64], layout, 4).to_linear_layout([256, 64])
    one = get_tmem_reg_layout(32, [128, 64], TensorMemoryLayout((128, 64), 1), 4).to_linear_layout([128, 64])
    assert split.bases["block"] == [[128, 0]]
    assert all(split.bases[d] == one.bases[d] for d in ("register", "lane", "warp"))
