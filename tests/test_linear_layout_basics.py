"""Known-answer checks of LinearLayout on small hand-derived layouts."""

from gluonkit.layouts.linear import LinearLayout


def _rows_of_four():
    # 4 registers along dim1, 8 lanes along dim1 then 4 lanes along dim0: a 4x32 tile.
    return (
        LinearLayout.identity_1d(4, "register", "dim1")
        * LinearLayout.identity_1d(8, "lane", "dim1")
        * LinearLayout.identity_1d(4, "lane", "dim0")
    )


def test_product_stacks_bases_from_low_bits_up():
    ll = _rows_of_four()
    assert ll.bases == {
        "register": [[1, 0], [2, 0]],
        "lane": [[4, 0], [8, 0], [16, 0], [0, 1], [0, 2]],
    }
    assert ll.out_dim_sizes == {"dim1": 32, "dim0": 4}


def test_apply_xors_the_bases_of_set_bits():
    ll = _rows_of_four()
    # lane 9 = bit 0 (-> dim1 4) and bit 3 (-> dim0 1); register 3 -> dim1 1 ^ 2.
    assert ll.apply({"register": 3, "lane": 9}) == {"dim1": 7, "dim0": 1}


def test_invert_then_compose_is_identity():
    ll = _rows_of_four()
    assert ll.is_invertible()
    ident = ll.compose(ll.invert())
    for reg in range(4):
        for lane in range(32):
            assert ident.apply({"register": reg, "lane": lane}) == {"register": reg, "lane": lane}


def test_broadcast_bits_are_free_and_break_injectivity():
    ll = LinearLayout({"lane": [[1], [0], [2]]}, {"dim0": 4})
    assert ll.free_variable_masks() == {"lane": 0b010}
    assert not ll.is_injective() and ll.is_surjective()
