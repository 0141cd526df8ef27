"""Vector widths of shared and global accesses: hand-derived cases and brute force."""

import itertools

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gluonkit.layouts import DistributedLinearLayout, LinearLayout
from gluonkit.layouts.vectorize import global_vector_width, shared_vector_width, shared_vectorization


def dist(reg, lane, warp, shape):
    return DistributedLinearLayout(reg, lane, warp, [], shape)


LANES_ALONG_DIM1 = [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16]]


def row_major(shape):
    """Shared layout of a dense row-major buffer: offset bits walk dim1 first, then dim0."""
    r, c = shape
    bases = [[0, 1 << i] for i in range(c.bit_length() - 1)] + [[1 << i, 0] for i in range(r.bit_length() - 1)]
    return LinearLayout({"offset": bases, "block": []}, {"dim0": r, "dim1": c})


# ------------------------------------------------------------------------ shared, by hand
def test_contiguous_registers_vectorize_up_to_16_bytes():
    # 4 registers along dim1 (1, 2 columns), then lanes along dim1 from column 4: a thread
    # holds 4 consecutive row-major elements at offsets 4*lane + r.
    layout = dist([[0, 1], [0, 2]], [[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]], [], [4, 32])
    assert shared_vector_width(layout, row_major([4, 32]), [4, 32], 32) == 4
    assert shared_vector_width(layout, row_major([4, 32]), [4, 32], 16) == 4
    # 8 registers of 32 bits would be 32 bytes: capped at 16 bytes = 4 elements.
    wide = dist([[0, 1], [0, 2], [0, 4]], [[0, 8], [0, 16], [1, 0], [2, 0], [4, 0]], [], [8, 32])
    assert shared_vector_width(wide, row_major([8, 32]), [8, 32], 32) == 4
    assert shared_vector_width(wide, row_major([8, 32]), [8, 32], 16) == 8
    assert shared_vector_width(wide, row_major([8, 32]), [8, 32], 16, max_vector_bytes=4) == 2


def test_register_order_may_be_permuted():
    # Register bit 0 steps 2 columns and bit 1 steps 1: both still fill one 4-element vector,
    # read in the register order 0, 2, 1, 3.
    layout = dist([[0, 2], [0, 1]], [[0, 4], [0, 8], [0, 16], [1, 0], [2, 0]], [], [4, 32])
    vec = shared_vectorization(layout, row_major([4, 32]), [4, 32], 32)
    assert vec.elements == 4 and vec.register_bits == (1, 0)
    assert vec.register_groups().tolist() == [[0, 2, 1, 3]]


def test_lane_inside_the_vector_breaks_alignment():
    # Lane bit 0 steps 1 column and the register steps 2: lane 1's pair starts at offset 1.
    layout = dist([[0, 2]], [[0, 1], [0, 4], [0, 8], [0, 16], [1, 0]], [], [2, 32])
    assert shared_vector_width(layout, row_major([2, 32]), [2, 32], 32) == 1


def test_broadcast_registers_are_skipped():
    # Register bit 0 repeats data (zero basis); bit 1 steps one column.
    layout = dist([[0, 0], [0, 1]], [[0, 2], [0, 4], [0, 8], [0, 16], [1, 0]], [], [2, 32])
    vec = shared_vectorization(layout, row_major([2, 32]), [2, 32], 32)
    assert vec.elements == 2 and vec.register_bits == (1,) and vec.other_bits == ()


