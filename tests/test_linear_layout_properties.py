"""Property tests of LinearLayout against brute-force references written here.

Every reference below works from the raw basis lists a test built itself: it enumerates
input indices, XORs the bases of their set bits by hand, and flattens indices with the
first dimension minor.  No reference calls the LinearLayout method under test (most call
no LinearLayout method at all), so a wrong method cannot agree with itself.

Layouts stay small (at most 7 input bits) so that full enumeration is cheap.
"""

from itertools import product

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from gluonkit.layouts.linear import LinearLayout

IN_POOL = ["register", "lane", "warp"]
OUT_POOL = ["dim0", "dim1", "dim2"]
MAX_IN_BITS = 7


# ------------------------------------------------------------------ brute-force references
def ref_apply(bases, out_names, ins):
    """XOR of the basis vectors of the set bits of ``ins`` (missing dims are 0)."""
    out = [0] * len(out_names)
    for d, vs in bases.items():
        x = ins.get(d, 0)
        for i, v in enumerate(vs):
            if (x >> i) & 1:
                out = [a ^ b for a, b in zip(out, v)]
    return dict(zip(out_names, out))


def all_inputs(in_sizes):
    """Every input index as a dict, in flat order (first dimension minor)."""
    names = list(in_sizes)
    # itertools.product varies its last factor fastest, so feed the dims reversed.
    for combo in product(*(range(in_sizes[d]) for d in reversed(names))):
        yield dict(zip(reversed(names), combo))


def flatten(idx, sizes):
    """Flat index of ``idx`` (dict) over ``sizes`` (ordered dict), first dim minor."""
    flat, mult = 0, 1
    for d, s in sizes.items():
        flat += idx.get(d, 0) * mult
        mult *= s
    return flat


def unflatten(flat, sizes):
    out = {}
    for d, s in sizes.items():
        out[d] = flat % s
        flat //= s
    return out


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def span(vectors):
    """Set of all XOR combinations of ``vectors`` (ints), by enumeration."""
    s = {0}
    for v in vectors:
        s |= {x ^ v for x in s}
    return s


def flat_bases(bases, out_sizes):
    """Every basis vector (in input order) as a flat output int."""
    return [flatten(dict(zip(out_sizes, v)), out_sizes) for vs in bases.values() for v in vs]


def images(bases, out_sizes, in_sizes):
    return [ref_apply(bases, list(out_sizes), x) for x in all_inputs(in_sizes)]


def in_sizes_of(bases):
    return {d: 1 << len(vs) for d, vs in bases.items()}


# --------------------------------------------------------------------------- strategies
@st.composite
def dim_sizes(draw, pool, min_dims=1, max_dims=3, max_log=3, max_total=None):
    """An ordered dict name -> power-of-two size, names a random ordered subset of ``pool``."""
    n = draw(st.integers(min_dims, max_dims))
    names = draw(st.permutations(pool))[:n]
    logs = [draw(st.integers(0, max_log)) for _ in names]
    if max_total is not None:
        while sum(logs) > max_total:
            logs[logs.index(max(logs))] -= 1
    return {d: 1 << k for d, k in zip(names, logs)}


@st.composite
def basis_vector(draw, out_sizes):
    # Zero vectors are common in real layouts (broadcast), so draw them on purpose too.
    if draw(st.booleans()) and draw(st.booleans()):
        return [0] * len(out_sizes)
    return [draw(st.integers(0, s - 1)) for s in out_sizes.values()]


@st.composite
def raw_layouts(draw, in_pool=IN_POOL, out_pool=OUT_POOL, out_sizes=None, max_in_bits=MAX_IN_BITS):
    """(bases, out_sizes): random bases within the output sizes, 1-3 ins and 1-3 outs."""
    ins = draw(dim_sizes(in_pool, max_total=max_in_bits))
    if out_sizes is None:
        out_sizes = draw(dim_sizes(out_pool))
    bases = {d: [draw(basis_vector(out_sizes)) for _ in range(s.bit_length() - 1)] for d, s in ins.items()}
    return bases, out_sizes


