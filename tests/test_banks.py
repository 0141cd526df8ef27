"""Bank conflicts: hand-derived cases and a brute-force simulation of the shared-memory pipe."""

from collections import Counter

import pytest
from hypothesis import given

from gluonkit.layouts import LinearLayout, NVMMASharedLayout
from gluonkit.layouts.banks import analyze_shared_access, bank_conflicts
from test_vectorize import dist, layout_pair, offsets_per_thread, row_major


def brute_force(d, s, bits):
    """(extra wavefronts per wavefront, wavefronts per warp), counted the hardware's way.

    Each instruction moves one vector per lane.  The lanes are served in phases of 128
    bytes (32 lanes of ≤ 4 bytes, 16 lanes of 8 bytes, 8 lanes of 16 bytes); in a phase,
    the lanes' distinct 4-byte words are grouped by bank (word % 32) and the phase takes as
    many wavefronts as its fullest bank has words.
    """
    groups = analyze_shared_access(d, s, element_bitwidth=bits).vector.register_groups()
    offs = offsets_per_thread(d, s)
    access_bytes = groups.shape[1] * bits // 8
    lanes_per_phase = 32 if access_bytes <= 4 else 128 // access_bytes
    warps = offs.shape[0] // 32
    total = phases = 0
    for warp in range(warps):
        for regs in groups:
            for first in range(0, 32, lanes_per_phase):
                words = set()
                for lane in range(first, first + lanes_per_phase):
                    for r in regs:
                        start_bit = int(offs[32 * warp + lane, r]) * bits
                        words.update(range(start_bit // 32, (start_bit + bits - 1) // 32 + 1))
                total += max(Counter(w % 32 for w in words).values())
                phases += 1
    assert total % phases == 0, "every wavefront of a linear layout costs the same"
    return total // phases - 1, total // warps


def one_d(lane, warp, size, reg=()):
    return dist([list(r) for r in reg], [[x] for x in lane], [[x] for x in warp], [size])


IDENTITY_1D = {n: LinearLayout({"offset": [[1 << i] for i in range(n.bit_length() - 1)], "block": []}, {"dim0": n})
               for n in (32, 64, 128)}


@pytest.mark.parametrize("bits", [32, 16, 8])
def test_consecutive_lanes_are_conflict_free(bits):
    # Lane i, warp w holds element 32w + i: one warp's 32 elements are ≤ 32 consecutive words.
    layout = one_d([1, 2, 4, 8, 16], [32, 64], 128)
    assert bank_conflicts(layout, IDENTITY_1D[128], [128], bits) == 0


def test_stride_two_words_is_a_two_way_conflict():
    # Lane i holds element 2i (fp32): words 0, 2, …, 62 fall in the 16 even banks, two each.
    layout = one_d([2, 4, 8, 16, 32], [1], 64)
    assert bank_conflicts(layout, IDENTITY_1D[64], [64], 32) == 1


def test_vectors_cut_the_warp_into_phases():
    # Two fp32 per lane (8 bytes): 16 lanes per phase, each phase 32 distinct banks.
    layout = one_d([2, 4, 8, 16, 32], [], 64, reg=[[1]])
    acc = analyze_shared_access(layout, IDENTITY_1D[64], [64], 32)
    assert (acc.vector.elements, acc.lanes_per_wavefront, acc.wavefronts, acc.conflicts) == (2, 16, 2, 0)
    # fp64, one per lane: the same 8-byte accesses.
    layout = one_d([1, 2, 4, 8, 16], [], 32)
    acc = analyze_shared_access(layout, IDENTITY_1D[32], [32], 64)
    assert (acc.vector.elements, acc.lanes_per_wavefront, acc.wavefronts, acc.conflicts) == (1, 16, 2, 0)


def test_column_of_a_row_major_tile_hits_one_bank():
    # 32x32 fp32, lane i reads row i of one column: words 32i + c, all in bank c: 32-way.
    layout = dist([], [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0]], [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16]], [32, 32])
    assert bank_conflicts(layout, row_major([32, 32]), [32, 32], 32) == 31