# -------------------------------------------------------------- shared, brute force
@st.composite
def layout_pair(draw):
    """A random distributed layout and a random bijective shared layout of one shape."""
    bits = draw(st.integers(5, 8))
    warp_bits = draw(st.integers(0, 2))
    reg_bits = max(0, bits - 5 - warp_bits) + draw(st.integers(0, 1))
    slots = reg_bits + 5 + warp_bits
    # Often the first m registers step 1, 2, 4, … along dim0, as in real layouts.
    m = draw(st.integers(0, min(reg_bits, 3)))
    perm = list(range(m)) + draw(st.permutations(range(m, bits)))
    # Random independent vectors: units, sometimes XOR-mixed (swizzles, misalignment).
    vecs = [1 << p for p in perm]
    for _ in range(draw(st.integers(0, 3))):
        i, j = draw(st.integers(m, bits - 1)), draw(st.integers(0, bits - 1))
        if i != j:
            vecs[i] ^= vecs[j]
    where = list(range(m)) + draw(st.permutations(range(m, slots)))[: bits - m]
    flat = [0] * slots
    for v, w in zip(vecs, where):
        flat[w] = v
    plain = draw(st.integers(0, m))  # offsets 1, 2, … also along dim0, often
    smem = [1 << p for p in list(range(plain)) + draw(st.permutations(range(plain, bits)))]
    for _ in range(draw(st.integers(0, 3))):
        i, j = draw(st.integers(0, bits - 1)), draw(st.integers(0, bits - 1))
        if i < j:  # keep low offset bits plain more often
            smem[j] ^= smem[i]
    low = draw(st.integers(min(m, bits - 1) or 1, bits - 1))
    shape = [1 << low, 1 << (bits - low)]

    def coords(x):
        return [x & (shape[0] - 1), x >> low]

    reg = [coords(x) for x in flat[:reg_bits]]
    lane = [coords(x) for x in flat[reg_bits : reg_bits + 5]]
    warp = [coords(x) for x in flat[reg_bits + 5 :]]
    d = DistributedLinearLayout(reg, lane, warp, [], shape).to_linear_layout()
    s = LinearLayout({"offset": [coords(x) for x in smem], "block": []}, {"dim0": shape[0], "dim1": shape[1]})
    bitwidth = draw(st.sampled_from([8, 16, 32, 64]))
    return d, s, bitwidth


def offsets_per_thread(d, s):
    """offset[t, r] of every thread's every register, by looking elements up in the tables."""
    numel = s.total_out_size()
    where = np.empty(numel, dtype=np.int64)
    st_ = s.table()
    where[st_[:, 0] + s.out_dim_size("dim0") * st_[:, 1]] = np.arange(len(st_))
    dt = d.table()
    return where[dt[:, 0] + s.out_dim_size("dim0") * dt[:, 1]].reshape(-1, d.in_dim_size("register"))


def valid_vector(offs, reg_bits):
    """Every thread's registers with ``reg_bits`` cleared start an aligned, in-order run."""
    k = len(reg_bits)
    within = [sum(1 << b for b, on in zip(reg_bits, (j >> np.arange(k)) & 1) if on) for j in range(1 << k)]
    for r in range(offs.shape[1]):
        if any((r >> b) & 1 for b in reg_bits):
            continue
        run = offs[:, [r | w for w in within]]
        if (run[:, 0] % (1 << k)).any() or (run != run[:, :1] + np.arange(1 << k)).any():
            return False
    return True


@given(layout_pair())
def test_shared_vector_is_valid_and_maximal(case):
    d, s, bits = case
    vec = shared_vectorization(d, s, element_bitwidth=bits)
    offs = offsets_per_thread(d, s)
    assert vec.elements * bits <= 128
    assert valid_vector(offs, vec.register_bits)
    # No choice of one more register bit (in any order) makes a valid vector.
    if 2 * vec.elements * bits <= 128:
        n = d.in_dim_size_log2("register")
        k = len(vec.register_bits) + 1
        assert not any(valid_vector(offs, p) for p in itertools.permutations(range(n), k))
    # The groups cover each distinct register content exactly once.
    groups = vec.register_groups()
    seen = offs[:, groups.ravel()]
    assert all(len(set(row)) == len(row) for row in seen)
    assert all(set(row) == set(offs[t]) for t, row in enumerate(seen))


# ---------------------------------------------------------------------------- global
def test_global_row_major_blocked_rows():
    # 4 registers along dim1 of a dense 16x64 fp16 tensor: 8-byte vectors.
    layout = dist([[0, 1], [0, 2]], [[0, 4], [0, 8], [0, 16], [0, 32], [1, 0]], [[2, 0], [4, 0], [8, 0]], [16, 64])
    assert global_vector_width(layout, [16, 64], 16) == 4
    # A base pointer only 4-byte aligned allows 2 fp16 elements.
    assert global_vector_width(layout, [16, 64], 16, base_alignment=4) == 2
    # Row stride 2 elements (4 bytes) limits every row's start the same way.
    assert global_vector_width(layout, [16, 64], 16, strides=[2, 1]) == 2
    # Column-major storage: registers step along dim1, which is not contiguous.
    assert global_vector_width(layout, [16, 64], 16, strides=[1, 16]) == 1


