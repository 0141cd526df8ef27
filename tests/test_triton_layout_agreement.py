"""Every layout class agrees with Triton 3.9, basis for basis.

``tests/data/triton39_layouts.json`` holds what Triton 3.9's own C++ layout code computed
for about 3,500 layouts and shapes (written by ``scripts/gen_triton_layout_reference.py``
under the Triton reference environment; Triton is not needed to run this test).  Each
case is rebuilt here with gluonkit's class of the same name and arguments, and its linear
layout must have exactly Triton's bases; where Triton rejected the input, gluonkit must
raise a ValueError.  ``repr`` must match Gluon's too (Gluon code embeds it in tensor
descriptor signatures), and so must the text views ``format_tensor_view`` /
``format_hardware_view``.  The few deliberate differences are spelled out in
:func:`deliberate_difference` and docs/decisions.rst.
"""

import json
from pathlib import Path

import pytest

from gluonkit import layouts as L

DATA = json.loads((Path(__file__).parent / "data" / "triton39_layouts.json").read_text())


def cases_of(group):
    """The cases of ``group``, each with its layout spec and Triton's ``repr`` inlined (the
    file stores every layout once and cases refer to it by index)."""
    layouts = DATA[group]["layouts"]
    return [{**case, **layouts[case["layout"]]} for case in DATA[group]["cases"]]


def build(spec):
    """The gluonkit layout of a case spec ``{"class": name, "args": {...}}``."""
    args = {k: build(v) if isinstance(v, dict) and "class" in v else v for k, v in spec["args"].items()}
    return getattr(L, spec["class"])(**args)


def gluonkit_bases(layout, shape):
    ll = layout.to_linear_layout(shape)
    return {d: ll.bases[d] for d in ll.in_dims}


def triton_bases(case):
    """Triton's bases under gluonkit's input-dimension names (empty dims dropped as gluonkit
    omits them where Triton lists none)."""
    bases = dict(case["bases"])
    bases.pop("alignment", None)
    return bases


def mismatches(cases, compare):
    """Run ``compare`` on every case; the failures as readable lines."""
    bad = []
    for case in cases:
        try:
            problem = compare(case)
        except Exception as exc:  # an unexpected exception is a mismatch to report, not a crash
            problem = f"raised {type(exc).__name__}: {exc}"
        if problem:
            bad.append(f"{case.get('repr') or case.get('layout')} shape={case.get('shape')}: {problem}")
    return bad


def rejects(fn, *args):
    """None when ``fn(*args)`` raises ValueError (as Triton rejected the input), else a complaint."""
    try:
        result = fn(*args)
    except ValueError:
        return None
    return f"Triton rejects this input, gluonkit returned {result!r}"


def deliberate_difference(case):
    """Where gluonkit rejects on purpose what Triton 3.9 accepts (see docs/decisions.rst)."""
    spec, shape = case["layout"], case["shape"]
    args = spec["args"]
    if spec["class"] == "NVMMASharedLayout" and args.get("transposed") and args["swizzle_byte_width"] == 0:
        # Triton's unswizzled transposed layout of rank > 2 leaves offsets unused (zero
        # bases inside the buffer); gluonkit defines the transposed layout for rank 2 only.
        return len(shape) > 2
    return False


def compare_linear(case):
    expected = case["bases"]
    if deliberate_difference(case):
        return rejects(lambda: build(case["layout"]).to_linear_layout(case["shape"]))
    if expected is None and case["layout"]["class"].endswith("SharedLayout") and all(s == 1 for s in case["shape"]):
        # A one-element buffer: Triton's C++ layout exists, but Gluon's Python
        # SharedLinearLayout cannot hold zero offset bases, so the generator saw an error.
        # gluonkit answers with the empty layout.
        got = gluonkit_bases(build(case["layout"]), case["shape"])
        return None if got == {"offset": [], "block": []} else f"one-element buffer: {got}"
    if expected is None:  # gluonkit may reject the parameters already, or only the shape
        return rejects(lambda: build(case["layout"]).to_linear_layout(case["shape"]))
    layout = build(case["layout"])
    got = gluonkit_bases(layout, case["shape"])
    want = triton_bases(case)
    for d in set(got) | set(want):
        if got.get(d, []) != want.get(d, []):
            return f"{d}: gluonkit {got.get(d, [])} != triton {want.get(d, [])}"
    if "alignment" in expected and getattr(layout, "alignment", expected["alignment"]) != expected["alignment"]:
        return f"alignment: gluonkit {layout.alignment} != triton {expected['alignment']}"
    return None