def test_nvmma_128b_swizzle_serves_columns_of_chunks():
    # 64x64 fp16; lane i reads 8 elements (16 bytes) of row i, chunk 0, so 8 lanes per phase.
    # Row-major: rows are 128 bytes apart, the 8 rows' chunks share 4 banks: 8 words each.
    # NVMMA 128B swizzle XORs the chunk index with row % 8 (PTX ISA, "shared memory
    # matrix layout" swizzling modes): the 8 chunks land in distinct banks.
    layout = dist([[0, 1], [0, 2], [0, 4]], [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0]],
                  [[32, 0], [0, 8], [0, 16], [0, 32]], [64, 64])
    assert bank_conflicts(layout, row_major([64, 64]), [64, 64], 16) == 7
    assert bank_conflicts(layout, NVMMASharedLayout(128, 16), [64, 64], 16) == 0


def test_blocked_rows_and_columns_of_a_64x64_fp16_tile():
    from gluonkit.layouts.distributed import BlockedLayout

    # 8 fp16 (16 bytes) per thread along dim1, 8 lanes per 64-element row: each phase of
    # 8 lanes reads one whole 128-byte row, conflict-free, swizzled or not.
    rows = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    assert bank_conflicts(rows, row_major([64, 64]), [64, 64], 16) == 0
    assert bank_conflicts(rows, NVMMASharedLayout(128, 16), [64, 64], 16) == 0
    # 8 fp16 per thread along dim0 (no vector in a row-major tile); lanes: 8 rows 8 apart,
    # 4 adjacent columns.  Words (64 row + col) / 2: rows land in bank 0 or 1 (col 0-1 vs
    # 2-3), 8 distinct rows each: 8 wavefronts, 7 extra.
    cols = BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1])
    assert bank_conflicts(cols, row_major([64, 64]), [64, 64], 16) == 7


def _mma(version, warps, instr):
    from gluonkit.layouts import NVMMADistributedLayout

    return NVMMADistributedLayout(version, warps, instr)


def _dot(index, parent, k_width):
    from gluonkit.layouts import DotOperandLayout

    return DotOperandLayout(index, parent, k_width)


# The register/shared pairs of Triton's BankConflictTest (mma and dot operands against NVMMA
# shared layouts); the expected counts come from the brute-force simulation.
TRITON_CASES = [
    (lambda: _mma([3, 0], [4, 1], [16, 32, 16]), (128, 16, False), [128, 128], 16),
    (lambda: _dot(1, _mma([2, 0], [1, 4], [16, 8]), 2), (64, 16, False), [64, 32], 16),
    (lambda: _dot(0, _mma([2, 0], [1, 4], [16, 8]), 2), (64, 16, True), [32, 64], 16),
    (lambda: _mma([2, 0], [4, 1], [16, 8]), (64, 16, True), [64, 64], 16),
    (lambda: _mma([3, 0], [4, 2], [16, 32, 16]), (64, 16, False), [64, 64], 16),
    (lambda: _mma([2, 0], [4, 1], [16, 8]), (32, 8, False), [32, 32], 8),
    (lambda: _mma([3, 0], [4, 1], [16, 32, 16]), (128, 32, False), [128, 64], 32),
]


@pytest.mark.parametrize("case", range(len(TRITON_CASES)))
def test_mma_layouts_against_nvmma_shared_match_brute_force(case):
    make, (swizzle, width, transposed), shape, bits = TRITON_CASES[case]
    reg = make().to_linear_layout(shape)
    smem = NVMMASharedLayout(swizzle, width, transposed=transposed).to_linear_layout(shape)
    acc = analyze_shared_access(reg, smem, element_bitwidth=bits)
    assert (acc.conflicts, acc.wavefronts) == brute_force(reg, smem, bits)


@given(layout_pair())
def test_matches_brute_force(case):
    d, s, bits = case
    acc = analyze_shared_access(d, s, element_bitwidth=bits)
    assert (acc.conflicts, acc.wavefronts) == brute_force(d, s, bits)


def test_rejects_a_layout_without_offsets():
    layout = one_d([1, 2, 4, 8, 16], [], 32)
    with pytest.raises(ValueError, match="offset"):
        bank_conflicts(layout, LinearLayout.identity_1d(32, "row", "dim0"), [32], 32)