@st.composite
def split_bits(draw, n, pool, min_dims=1):
    """Random ordered names from ``pool`` with log2 sizes summing to ``n``."""
    k = draw(st.integers(min_dims, len(pool)))
    names = draw(st.permutations(pool))[:k]
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=k - 1, max_size=k - 1)))
    edges = [0] + cuts + [n]
    return {d: 1 << (edges[i + 1] - edges[i]) for i, d in enumerate(names)}


@st.composite
def invertible_columns(draw, n):
    """Columns (ints) of a random invertible n x n GF(2) matrix.

    A permutation of the unit vectors followed by random column additions
    (col_i ^= col_j, i != j): every such product is invertible.
    """
    cols = [1 << i for i in draw(st.permutations(range(n)))]
    if n >= 2:
        ops = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12))
        for i, j in ops:
            if i != j:
                cols[i] ^= cols[j]
    return cols


def bases_from_columns(cols, in_sizes, out_sizes):
    """Split flat columns into input dims and unflatten each over the output dims."""
    bases, k = {}, 0
    for d, s in in_sizes.items():
        b = s.bit_length() - 1
        bases[d] = [list(unflatten(c, out_sizes).values()) for c in cols[k : k + b]]
        k += b
    return bases


@st.composite
def bijective_layouts(draw, in_pool=IN_POOL, out_pool=OUT_POOL):
    n = draw(st.integers(0, 6))
    cols = draw(invertible_columns(n))
    in_sizes = draw(split_bits(n, in_pool))
    out_sizes = draw(split_bits(n, out_pool))
    return bases_from_columns(cols, in_sizes, out_sizes), out_sizes


@st.composite
def surjective_layouts(draw, in_pool=IN_POOL, out_pool=OUT_POOL, out_sizes=None):
    """An invertible block of columns interleaved with random extra columns."""
    if out_sizes is None:
        out_sizes = draw(split_bits(draw(st.integers(0, 5)), out_pool))
    n = sum(s.bit_length() - 1 for s in out_sizes.values())
    extra = draw(st.integers(0, MAX_IN_BITS - n))
    cols = draw(invertible_columns(n)) + [draw(st.integers(0, (1 << n) - 1)) for _ in range(extra)]
    cols = draw(st.permutations(cols))
    in_sizes = draw(split_bits(n + extra, in_pool))
    return bases_from_columns(cols, in_sizes, out_sizes), out_sizes


def any_layouts():
    return st.one_of(raw_layouts(), bijective_layouts(), surjective_layouts())


# ------------------------------------------------------------------------ apply / table
@given(raw_layouts())
def test_apply_and_table_match_brute_force_xor(raw):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    tab = ll.table()
    in_sizes = in_sizes_of(bases)
    assert tab.shape == (prod(in_sizes.values()), len(out_sizes))
    for x in all_inputs(in_sizes):
        want = ref_apply(bases, list(out_sizes), x)
        assert ll.apply(x) == want
        assert list(tab[flatten(x, in_sizes)]) == list(want.values())


# ------------------------------------------------------------------------------ invert
@given(bijective_layouts())
def test_invert_is_a_two_sided_inverse(raw):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    inv = ll.invert()
    in_sizes = in_sizes_of(bases)
    assert inv.in_dim_sizes == out_sizes and inv.out_dim_sizes == in_sizes
    inv_b = inv.bases
    # inv(L(x)) == x for every input, and L(inv(y)) == y for every output.
    for x in all_inputs(in_sizes):
        assert ref_apply(inv_b, list(in_sizes), ref_apply(bases, list(out_sizes), x)) == x
    for y in all_inputs(out_sizes):
        assert ref_apply(bases, list(out_sizes), ref_apply(inv_b, list(in_sizes), y)) == y
    # The composed layouts, evaluated by hand from their bases, are identities too.
    for comp, sizes in ((ll.compose(inv), in_sizes), (inv.compose(ll), out_sizes)):
        for x in all_inputs(sizes):
            assert ref_apply(comp.bases, comp.out_dims, x) == x