GROUPS = ["blocked", "slice", "distributed_linear", "mma", "nvmma_shared", "swizzled_shared", "shared_linear", "tmem"]


@pytest.mark.parametrize("group", GROUPS)
def test_linear_layouts_match_triton(group):
    cases = cases_of(group)
    assert len(cases) > 0
    bad = mismatches(cases, compare_linear)
    assert not bad, f"{len(bad)} of {len(cases)} {group} cases differ from Triton 3.9:\n" + "\n".join(bad[:15])


def compare_repr(case):
    try:
        layout = build(case["layout"])
    except ValueError:  # rejected parameters have no repr to compare (compare_linear checks them)
        return None if case["bases"] is None else "gluonkit rejects parameters that Triton accepts"
    return None if repr(layout) == case["repr"] else f"gluonkit repr {layout!r}"


@pytest.mark.parametrize("group", GROUPS)
def test_repr_matches_gluon(group):
    bad = mismatches(cases_of(group), compare_repr)
    assert not bad, f"{len(bad)} {group} reprs differ from Gluon 3.9:\n" + "\n".join(bad[:10])


def test_tmem_register_layouts_match_triton():
    def compare(case):
        layout = build(case["layout"])
        args = (case["bits"], case["shape"], layout, case["num_warps"], case["instr_variant"])
        if case["result"] is None:
            return rejects(L.get_tmem_reg_layout, *args)
        got = gluonkit_bases(L.get_tmem_reg_layout(*args), case["shape"])
        for d, want in case["result"].items():
            if got.get(d, []) != want:
                where = f"{case['bits']}-bit {case['num_warps']} warps {case['instr_variant']}"
                return f"{where}: {d}: gluonkit {got.get(d, [])} != triton {want}"
        return None

    cases = DATA["tmem_reg"]
    bad = mismatches(cases, compare)
    assert not bad, f"{len(bad)} of {len(cases)} TMEM register layouts differ from Triton 3.9:\n" + "\n".join(bad[:15])


def test_nvmma_get_default_for_matches_gluon():
    def compare(case):
        args = (case["block_shape"], case["bits"], case["transposed"], case["fp4_padded"], case["cga_layout"])
        if case["repr"] is None:
            return rejects(L.NVMMASharedLayout.get_default_for, *args)
        got = repr(L.NVMMASharedLayout.get_default_for(*args))
        return None if got == case["repr"] else f"gluonkit {got} != gluon {case['repr']}"

    bad = mismatches(DATA["nvmma_default_for"], compare)
    assert not bad, "\n".join(bad)


def test_padded_with_identity_for_matches_gluon():
    def compare(case):
        layout = L.PaddedSharedLayout.with_identity_for(case["pairs"], case["shape"], case["order"], case["cga_layout"])
        if [list(v) for v in layout.offset_bases] != case["offset_bases"]:
            return f"offset_bases {layout.offset_bases} != {case['offset_bases']}"
        return None if repr(layout) == case["repr"] else f"gluonkit repr {layout!r} != {case['repr']}"

    bad = mismatches(DATA["padded_with_identity_for"], compare)
    assert not bad, "\n".join(bad)


def test_text_views_match_gluon():
    def compare(case):
        layout = build(case["layout"])
        for kind in ("tensor", "hardware"):
            got = getattr(layout, f"format_{kind}_view")(case["shape"])
            if got != case[kind]:
                return f"{kind} view differs:\ngluonkit:\n{got[:600]}\ngluon:\n{case[kind][:600]}"
        return None

    cases = DATA["views"]
    assert len(cases) > 5
    bad = mismatches(cases, compare)
    assert not bad, "\n".join(bad)