def test_global_registers_not_first_are_not_a_vector():
    # Register bit 0 repeats (broadcast), so registers 0 and 1 hold the same element.
    layout = dist([[0, 0], [0, 1]], [[0, 2], [0, 4], [0, 8], [0, 16], [1, 0]], [], [2, 32])
    assert global_vector_width(layout, [2, 32], 32) == 1


@given(layout_pair(), st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([1, 2, 4, 8, 16]),
       st.integers(0, 1), st.integers(0, 3))
def test_global_vector_is_sound_and_tight(case, stride_pow, base_alignment, order, odd_seed):
    d, _, bits = case
    shape = [d.out_dim_size("dim0"), d.out_dim_size("dim1")]
    strides = [1, 1]
    strides[1 - order] = stride_pow * (2 * odd_seed + 1)  # divisible by stride_pow exactly
    v = global_vector_width(d, None, bits, strides=strides, base_alignment=base_alignment)

    def vectors_ok(width, base, strides):
        t = d.table()
        addr = (base * 8 // bits + t[:, 0] * strides[0] + t[:, 1] * strides[1]).reshape(-1, d.in_dim_size("register"))
        if addr.shape[1] % width:
            return False
        runs = addr.reshape(addr.shape[0], -1, width)
        return not ((runs[:, :, 0] * bits) % (width * bits)).any() and (runs == runs[:, :, :1] + np.arange(width)).all()

    assert v * bits <= 128
    # Sound: every base with the promised alignment, and every stride with the promised divisor.
    for odd in (1, 3, 5):
        for s_odd in (1, 3):
            s = [x if x == 1 else stride_pow * s_odd for x in strides]
            assert vectors_ok(v, base_alignment * odd, s)
    # Tight: twice the width fails for the plainest base and strides, unless capped at 16 bytes
    # or the pointer's alignment (then no promise is possible).
    plain = [x if x == 1 else stride_pow for x in strides]
    if 2 * v * bits <= 8 * min(16, base_alignment) and (shape[1 - order] == 1 or 2 * v <= stride_pow):
        assert not vectors_ok(2 * v, base_alignment, plain)


def test_errors_name_the_parameter():
    layout = dist([[0, 1]], LANES_ALONG_DIM1[:4] + [[1, 0]], [], [2, 32])
    with pytest.raises(ValueError, match="element_bitwidth"):
        shared_vector_width(layout, row_major([2, 32]), [2, 32], 12)
    with pytest.raises(ValueError, match="strides"):
        global_vector_width(layout, [2, 32], 32, strides=[1])
    with pytest.raises(ValueError, match="shape"):
        shared_vector_width(layout, row_major([2, 32]), [4, 32], 32)


# ------------------------------------------------------------------------ BlockedLayout
def test_blocked_size_per_thread_along_the_contiguous_dim():
    from gluonkit.layouts.distributed import BlockedLayout

    rows = BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    # 8 fp16 per thread along dim1 = 16 bytes; 8 fp32 = 32 bytes, capped at 16 bytes.
    assert global_vector_width(rows, [64, 64], 16) == 8
    assert global_vector_width(rows, [64, 64], 32) == 4
    assert shared_vector_width(rows, row_major([64, 64]), [64, 64], 16) == 8
    # Elements along dim0 are 64 apart in a row-major tensor: no vector.
    cols = BlockedLayout([8, 1], [8, 4], [1, 4], [0, 1])
    assert global_vector_width(cols, [64, 64], 16) == 1
    assert global_vector_width(cols, [64, 64], 16, strides=[1, 64]) == 8
    assert shared_vector_width(cols, row_major([64, 64]), [64, 64], 16) == 1