@given(raw_layouts())
def test_invert_rejects_non_bijective_layouts(raw):
    bases, out_sizes = raw
    n_images = len({tuple(y.values()) for y in images(bases, out_sizes, in_sizes_of(bases))})
    bijective = n_images == prod(in_sizes_of(bases).values()) == prod(out_sizes.values())
    ll = LinearLayout(bases, out_sizes)
    event(f"bijective={bijective}")
    if bijective:
        ll.invert()
    else:
        with pytest.raises(ValueError):
            ll.invert()


# ----------------------------------------------------------------------------- compose
@st.composite
def compose_chains(draw):
    """Raw layouts A: X -> Y, B: Y -> Z, C: Z -> W whose names and sizes match."""
    a_bases, y = draw(raw_layouts(in_pool=["register", "lane"], out_pool=["y0", "y1", "y2"]))
    b_in = dict(draw(st.permutations(list(y.items()))))  # B may list its inputs in another order
    z = draw(dim_sizes(["z0", "z1"]))
    b_bases = {d: [draw(basis_vector(z)) for _ in range(s.bit_length() - 1)] for d, s in b_in.items()}
    w = draw(dim_sizes(OUT_POOL))
    c_in = dict(draw(st.permutations(list(z.items()))))
    c_bases = {d: [draw(basis_vector(w)) for _ in range(s.bit_length() - 1)] for d, s in c_in.items()}
    return (a_bases, y), (b_bases, z), (c_bases, w)


@given(compose_chains())
def test_compose_is_associative_and_applies_inner_first(chain):
    (a_b, y), (b_b, z), (c_b, w) = chain
    a, b, c = LinearLayout(a_b, y), LinearLayout(b_b, z), LinearLayout(c_b, w)
    # a.compose(b) is b∘a (a first), so this is c∘(b∘a) versus (c∘b)∘a.
    left = a.compose(b).compose(c)
    right = a.compose(b.compose(c))
    assert left == right
    for x in all_inputs(in_sizes_of(a_b)):
        want = ref_apply(c_b, list(w), ref_apply(b_b, list(z), ref_apply(a_b, list(y), x)))
        assert ref_apply(left.bases, left.out_dims, x) == want
    assert left.out_dim_sizes == w


# --------------------------------------------------------------- pseudoinvert / inv∘compose
def free_bits(bases, out_sizes):
    """Flat input bits whose basis lies in the span of the earlier bases (brute force)."""
    cols = flat_bases(bases, out_sizes)
    return {k for k, c in enumerate(cols) if c in span(cols[:k])}


@given(surjective_layouts())
def test_pseudoinvert_is_a_right_inverse_using_pivot_bits_only(raw):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    pinv = ll.pseudoinvert()
    in_sizes = in_sizes_of(bases)
    assert pinv.in_dim_sizes == out_sizes and pinv.out_dim_sizes == in_sizes
    free = free_bits(bases, out_sizes)
    for y in all_inputs(out_sizes):
        x = ref_apply(pinv.bases, list(in_sizes), y)
        assert ref_apply(bases, list(out_sizes), x) == y
        # Documented choice: the preimage leaves every free (dependent) bit at 0.
        fx = flatten(x, in_sizes)
        assert all(not (fx >> k) & 1 for k in free)


@given(raw_layouts())
def test_pseudoinvert_rejects_non_surjective_layouts(raw):
    bases, out_sizes = raw
    hit = {tuple(y.values()) for y in images(bases, out_sizes, in_sizes_of(bases))}
    ll = LinearLayout(bases, out_sizes)
    event(f"surjective={len(hit) == prod(out_sizes.values())}")
    if len(hit) == prod(out_sizes.values()):
        ll.pseudoinvert()
    else:
        with pytest.raises(ValueError):
            ll.pseudoinvert()


@st.composite
def conversion_pairs(draw):
    """(src, outer): same output names (maybe reordered), src sizes <= outer sizes."""
    outer_bases, outer_out = draw(
        st.one_of(
            surjective_layouts(in_pool=["r", "l", "w"]),
            raw_layouts(in_pool=["r", "l", "w"]),
        )
    )
    src_out = {o: s >> draw(st.integers(0, s.bit_length() - 1)) for o, s in outer_out.items()}
    src_out = dict(draw(st.permutations(list(src_out.items()))))
    src_bases, _ = draw(raw_layouts(out_sizes=src_out))
    return (src_bases, src_out), (outer_bases, outer_out)


