"""Conversion planning: hand-derived plans, and random layout pairs checked by brute force."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gluonkit.layouts import DistributedLinearLayout, LinearLayout
from gluonkit.layouts.banks import bank_conflicts
from gluonkit.layouts.conversion import plan_conversion


def dist(reg, lane, warp, shape):
    return DistributedLinearLayout(reg, lane, warp, [], shape)


def element_ids(layout: LinearLayout) -> np.ndarray:
    """Register file of a tensor whose element values are their flat index (dim0 minor):
    shape (threads, registers), thread = lane + 32 * warp."""
    table = layout.table()
    ids = np.zeros(len(table), dtype=np.int64)
    scale = 1
    for j, o in enumerate(layout.out_dims):
        ids += table[:, j] * scale
        scale *= layout.out_dim_size(o)
    return ids.reshape(-1, layout.in_dim_size("register"))


def check_simulation(plan, src, dst):
    s, d = src.to_linear_layout(), dst.to_linear_layout()
    assert (plan.simulate(element_ids(s)) == element_ids(d)).all()


ROWS = [[1, 0], [2, 0], [4, 0], [8, 0], [16, 0]]
COLS = [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16]]


# ------------------------------------------------------------------------------ by hand
def test_same_layout_is_identical():
    a = dist(ROWS[:2], COLS, ROWS[2:4], [16, 32])
    plan = plan_conversion(a, a, [16, 32])
    assert plan.kind == "identical"
    check_simulation(plan, a, a)


def test_swapped_registers_are_a_register_permutation():
    # dst register 1 is src register 2 and vice versa (bits 0 and 1 swapped).
    src = dist([[1, 0], [2, 0]], COLS, [], [4, 32])
    dst = dist([[2, 0], [1, 0]], COLS, [], [4, 32])
    plan = plan_conversion(src, dst, [4, 32])
    assert plan.kind == "register_permutation"
    assert plan.src_registers == (0, 2, 1, 3)
    check_simulation(plan, src, dst)


def test_registers_may_be_dropped_or_repeated():
    # src repeats its two rows in registers 2, 3 (zero basis); dst keeps one copy, and a
    # second dst layout repeats each row instead: dst registers (0, 0, 1, 1).
    src = dist([[1, 0], [0, 0]], COLS, [], [2, 32])
    once = dist([[1, 0]], COLS, [], [2, 32])
    twice = dist([[0, 0], [1, 0]], COLS, [], [2, 32])
    assert plan_conversion(src, once, [2, 32]).src_registers == (0, 1)
    plan = plan_conversion(src, twice, [2, 32])
    assert plan.kind == "register_permutation" and plan.src_registers == (0, 0, 1, 1)
    check_simulation(plan, src, twice)


def test_swapped_lanes_are_one_shuffle_per_register():
    # dst lane bits 0 and 1 are swapped: dst lane l reads src lane with bits 0, 1 swapped.
    src = dist([[1, 0]], COLS, [], [2, 32])
    dst = dist([[1, 0]], [COLS[1], COLS[0]] + COLS[2:], [], [2, 32])
    plan = plan_conversion(src, dst, [2, 32])
    assert plan.kind == "warp_shuffle"
    assert plan.src_registers == (0, 1)
    swap = [(l & ~3) | ((l & 1) << 1) | ((l >> 1) & 1) for l in range(32)]
    for r in range(2):
        assert [plan.lane_source.apply({"register": r, "lane": l})["lane"] for l in range(32)] == swap
    check_simulation(plan, src, dst)


def test_source_lane_may_depend_on_the_warp():
    # 1D 64: src warp 1 holds 32 + l in lane l; dst warp basis is 33, so dst (warp 1, lane l)
    # holds 33 ^ l, which src warp 1 keeps in lane l ^ 1: source lane = lane ^ warp.
    lanes = [[1], [2], [4], [8], [16]]
    src = dist([], lanes, [[32]], [64])
    dst = dist([], lanes, [[33]], [64])
    plan = plan_conversion(src, dst, [64])
    assert plan.kind == "warp_shuffle"
    assert plan.lane_source.bases["warp"] == [[1]] and plan.lane_source.bases["lane"] == lanes
    check_simulation(plan, src, dst)


def test_warp_difference_held_in_registers_needs_shared_memory():
    # src: register = row 1, warp = row 2; dst: register = row 1, warp = rows 1 ^ 2.  Warp 1
    # of dst wants rows 3, 2 in registers 0, 1, which src warp 1 holds in registers 1, 0:
    # the source register would depend on the warp, which a shuffle cannot do.
    src = dist([[1, 0]], COLS, [[2, 0]], [4, 32])
    dst = dist([[1, 0]], COLS, [[3, 0]], [4, 32])
    plan = plan_conversion(src, dst, [4, 32])
    assert plan.kind == "shared_memory"
    check_simulation(plan, src, dst)


def test_transpose_goes_through_a_conflict_free_swizzled_scratch():
    # 32x32 fp32: src lanes run along dim1 (rows), dst lanes along dim0 (columns).  A plain
    # row-major scratch makes the column loads 32-way conflicts; XOR-ing the row bits into
    # the bank bits avoids conflicts on both sides (Triton's SwizzleTest reaches 0/0 on the
    # same kind of f32 transpose).
    src = dist(ROWS[:4], COLS, ROWS[4:], [32, 32])
    dst = dist(COLS[:4], ROWS, COLS[4:], [32, 32])
    plan = plan_conversion(src, dst, [32, 32], element_bitwidth=32)
    assert plan.kind == "shared_memory"
    assert plan.scratch.is_invertible() and plan.scratch_elements == 1024
    assert plan.store.conflicts == 0 and plan.load.conflicts == 0
    assert plan.store.conflicts == bank_conflicts(src, plan.scratch, [32, 32], 32)
    assert plan.load.conflicts == bank_conflicts(dst, plan.scratch, [32, 32], 32)
    check_simulation(plan, src, dst)


def test_common_contiguous_registers_vectorize_both_sides():
    # Both keep 4 consecutive fp16 of a row per thread (dim1 bits 0, 1) but spread the
    # threads differently: the scratch keeps those 4 together, 8-byte stores and loads.
    src = dist(COLS[:2], [[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]], [[4, 0], [8, 0]], [16, 32])
    dst = dist(COLS[:2], [[1, 0], [2, 0], [4, 0], [8, 0], [0, 4]], [[0, 8], [0, 16]], [16, 32])
    plan = plan_conversion(src, dst, [16, 32], element_bitwidth=16)
    assert plan.kind == "shared_memory"
    assert plan.store.vector.elements == 4 and plan.load.vector.elements == 4
    check_simulation(plan, src, dst)


def test_blocked_orders_differ_by_a_lane_permutation():
    from gluonkit.layouts.distributed import BlockedLayout

    # order [1, 0]: registers (0,1), (1,0); lanes step dim1 twice, then dim0.  order
    # [0, 1]: registers (1,0), (0,1); lanes step dim0 three times, then dim1.  Both use the
    # same warp basis and the same register span, and lanes span the same space: shuffles.
    src = BlockedLayout([2, 2], [8, 4], [2, 1], [1, 0])
    dst = BlockedLayout([2, 2], [8, 4], [2, 1], [0, 1])
    assert src.to_linear_layout([32, 8]).bases["warp"] == dst.to_linear_layout([32, 8]).bases["warp"]
    plan = plan_conversion(src, dst, [32, 8])
    assert plan.kind == "warp_shuffle"
    s, d = src.to_linear_layout([32, 8]), dst.to_linear_layout([32, 8])
    assert (plan.simulate(element_ids(s)) == element_ids(d)).all()


def test_blocked_transpose_beats_a_row_major_scratch():
    from gluonkit.layouts.distributed import BlockedLayout

    src = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])  # rows: 4 fp32 per thread along dim1
    dst = BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1])  # columns: 4 fp32 along dim0
    plan = plan_conversion(src, dst, [32, 32], element_bitwidth=32)
    assert plan.kind == "shared_memory"
    s, d = src.to_linear_layout([32, 32]), dst.to_linear_layout([32, 32])
    assert (plan.simulate(element_ids(s)) == element_ids(d)).all()
    row_major = LinearLayout({"offset": COLS + ROWS}, {"dim0": 32, "dim1": 32})
    plain = bank_conflicts(src, row_major, [32, 32], 32) + bank_conflicts(dst, row_major, [32, 32], 32)
    assert plan.store.conflicts + plan.load.conflicts < plain
    assert (plan.store.conflicts, plan.load.conflicts) == (0, 0)


REAL_PAIRS = [
    # (src, dst, shape, element bits): wgmma accumulator to a store-friendly blocked layout,
    # mma v2 accumulator to its A operand (k_width 2), and between two blocked layouts.
    ("mma3", "blocked_rows", [64, 64], 16),
    ("mma2", "dot_a", [64, 32], 16),
    ("blocked_rows", "mma3", [64, 64], 32),
    ("blocked_rows", "blocked_cols", [64, 64], 16),
]


def _real(name):
    from gluonkit.layouts import BlockedLayout, DotOperandLayout, NVMMADistributedLayout

    return {
        "mma3": lambda: NVMMADistributedLayout([3, 0], [4, 1], [16, 32, 16]),
        "mma2": lambda: NVMMADistributedLayout([2, 0], [4, 1], [16, 8]),
        "dot_a": lambda: DotOperandLayout(0, NVMMADistributedLayout([2, 0], [4, 1], [16, 8]), 2),
        "blocked_rows": lambda: BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]),
        "blocked_cols": lambda: BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1]),
    }[name]()


@pytest.mark.parametrize("pair", REAL_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_real_layout_pairs_simulate_and_pick_the_cheapest_kind(pair):
    a, b, shape, bits = pair
    src, dst = _real(a).to_linear_layout(shape), _real(b).to_linear_layout(shape)
    plan = plan_conversion(_real(a), _real(b), shape, element_bitwidth=bits)
    s_ids, d_ids = element_ids(src), element_ids(dst)
    assert (plan.simulate(s_ids) == d_ids).all()
    assert plan.kind == brute_force_kind(s_ids, d_ids)


def test_errors_name_the_parameter():
    a = dist(ROWS[:1], COLS, [], [2, 32])
    with pytest.raises(ValueError, match="same shape"):
        plan_conversion(a.to_linear_layout(), dist(ROWS[:2], COLS, [], [4, 32]).to_linear_layout())
    with pytest.raises(ValueError, match="warps"):
        plan_conversion(a, dist([], COLS, ROWS[:1], [2, 32]), [2, 32])
    with pytest.raises(ValueError, match="every element"):
        plan_conversion(a, dist([[0, 0]], COLS, [], [2, 32]), [2, 32])
    with pytest.raises(ValueError, match="values must have shape"):
        plan_conversion(a, a, [2, 32]).simulate(np.zeros((32, 3)))


# ---------------------------------------------------------------- random pairs, brute force
def _mix(draw, vectors, extra=()):
    """An invertible recombination of ``vectors`` (XOR-ing in earlier ones and ``extra``)."""
    out = list(draw(st.permutations(vectors)))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, max(0, len(out) - 1)))
        pool = out[:i] + out[i + 1 :] + list(extra)
        if out and pool:
            out[i] ^= draw(st.sampled_from(pool))
    return out


@st.composite
def conversion_case(draw):
    bits = draw(st.integers(3, 8))
    warp_bits = draw(st.integers(0, 2))
    reg_bits = max(0, bits - 5 - warp_bits) + draw(st.integers(0, 2))
    slots = reg_bits + 5 + warp_bits

    def random_layout():
        vecs = _mix(draw, [1 << i for i in range(bits)])
        flat = [0] * slots
        for v, w in zip(vecs, draw(st.permutations(range(slots)))):
            flat[w] = v
        # Spare slots: broadcast (zero) or a repeat of another basis.
        spare = [w for w in range(slots) if flat[w] == 0]
        for w in spare:
            flat[w] = draw(st.sampled_from([0] + vecs))
        return flat[:reg_bits], flat[reg_bits : reg_bits + 5], flat[reg_bits + 5 :]

    reg, lane, warp = random_layout()
    mode = draw(st.sampled_from(["same", "registers", "shuffle", "random"]))
    if mode == "same":
        d = (reg + [0] * draw(st.integers(0, 1)), lane, warp)
    elif mode == "registers":
        d = (_mix(draw, reg) + [0] * draw(st.integers(0, 1)), lane, warp)
    elif mode == "shuffle":
        lanes = _mix(draw, lane)
        regs = [r ^ draw(st.sampled_from([0] + lane)) for r in _mix(draw, reg)]
        warps = [w ^ draw(st.sampled_from([0] + lane)) for w in warp]
        d = (regs, lanes, warps)
    else:
        d = random_layout()
    # Shape: split the bits over 1 to 3 dimensions.
    cuts = sorted(draw(st.lists(st.integers(0, bits), min_size=0, max_size=2)))
    widths = [b - a for a, b in zip([0] + cuts, cuts + [bits])]
    shape = [1 << w for w in widths]

    def coords(x):
        out = []
        for w in widths:
            out.append(x & ((1 << w) - 1))
            x >>= w
        return out

    def make(r, l, w):
        return dist([coords(x) for x in r], [coords(x) for x in l], [coords(x) for x in w], shape)

    bitwidth = draw(st.sampled_from([8, 16, 32, 64]))
    return make(reg, lane, warp), make(*d), shape, bitwidth


def brute_force_kind(s_ids, d_ids):
    """The cheapest mechanism that can work, found by searching the register files."""
    if s_ids.shape == d_ids.shape and (s_ids == d_ids).all():
        return "identical"
    if all(any((s_ids[:, k] == d_ids[:, r]).all() for k in range(s_ids.shape[1])) for r in range(d_ids.shape[1])):
        return "register_permutation"
    warps = s_ids.reshape(-1, 32, s_ids.shape[1])  # (warps, lanes, registers)
    dwarps = d_ids.reshape(-1, 32, d_ids.shape[1])

    def one_shuffle(r, k):  # every lane's dst register r is in src register k of its warp
        return all(np.isin(dwarps[w, :, r], warps[w, :, k]).all() for w in range(len(warps)))

    if all(any(one_shuffle(r, k) for k in range(s_ids.shape[1])) for r in range(d_ids.shape[1])):
        return "warp_shuffle"
    return "shared_memory"


@given(conversion_case())
def test_random_pairs_simulate_and_pick_the_cheapest_kind(case):
    src, dst, shape, bitwidth = case
    plan = plan_conversion(src, dst, shape, element_bitwidth=bitwidth)
    s_ids, d_ids = element_ids(src.to_linear_layout()), element_ids(dst.to_linear_layout())
    assert (plan.simulate(s_ids) == d_ids).all()
    assert plan.kind == brute_force_kind(s_ids, d_ids)
    if plan.kind == "shared_memory":
        assert plan.scratch.is_invertible()
        assert plan.store.conflicts == bank_conflicts(src, plan.scratch, shape, bitwidth)
        assert plan.load.conflicts == bank_conflicts(dst, plan.scratch, shape, bitwidth)
