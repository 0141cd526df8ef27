"""NVMMADistributedLayout and DotOperandLayout against the PTX ISA fragment figures.

Fragment facts used (PTX ISA, "Matrix fragments for wgmma.mma_async .m64nNk16" and
"Matrix fragments for mma.m16n8k16"):

* wgmma accumulator D (figure "WGMMA .m64nNk16 register fragment layout for accumulator
  matrix D"): warp w of the warpgroup owns rows 16w..16w+15; lane T holds
  d[4k + 2i + j] at row 16w + T/4 + 8i, column 8k + 2(T%4) + j  (i, j in {0,1}).
* wgmma register A, 16-bit types (figure "WGMMA .m64nNk16 register fragment layout for
  matrix A"): the same pattern over a 16 x 16 tile per warp: a[4k + 2i + j] at row
  16w + T/4 + 8i, column 8k + 2(T%4) + j, k in {0,1}.
* mma.m16n8k16 C/D: c[2i + j] at row T/4 + 8i, column 2(T%4) + j.
* mma.m16n8k16 B (16-bit): b[2i + j] at row (K) 2(T%4) + j + 8i, column T/4.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluonkit.layouts.distributed import BlockedLayout, SliceLayout
from gluonkit.layouts.nvmma import DotOperandLayout, NVMMADistributedLayout

LANES = [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]]  # lane T: column 2(T%4), row T/4


def wgmma(warps, n, k=16):
    return NVMMADistributedLayout([3, 0], warps, [16, n, k])


def ptx_wgmma_accumulator(warps, n, shape):
    """Table of (row, col) for every (register, lane, warp), from the PTX figure.

    Warps are column-major (warpgroups stack along M, then further warps along N); a tensor
    larger than the warps' tile repeats it in registers, N first (Triton's repOrder), and
    a smaller one wraps (replication).
    """
    wm, wn = warps
    reps_n = max(1, shape[1] // (n * wn))
    reps_m = max(1, shape[0] // (16 * wm))
    per_tile = n // 2  # d[0 .. N/2) per thread
    rows = []
    for w in range(wm * wn):
        for t in range(32):
            for r in range(per_tile * reps_n * reps_m):
                d, rep = r % per_tile, r // per_tile
                j, i, k = d & 1, (d >> 1) & 1, d >> 2
                row = 16 * (w % wm) + t // 4 + 8 * i + 16 * wm * (rep // reps_n)
                col = 8 * k + 2 * (t % 4) + j + n * (w // wm) + n * wn * (rep % reps_n)
                rows.append([row % shape[0], col % shape[1]])
    return np.array(rows)


# ------------------------------------------------------------------ wgmma accumulator
def test_wgmma_m64n64_four_warps():
    # d0,d1: columns 0,1 -> reg [0,1]; d2,d3: row + 8 -> [8,0]; d4..: columns + 8k -> [0,8],
    # [0,16], [0,32] (N/8 = 8 column groups); warps 1,2 -> rows 16, 32.
    ll = wgmma([4, 1], 64).to_linear_layout([64, 64])
    assert ll.bases == {
        "register": [[0, 1], [8, 0], [0, 8], [0, 16], [0, 32]],
        "lane": LANES,
        "warp": [[16, 0], [32, 0]],
        "block": [],
    }
    # Threads 0..3 of warp 0 hold row 0, columns 0, 2, 4, 6; thread 4 starts row 1.
    assert [tuple(ll.apply({"lane": t}).values()) for t in range(5)] == [(0, 0), (0, 2), (0, 4), (0, 6), (1, 0)]
    # Warp 3, lane 31, d[31] (k=7, i=1, j=1): row 48 + 7 + 8, column 56 + 6 + 1.
    assert ll.apply({"register": 31, "lane": 31, "warp": 3}) == {"dim0": 63, "dim1": 63}


def test_wgmma_m64n128_eight_warps():
    # Warps 4..7 are the second warpgroup: rows 64..127 -> warp bit 2 -> [64, 0].
    ll = wgmma([8, 1], 128).to_linear_layout([128, 128])
    assert ll.bases["register"] == [[0, 1], [8, 0], [0, 8], [0, 16], [0, 32], [0, 64]]
    assert ll.bases["lane"] == LANES
    assert ll.bases["warp"] == [[16, 0], [32, 0], [64, 0]]


def test_wgmma_m64n256_warps_4x2():
    # Column-major warps: the 4 warps of a warpgroup along M, the second warpgroup along N
    # at column N = 256.
    ll = wgmma([4, 2], 256).to_linear_layout([64, 512])
    assert ll.bases["register"] == [[0, 1], [8, 0], [0, 8], [0, 16], [0, 32], [0, 64], [0, 128]]
    assert ll.bases["warp"] == [[16, 0], [32, 0], [0, 256]]


def test_wgmma_repeats_n_first_then_m():
    # Tile 64 x 64 on a 128 x 256 tensor: N repeats (x4) before M (x2): registers [0,64],
    # [0,128], then [64,0] (Triton's repOrder [1, 0]).
    ll = wgmma([4, 1], 64).to_linear_layout([128, 256])
    assert ll.bases["register"] == [[0, 1], [8, 0], [0, 8], [0, 16], [0, 32], [0, 64], [0, 128], [64, 0]]


def test_wgmma_smaller_tensor_broadcasts():
    # Tile 64 x 32 on 16 x 16: the column-16 register and the warps (rows 16, 32) become
    # zero vectors (replicated), registers are kept.
    ll = wgmma([4, 1], 32).to_linear_layout([16, 16])
    assert ll.bases["register"] == [[0, 1], [8, 0], [0, 8], [0, 0]]
    assert ll.bases["warp"] == [[0, 0], [0, 0]]


@pytest.mark.parametrize(
    "warps, n, shape",
    [([4, 1], 64, [64, 64]), ([8, 1], 128, [128, 128]), ([4, 2], 256, [64, 512]), ([4, 2], 64, [256, 256])],
)
def test_wgmma_matches_ptx_figure(warps, n, shape):
    ll = wgmma(warps, n).to_linear_layout(shape)
    np.testing.assert_array_equal(ll.table(), ptx_wgmma_accumulator(warps, n, shape))


@given(
    st.sampled_from([[4, 1], [4, 2], [8, 1], [4, 4], [8, 2]]),
    st.sampled_from([8, 16, 32, 64, 128, 256]),
    st.integers(3, 8),
    st.integers(3, 9),
)
def test_wgmma_property(warps, n, log_m, log_n):
    shape = [1 << log_m, 1 << log_n]
    ll = wgmma(warps, n).to_linear_layout(shape)
    np.testing.assert_array_equal(ll.table(), ptx_wgmma_accumulator(warps, n, shape))
    flat = ll.table() @ np.array([1, shape[0]])
    counts = np.bincount(flat, minlength=shape[0] * shape[1])
    assert counts.min() == counts.max() == ll.total_in_size() // (shape[0] * shape[1])


# ------------------------------------------------------------------------- wgmma A
def test_dot_operand_a_fp16_k_width_2():
    # a0,a1: row T/4, columns 2(T%4)+{0,1} -> reg [0,1]; a2,a3: row + 8 -> [8,0];
    # a4..a7: column + 8 -> [0,8].  Warps along M by 16 as for the accumulator.
    a = DotOperandLayout(0, wgmma([4, 1], 64), k_width=2)
    assert a.to_linear_layout([64, 16]).bases == {
        "register": [[0, 1], [8, 0], [0, 8]],
        "lane": LANES,
        "warp": [[16, 0], [32, 0]],
        "block": [],
    }
    # A bigger tile repeats K first ([0,16]), then M ([64,0]).
    assert a.to_linear_layout([128, 32]).bases["register"] == [[0, 1], [8, 0], [0, 8], [0, 16], [64, 0]]
    assert (a.rank, a.num_warps) == (2, 4)


def test_dot_operand_a_broadcasts_over_n_warps():
    # With warps [4, 2] the second warpgroup computes other columns of D but needs the
    # same rows of A: its warp bit is a zero vector.
    a = DotOperandLayout(0, wgmma([4, 2], 64), k_width=2)
    assert a.to_linear_layout([64, 16]).bases["warp"] == [[16, 0], [32, 0], [0, 0]]


def test_dot_operand_a_k_width_4():
    # 8-bit types: 4 consecutive K per register group -> reg [0,1],[0,2]; lanes step K by
    # 4; rows +8; then the second K half (column 16).
    a = DotOperandLayout(0, wgmma([4, 1], 64, k=32), k_width=4)
    assert a.to_linear_layout([64, 32]).bases == {
        "register": [[0, 1], [0, 2], [8, 0], [0, 16]],
        "lane": [[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
        "warp": [[16, 0], [32, 0]],
        "block": [],
    }


def test_slice_of_dot_operand():
    # Slicing away M (dim 0) of A [64, 16] -> [16]: registers [0,1], [0,8] survive as 1, 8
    # (the [8,0] one becomes zero and is dropped); lanes along M become zeros.
    s = SliceLayout(0, DotOperandLayout(0, wgmma([4, 1], 16, k=8), 2))
    assert s.to_linear_layout([16]).bases == {
        "register": [[1], [8]],
        "lane": [[2], [4], [0], [0], [0]],
        "warp": [[0], [0]],
        "block": [],
    }


# ----------------------------------------------------------------------- mma.sync v2
def test_mma_sync_accumulator():
    # c0,c1: row T/4, columns 2(T%4)+{0,1}; c2,c3: row + 8.  Row-major warps: first along N
    # (column 8), then M (row 16).
    ll = NVMMADistributedLayout([2, 0], [2, 2], [16, 8]).to_linear_layout([32, 16])
    assert ll.bases == {"register": [[0, 1], [8, 0]], "lane": LANES, "warp": [[0, 8], [16, 0]], "block": []}


def test_mma_sync_operands():
    parent = NVMMADistributedLayout([2, 0], [2, 2], [16, 8])
    # A: as wgmma's A tile; warps along N (warp bit 0, row-major) broadcast.
    a = DotOperandLayout(0, parent, 2).to_linear_layout([32, 16])
    assert a.bases == {"register": [[0, 1], [8, 0], [0, 8]], "lane": LANES, "warp": [[0, 0], [16, 0]], "block": []}
    # B [K, N]: b0,b1 at K = 2(T%4)+{0,1} -> reg [1,0]; b2,b3 at K + 8 -> [8,0];
    # lanes: K by 2, 4 then N by 1, 2, 4; warps along N by 8, along M broadcast.
    b = DotOperandLayout(1, parent, 2).to_linear_layout([16, 16])
    assert b.bases == {
        "register": [[1, 0], [8, 0]],
        "lane": [[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
        "warp": [[0, 8], [0, 0]],
        "block": [],
    }


# ------------------------------------------------------------------- value semantics
def test_repr_equality_hash():
    acc = wgmma([4, 1], 64)
    assert repr(acc) == "NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16], cga_layout=[])"
    assert acc == NVMMADistributedLayout((3, 0), (4, 1), (16, 64, 16), cga_layout=[])
    assert acc != wgmma([4, 1], 128)
    a = DotOperandLayout(0, acc, 2)
    assert repr(a) == f"DotOperandLayout(operand_index=0, parent={acc!r}, k_width=2)"
    assert hash(a) == hash(DotOperandLayout(0, wgmma([4, 1], 64), 2))
    assert a != DotOperandLayout(0, acc, 4)
    assert acc.num_warps == 4


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        (([1, 0], [4, 1], [16, 8]), {}, "version must be"),
        (([3, 0], [4, 1], [16, 8]), {}, "instr_shape for version \\[3, 0\\]"),
        (([3, 0], [4, 1], [16, 24, 16]), {}, "instr_shape"),
        (([3, 0], [4, 1], [16, 512, 16]), {}, "instr_shape"),
        (([3, 0], [4, 1], [16, 64, 64]), {}, "instr_shape"),
        (([3, 0], [2, 2], [16, 64, 16]), {}, "warps_per_cta\\[0\\] must be a multiple of 4"),
        (([3, 0], [4, 3], [16, 64, 16]), {}, "warps_per_cta must be"),
        (([3, 0], [4, 1, 1], [16, 64, 16]), {}, "warps_per_cta must be"),
        (([2, 0], [4, 1], [16, 16]), {}, "instr_shape for version \\[2, 0\\]"),
        (([2, 0], [4, 1], [16, 8], [[1, 0]]), {}, "cga_layout"),
    ],
)
def test_nvmma_errors_name_the_parameter(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        NVMMADistributedLayout(*args, **kwargs)


def test_dot_operand_errors():
    with pytest.raises(ValueError, match="operand_index 1 .* version \\[3, 0\\]"):
        DotOperandLayout(1, wgmma([4, 1], 64), 2)
    with pytest.raises(ValueError, match="operand_index must be 0"):
        DotOperandLayout(2, wgmma([4, 1], 64), 2)
    with pytest.raises(ValueError, match="parent must be an NVMMADistributedLayout .* or a BlockedLayout"):
        DotOperandLayout(0, SliceLayout(0, BlockedLayout([1, 1], [8, 4], [4, 1], [1, 0])), 2)
    with pytest.raises(ValueError, match="k_width must be a power of two"):
        DotOperandLayout(0, wgmma([4, 1], 64), 3)
    with pytest.raises(ValueError, match="shape must have rank 2"):
        DotOperandLayout(0, wgmma([4, 1], 64), 2).to_linear_layout([64])


def test_fma_operands_hold_the_whole_k_extent_per_thread():
    # dot_fma operands of a blocked accumulator (k_width 0): A = [M, K] keeps the parent's
    # rows, every thread holds all 32 K elements in registers, and the 8 lanes and the warp
    # bit that the parent spreads along dim1 (K for A) hold copies.
    parent = BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0])
    a = DotOperandLayout(0, parent, 0).to_linear_layout([32, 32]).bases
    assert a["register"] == [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [8, 0], [16, 0]]
    assert a["lane"] == [[0, 0], [0, 0], [0, 0], [1, 0], [2, 0]]
    assert a["warp"] == [[0, 0], [4, 0]]
    # B = [K, N]: K (dim0) is in registers after the parent's 4 N elements per thread.
    b = DotOperandLayout(1, parent, 0).to_linear_layout([32, 32]).bases
    assert b["register"] == [[0, 1], [0, 2], [1, 0], [2, 0], [4, 0], [8, 0], [16, 0]]
    assert b["lane"] == [[0, 4], [0, 8], [0, 16], [0, 0], [0, 0]]
    with pytest.raises(ValueError, match="k_width must be 0 with a BlockedLayout parent"):
        DotOperandLayout(0, parent, 2)