@given(conversion_pairs())
def test_invert_and_compose_solves_outer_of_c_equals_self(pair):
    (s_b, s_out), (o_b, o_out) = pair
    src, outer = LinearLayout(s_b, s_out), LinearLayout(o_b, o_out)
    outer_images = {tuple(y[o] for o in s_out) for y in images(o_b, o_out, in_sizes_of(o_b))}
    src_images = {tuple(y.values()) for y in images(s_b, s_out, in_sizes_of(s_b))}
    event(f"solvable={src_images <= outer_images}")
    if not src_images <= outer_images:
        with pytest.raises(ValueError):
            src.invert_and_compose(outer)
        return
    c = src.invert_and_compose(outer)
    o_in = in_sizes_of(o_b)
    assert c.out_dim_sizes == o_in
    free = free_bits(o_b, o_out)
    for x in all_inputs(in_sizes_of(s_b)):
        cx = ref_apply(c.bases, list(o_in), x)
        assert ref_apply(o_b, list(o_out), cx) == ref_apply(s_b, list(s_out), x)
        # Where outer replicates, the earliest preimage: free bits of outer stay 0.
        fx = flatten(cx, o_in)
        assert all(not (fx >> k) & 1 for k in free)


@given(surjective_layouts(in_pool=["r", "l", "w"]), st.data())
def test_invert_and_compose_onto_a_surjective_outer_always_succeeds(outer_raw, data):
    o_b, o_out = outer_raw
    s_out = dict(data.draw(st.permutations(list(o_out.items()))))
    s_b, _ = data.draw(raw_layouts(out_sizes=s_out))
    c = LinearLayout(s_b, s_out).invert_and_compose(LinearLayout(o_b, o_out))
    for x in all_inputs(in_sizes_of(s_b)):
        cx = ref_apply(c.bases, c.out_dims, x)
        assert ref_apply(o_b, list(o_out), cx) == ref_apply(s_b, list(s_out), x)


