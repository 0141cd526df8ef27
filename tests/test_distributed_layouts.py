"""BlockedLayout and SliceLayout: known answers, brute-force agreement, coverage, validation."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluonkit.layouts.distributed import AutoLayout, BlockedLayout, DistributedLinearLayout, SliceLayout
from gluonkit.layouts.linear import LinearLayout


def bases(layout, shape):
    return layout.to_linear_layout(shape).bases


# --------------------------------------------------------------------------- known answers
def test_blocked_1d_exact_tile():
    # 1 element per thread, 32 lanes then 4 warps along dim0: lane bit i -> 2**i,
    # warp bit i -> 32 * 2**i; the tile (128) equals the shape, so no registers.
    assert bases(BlockedLayout([1], [32], [4], [0]), [128]) == {
        "register": [],
        "lane": [[1], [2], [4], [8], [16]],
        "warp": [[32], [64]],
        "block": [],
    }


def test_blocked_1d_wraps_into_registers():
    # Same 128-element tile on 512 elements: 4 repetitions -> registers step by 128, 256.
    ll = BlockedLayout([1], [32], [4], [0]).to_linear_layout([512])
    assert ll.bases["register"] == [[128], [256]]
    assert ll.out_dim_sizes == {"dim0": 512}


def test_blocked_1d_broadcasts_when_shape_is_smaller():
    # Tile 4*32*4 = 512 on 8 elements: registers 1, 2 fit; lane bit 0 -> 4 fits; every
    # larger basis (lanes 8..64, warps 128, 256) becomes a zero vector (replication).
    assert bases(BlockedLayout([4], [32], [4], [0]), [8]) == {
        "register": [[1], [2]],
        "lane": [[4], [0], [0], [0], [0]],
        "warp": [[0], [0]],
        "block": [],
    }


def test_blocked_registers_outside_a_small_shape_are_dropped():
    # size_per_thread [1,1,1,4] along order [3,0,1,2] on shape [2,1,1,1]: dim3 has size 1,
    # so both register bases ([0,0,0,1], [0,0,0,2]) are removed (a thread holds 1 element,
    # not 4 copies of it), while the 4 lanes along dim3 stay as zero vectors (broadcast);
    # lane bit 4 is the first along dim0 -> [1,0,0,0]; warps go along dim1 (2) and dim2
    # (4), both of size 1 -> zeros.  This is what Triton 3.9 computes (checked with
    # Triton's own to_linear_layout; older Triton kept zero register bases).
    assert bases(BlockedLayout([1, 1, 1, 4], [2, 1, 1, 16], [1, 2, 4, 1], [3, 0, 1, 2]), [2, 1, 1, 1]) == {
        "register": [],
        "lane": [[0, 0, 0, 0]] * 4 + [[1, 0, 0, 0]],
        "warp": [[0, 0, 0, 0]] * 3,
        "block": [],
    }


def test_blocked_2d_row_major_extra_registers_follow_order():
    # spt [1,2], tpw [8,4], wpc [2,2], order [1,0]; tile = 16 x 16:
    #   register: dim1 by 1                     -> [0,1]
    #   lane: dim1 first (4 lanes: 2, 4), then dim0 (8 lanes: 1, 2, 4)
    #   warp: dim1 (8), then dim0 (8)
    # Shape [64, 32] repeats dim1 x2 then dim0 x4; the extra registers come in `order`,
    # dim1 first: [0,16], then [16,0], [32,0].
    assert bases(BlockedLayout([1, 2], [8, 4], [2, 2], [1, 0]), [64, 32]) == {
        "register": [[0, 1], [0, 16], [16, 0], [32, 0]],
        "lane": [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]],
        "warp": [[0, 8], [8, 0]],
        "block": [],
    }


def test_blocked_2d_column_major_extra_registers_follow_order():
    # Transposed parameters with order [0,1]: now dim0 repeats first: [16,0], then dim1.
    assert bases(BlockedLayout([2, 1], [4, 8], [2, 2], [0, 1]), [32, 64]) == {
        "register": [[1, 0], [16, 0], [0, 16], [0, 32]],
        "lane": [[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
        "warp": [[8, 0], [0, 8]],
        "block": [],
    }


def test_slice_known_answers():
    parent = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])  # tile 32 x 16
    # dim 0 removed: parent on [1, 64] -> registers [0,1],[0,2] + repeats [0,16],[0,32];
    # lanes along dim0 (1, 2, 4) and warps (8, 16) broadcast -> zero, kept as zeros.
    assert bases(SliceLayout(0, parent), [64]) == {
        "register": [[1], [2], [16], [32]],
        "lane": [[4], [8], [0], [0], [0]],
        "warp": [[0], [0]],
        "block": [],
    }
    # dim 1 removed: parent on [64, 1] -> registers [0,1],[0,2] become zero and are
    # dropped; the repeat along dim0 [32,0] stays; lanes along dim1 keep zero vectors.
    assert bases(SliceLayout(1, parent), [64]) == {
        "register": [[32]],
        "lane": [[0], [0], [1], [2], [4]],
        "warp": [[8], [16]],
        "block": [],
    }


def test_num_warps_rank_repr_equality():
    b = BlockedLayout([1, 4], [8, 4], [4, 2], [1, 0])
    s = SliceLayout(1, b)
    assert (b.num_warps, s.num_warps, b.rank, s.rank) == (8, 8, 2, 1)
    assert repr(b) == "BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[8, 4], warps_per_cta=[4, 2], order=[1, 0], cga_layout=[])"
    assert repr(s) == f"SliceLayout(dim=1, parent={b!r})"
    assert b == BlockedLayout((1, 4), (8, 4), (4, 2), (1, 0), cga_layout=[])
    assert hash(s) == hash(SliceLayout(1, BlockedLayout([1, 4], [8, 4], [4, 2], [1, 0])))
    assert b != BlockedLayout([1, 4], [8, 4], [4, 2], [0, 1])
    assert s != SliceLayout(0, b)
    assert b.cga_layout == () and s.cga_layout == ()
    # Gluon 3.9 has no ctas_per_cga / cta_split_num / cta_order: cga_layout replaced them.
    with pytest.raises(TypeError):
        BlockedLayout([1, 4], [8, 4], [4, 2], [1, 0], ctas_per_cga=[1, 1])


# ------------------------------------------------------------------------- brute force
def brute_force_blocked(spt, tpw, wpc, order, shape):
    """Coordinates of every (register, lane, warp), straight from the definition.

    Within a thread, register ``r`` splits into an element of the ``size_per_thread`` block
    (low part) and a repetition index (high part); lane, warp, element and repetition are
    each unflattened along ``order`` (order[0] fastest).  Along dim d the coordinate is
    ``elem + spt*(lane + tpw*(warp + wpc*rep))``, taken modulo the shape (lanes and warps
    of a tile larger than the shape wrap onto themselves: replication).  A thread holds only
    the elements of its block that lie inside the shape (``min(spt, shape)`` along each
    dim; Triton 3.9 drops the others rather than repeating them).  Rows are ordered
    register-minor, then lane, then warp, as in ``LinearLayout.table()``.
    """
    rank = len(shape)
    tile = [spt[d] * tpw[d] * wpc[d] for d in range(rank)]
    reps = [max(1, shape[d] // tile[d]) for d in range(rank)]
    spt_in = [min(spt[d], shape[d]) for d in range(rank)]

    def unflatten(i, sizes):
        idx = [0] * rank
        for d in order:
            idx[d] = i % sizes[d]
            i //= sizes[d]
        return idx

    n_elem = int(np.prod(spt_in))
    n_reg = n_elem * int(np.prod(reps))
    rows = []
    for w in range(int(np.prod(wpc))):
        for lane in range(32):
            for r in range(n_reg):
                e, rep = unflatten(r % n_elem, spt_in), unflatten(r // n_elem, reps)
                ln, wp = unflatten(lane, tpw), unflatten(w, wpc)
                rows.append(
                    [(e[d] + spt[d] * (ln[d] + tpw[d] * (wp[d] + wpc[d] * rep[d]))) % shape[d] for d in range(rank)]
                )
    return np.array(rows, dtype=np.int64)


def split_bits(total_bits, rank, draw):
    """Random split of ``total_bits`` powers of two over ``rank`` dims."""
    bits = [0] * rank
    for _ in range(total_bits):
        bits[draw(st.integers(0, rank - 1))] += 1
    return [1 << b for b in bits]


@st.composite
def blocked_params(draw, max_rank=3):
    rank = draw(st.integers(1, max_rank))
    spt = [1 << draw(st.integers(0, 2)) for _ in range(rank)]
    tpw = split_bits(5, rank, draw)
    wpc = split_bits(draw(st.integers(0, 3)), rank, draw)
    order = draw(st.permutations(range(rank)))
    shape = [1 << draw(st.integers(0, 7 if rank == 1 else 4)) for _ in range(rank)]
    return spt, tpw, wpc, list(order), shape


@given(blocked_params())
def test_blocked_matches_brute_force(params):
    spt, tpw, wpc, order, shape = params
    ll = BlockedLayout(spt, tpw, wpc, order).to_linear_layout(shape)
    assert ll.in_dims == ["register", "lane", "warp", "block"]
    assert ll.out_dim_sizes == {f"dim{d}": s for d, s in enumerate(shape)}
    np.testing.assert_array_equal(ll.table(), brute_force_blocked(spt, tpw, wpc, order, shape))


def element_counts(ll: LinearLayout, shape):
    flat = np.ravel_multi_index(ll.table().T, shape, order="F")
    return np.bincount(flat, minlength=int(np.prod(shape)))


@given(blocked_params())
def test_blocked_covers_every_element_equally(params):
    spt, tpw, wpc, order, shape = params
    ll = BlockedLayout(spt, tpw, wpc, order).to_linear_layout(shape)
    counts = element_counts(ll, shape)
    assert counts.min() == counts.max() == ll.total_in_size() // int(np.prod(shape))


@given(blocked_params())
def test_a_thread_never_holds_an_element_twice(params):
    # Triton 3.9's small-shape rule: registers outside the shape are removed, so within one
    # thread distinct registers always hold distinct elements; copies live in other lanes
    # or warps only.
    spt, tpw, wpc, order, shape = params
    ll = BlockedLayout(spt, tpw, wpc, order).to_linear_layout(shape)
    regs = np.array(ll.bases["register"], dtype=np.int64).reshape(-1, len(shape))
    images = {tuple(np.bitwise_xor.reduce(regs[[b for b in range(len(regs)) if r >> b & 1]], axis=0))
              if r else (0,) * len(shape) for r in range(1 << len(regs))}
    assert len(images) == 1 << len(regs)
    assert len(regs) == sum(min(s, p).bit_length() - 1 for s, p in zip(spt, shape)) + sum(
        max(0, (p // (s * t * w)).bit_length() - 1) for s, t, w, p in zip(spt, tpw, wpc, shape))


@given(blocked_params(), st.data())
def test_slice_is_the_parent_with_dim_removed(params, data):
    spt, tpw, wpc, order, shape = params
    if len(shape) < 2:
        shape, spt, tpw, wpc, order = shape + [4], spt + [1], tpw + [1], wpc + [1], order + [len(order)]
    parent = BlockedLayout(spt, tpw, wpc, order)
    dim = data.draw(st.integers(0, len(shape) - 1))
    sliced_shape = shape[:dim] + shape[dim + 1 :]
    sl = SliceLayout(dim, parent).to_linear_layout(sliced_shape)
    # Whatever size the parent has along `dim`, dropping that coordinate from the parent's
    # bases (and then the register bases that became zero) gives the slice: the other
    # dimensions are fitted independently of `dim`.
    full = parent.to_linear_layout(shape).bases
    expect = {d: [v[:dim] + v[dim + 1 :] for v in vs] for d, vs in full.items()}
    expect["register"] = [v for v in expect["register"] if any(v)]
    assert sl.bases == expect
    # Expanding the slice back (dim re-inserted with size 1) covers the sliced tensor
    # evenly, and the lanes and warps are those of the parent.
    counts = element_counts(sl, sliced_shape)
    assert counts.min() == counts.max() >= 1
    assert sl.in_dim_sizes["lane"] == 32 and sl.in_dim_sizes["warp"] == parent.num_warps


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "args, kwargs, name",
    [
        (([1, 1], [4, 4], [1, 1], [1, 0]), {}, "threads_per_warp must multiply to 32"),
        (([1, 1], [8, 4], [3, 1], [1, 0]), {}, "warps_per_cta"),
        (([3, 1], [8, 4], [1, 1], [1, 0]), {}, "size_per_thread"),
        (([1, 1], [8, 4], [1], [1, 0]), {}, "warps_per_cta must have rank 2"),
        (([1, 1], [32], [1, 1], [1, 0]), {}, "threads_per_warp must have rank 2"),
        (([1, 1], [8, 4], [1, 1], [1, 1]), {}, "order must be a permutation"),
        (([1, 1], [8, 4], [1, 1], [0]), {}, "order must have rank 2"),
        (([], [], [], []), {}, "size_per_thread"),
        (([1, 1], [8, 4], [1, 1], [1, 0], [[0, 3]]), {}, "cga_layout"),
        (([1, 1], [8, 4], [1, 1], [1, 0], [[1]]), {}, "cga_layout"),
    ],
)
def test_blocked_errors_name_the_parameter(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        BlockedLayout(*args, **kwargs)


@given(st.lists(st.sampled_from([1, 2, 4, 8, 16, 32]), min_size=1, max_size=4))
def test_threads_per_warp_product_must_be_32(tpw):
    rank = len(tpw)
    make = lambda: BlockedLayout([1] * rank, tpw, [1] * rank, list(range(rank)))  # noqa: E731
    if int(np.prod(tpw)) == 32:
        assert make().to_linear_layout([32] * rank).in_dim_size("lane") == 32
    else:
        with pytest.raises(ValueError, match=r"threads_per_warp must multiply to 32, got .*product"):
            make()


def test_slice_and_shape_errors():
    b = BlockedLayout([1, 1], [8, 4], [1, 1], [1, 0])
    with pytest.raises(ValueError, match=r"dim must be in \[0, 2\)"):
        SliceLayout(2, b)
    with pytest.raises(ValueError, match="dim must be"):
        SliceLayout(-1, b)
    with pytest.raises(ValueError, match="parent must have rank at least 2"):
        SliceLayout(0, BlockedLayout([1], [32], [1], [0]))
    with pytest.raises(ValueError, match="parent must be a concrete distributed layout"):
        SliceLayout(0, AutoLayout())
    with pytest.raises(ValueError, match="shape must have rank 2"):
        b.to_linear_layout([16])
    with pytest.raises(ValueError, match="shape must have rank 1"):
        SliceLayout(0, b).to_linear_layout([16, 16])
    with pytest.raises(ValueError, match=r"shape\[1\] must be a power of two"):
        b.to_linear_layout([16, 12])


def test_distributed_linear_layout_fits_other_shapes_like_triton():
    # 16x8 tile: register along dim1, lanes 4 along dim1 then 8 along dim0, one warp bit on dim0.
    layout = DistributedLinearLayout([[0, 1]], [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]], [[8, 0]], [], [16, 8])
    # A 16x1 tensor (an expand_dims result): the register along dim1 is dropped, lanes
    # along dim1 broadcast (Triton 3.9's linear encoding).
    narrow = layout.to_linear_layout([16, 1]).bases
    assert narrow["register"] == []
    assert narrow["lane"] == [[0, 0], [0, 0], [1, 0], [2, 0], [4, 0]]
    # A 32x8 tensor wraps dim0 into one more register that steps over a whole tile.
    assert layout.to_linear_layout([32, 8]).bases["register"] == [[0, 1], [16, 0]]


def test_linear_layouts_are_remembered_per_layout_value_and_shape():
    layout = BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0])
    first = layout.to_linear_layout([32, 64])
    assert BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0]).to_linear_layout((32, 64)) is first  # an equal layout
    assert layout.to_linear_layout([64, 64]) is not first and layout.to_linear_layout([64, 64]) == \
        BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0]).to_linear_layout([64, 64])
    for _ in range(2):  # a bad shape is refused every time, not remembered
        with pytest.raises(ValueError):
            layout.to_linear_layout([32])