# ----------------------------------------------------------------------------- product
def product_reference(a, b, x):
    """(a*b)(x) by hand: shared input dims split low (a) / high (b), shared outputs stack."""
    (a_b, a_out), (b_b, b_out) = a, b
    a_in, b_in = in_sizes_of(a_b), in_sizes_of(b_b)
    xa = {d: x.get(d, 0) % s for d, s in a_in.items()}
    xb = {d: (x.get(d, 0) // a_in.get(d, 1)) for d in b_in}
    ya, yb = ref_apply(a_b, list(a_out), xa), ref_apply(b_b, list(b_out), xb)
    out = dict(ya)
    for o, v in yb.items():
        out[o] = out.get(o, 0) + v * a_out.get(o, 1)
    return out


def _product_layouts(in_a, in_b, out_a, out_b):
    return st.tuples(
        raw_layouts(in_pool=in_a, out_pool=out_a, max_in_bits=4),
        raw_layouts(in_pool=in_b, out_pool=out_b, max_in_bits=3),
    )


@pytest.mark.parametrize(
    "pools",
    [
        pytest.param((["register", "lane"], ["warp", "block"], ["dim0", "dim1"], ["dim2", "dim3"]), id="disjoint"),
        pytest.param((IN_POOL, IN_POOL, OUT_POOL, OUT_POOL), id="shared"),
    ],
)
@given(data=st.data())
def test_product_matches_brute_force(pools, data):
    a, b = data.draw(_product_layouts(*pools))
    p = LinearLayout(*a) * LinearLayout(*b)
    a_in, b_in = in_sizes_of(a[0]), in_sizes_of(b[0])
    want_in = {d: a_in.get(d, 1) * b_in.get(d, 1) for d in list(a_in) + [d for d in b_in if d not in a_in]}
    want_out = {o: a[1].get(o, 1) * b[1].get(o, 1) for o in list(a[1]) + [o for o in b[1] if o not in a[1]]}
    assert p.in_dim_sizes == want_in
    assert p.out_dim_sizes == want_out
    for x in all_inputs(want_in):
        assert ref_apply(p.bases, p.out_dims, x) == product_reference(a, b, x)


# ---------------------------------------------------------- reshape / flatten / transpose
@given(any_layouts(), st.data())
def test_reshape_ins_preserves_the_flat_map_and_round_trips(raw, data):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    in_sizes = in_sizes_of(bases)
    n = sum(len(v) for v in bases.values())
    new_in = data.draw(split_bits(n, ["a", "b", "c"]))
    r = ll.reshape_ins(list(new_in.items()))
    assert r.in_dim_sizes == new_in and r.out_dim_sizes == out_sizes
    for k in range(prod(in_sizes.values())):
        assert ref_apply(r.bases, list(out_sizes), unflatten(k, new_in)) == ref_apply(
            bases, list(out_sizes), unflatten(k, in_sizes)
        )
    assert r.reshape_ins(list(in_sizes.items())) == ll
    f = ll.flatten_ins()
    name = next(iter(in_sizes))
    assert f.in_dim_sizes == {name: prod(in_sizes.values())}
    for k in range(prod(in_sizes.values())):
        assert ref_apply(f.bases, list(out_sizes), {name: k}) == ref_apply(bases, list(out_sizes), unflatten(k, in_sizes))


@given(any_layouts(), st.data())
def test_reshape_outs_preserves_the_flat_map_and_round_trips(raw, data):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    in_sizes = in_sizes_of(bases)
    n = sum(s.bit_length() - 1 for s in out_sizes.values())
    new_out = data.draw(split_bits(n, ["p", "q", "s"]))
    r = ll.reshape_outs(list(new_out.items()))
    assert r.out_dim_sizes == new_out and r.in_dim_sizes == in_sizes
    f = ll.flatten_outs()
    flat_name = next(iter(out_sizes))
    for x in all_inputs(in_sizes):
        want = flatten(ref_apply(bases, list(out_sizes), x), out_sizes)
        assert flatten(ref_apply(r.bases, list(new_out), x), new_out) == want
        assert ref_apply(f.bases, [flat_name], x) == {flat_name: want}
    assert r.reshape_outs(list(out_sizes.items())) == ll


@given(raw_layouts(), st.data())
def test_transposes_preserve_apply_up_to_naming(raw, data):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    in_order = data.draw(st.permutations(list(bases)))
    out_order = data.draw(st.permutations(list(out_sizes)))
    ti, to = ll.transpose_ins(in_order), ll.transpose_outs(out_order)
    assert ti.in_dims == list(in_order) and to.out_dims == list(out_order)
    for x in all_inputs(in_sizes_of(bases)):
        want = ref_apply(bases, list(out_sizes), x)
        assert ref_apply(ti.bases, ti.out_dims, x) == want
        assert ref_apply(to.bases, to.out_dims, x) == want
        assert to.out_dims == list(out_order)


# --------------------------------------------------------------- injective / surjective
@given(any_layouts())
def test_injective_surjective_invertible_match_image_counts(raw):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    n_in, n_out = prod(in_sizes_of(bases).values()), prod(out_sizes.values())
    hit = {tuple(y.values()) for y in images(bases, out_sizes, in_sizes_of(bases))}
    event(f"injective={len(hit) == n_in}, surjective={len(hit) == n_out}")
    assert ll.is_injective() == (len(hit) == n_in)
    assert ll.is_surjective() == (len(hit) == n_out)
    assert ll.is_invertible() == (len(hit) == n_in == n_out)


# ------------------------------------------------------------------ free_variable_masks
@given(any_layouts())
def test_free_variable_masks_mark_exactly_the_non_pivot_bits(raw):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    masks = ll.free_variable_masks()
    assert list(masks) == list(bases)
    in_sizes = in_sizes_of(bases)
    mask_flat = flatten(masks, in_sizes)  # masks are bit sets per dim, so this packs them
    # Documented rule: a bit is free iff its basis is in the span of earlier bases.
    n = sum(len(v) for v in bases.values())
    assert {k for k in range(n) if (mask_flat >> k) & 1} == free_bits(bases, out_sizes)
    # Consequences: broadcast (zero) bits are free; the non-free bits map injectively and
    # already reach every image, so each image has a preimage with all free bits 0.
    all_images = set()
    pivot_images = {}
    for x in all_inputs(in_sizes):
        y = tuple(ref_apply(bases, list(out_sizes), x).values())
        all_images.add(y)
        if flatten(x, in_sizes) & mask_flat == 0:
            assert y not in pivot_images, f"pivot bits not injective: {pivot_images.get(y)} and {x}"
            pivot_images[y] = x
    assert set(pivot_images) == all_images
    for d, vs in bases.items():
        for i, v in enumerate(vs):
            if not any(v):
                assert (masks[d] >> i) & 1


# ---------------------------------------------------------------------- num_consecutive
@st.composite
def layouts_with_contiguous_prefix(draw):
    """Raw layouts where one input dim's low bits often map to flat outputs 1, 2, 4, …"""
    bases, out_sizes = draw(raw_layouts())
    dim = draw(st.sampled_from(list(bases)))
    n_out = sum(s.bit_length() - 1 for s in out_sizes.values())
    k = draw(st.integers(0, min(len(bases[dim]), n_out)))
    for i in range(k):
        bases[dim][i] = list(unflatten(1 << i, out_sizes).values())
    return bases, out_sizes, dim


@given(layouts_with_contiguous_prefix())
def test_num_consecutive_is_the_longest_identity_prefix(raw):
    bases, out_sizes, dim = raw
    ll = LinearLayout(bases, out_sizes)
    # Largest 2**k such that dim indices 0 .. 2**k - 1 map to flat outputs 0 .. 2**k - 1.
    want = 1
    while want * 2 <= 1 << len(bases[dim]) and all(
        flatten(ref_apply(bases, list(out_sizes), {dim: x}), out_sizes) == x for x in range(want * 2)
    ):
        want *= 2
    event(f"num_consecutive={want}")
    assert ll.num_consecutive(dim) == want
    assert ll.num_consecutive("no_such_dim") == 1


# ---------------------------------------------------------------- sublayout / resize_in_dim
@given(raw_layouts(), st.data())
def test_sublayout_restricts_inputs_and_projects_outputs(raw, data):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    ins = data.draw(st.permutations(list(bases)))[: data.draw(st.integers(0, len(bases)))]
    outs = data.draw(st.permutations(list(out_sizes)))[: data.draw(st.integers(0, len(out_sizes)))]
    sub = ll.sublayout(ins, outs)
    assert sub.in_dims == list(ins) and sub.out_dim_sizes == {o: out_sizes[o] for o in outs}
    assert sub.out_dims == list(outs)
    for x in all_inputs({d: 1 << len(bases[d]) for d in ins}):
        full = ref_apply(bases, list(out_sizes), x)
        assert ref_apply(sub.bases, list(outs), x) == {o: full[o] for o in outs}
    with pytest.raises(ValueError):
        ll.sublayout(["nope"], [])
    with pytest.raises(ValueError):
        ll.sublayout([], ["nope"])


@given(raw_layouts(), st.data())
def test_resize_in_dim_keeps_low_bits_and_broadcasts_new_ones(raw, data):
    bases, out_sizes = raw
    ll = LinearLayout(bases, out_sizes)
    dim = data.draw(st.sampled_from(list(bases)))
    old = 1 << len(bases[dim])
    new = 1 << data.draw(st.integers(0, len(bases[dim]) + 2))
    r = ll.resize_in_dim(dim, new)
    want_in = {**in_sizes_of(bases), dim: new}
    assert r.in_dim_sizes == want_in and r.in_dims == list(bases)
    for x in all_inputs(want_in):
        # Shrinking keeps indices < new; growing repeats the old map (new high bits broadcast).
        assert ref_apply(r.bases, list(out_sizes), x) == ref_apply(bases, list(out_sizes), {**x, dim: x[dim] % old})
