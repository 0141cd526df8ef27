"""The IR: printer, verifier, and the per-op registries agreeing with the op catalogue."""

import pytest

from gluonkit import ir
from gluonkit.interpret import RULES as INTERPRET_RULES
from gluonkit.ir.verifier import RULES
from gluonkit.layouts.distributed import BlockedLayout, SliceLayout
from gluonkit.lower.codegen import LOWERINGS
from gluonkit.lower.infer.rules import INFER_RULES

from ir_helpers import AUTO, KernelBuilder, tensor

B1 = BlockedLayout([2], [32], [4], [0])
C1 = BlockedLayout([1], [32], [4], [0])
P = BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])


# ------------------------------------------------------------------ registries vs catalogue
# Each stage that handles ops keeps one table op name -> rule; every catalogue op must be
# in every table, so no op is half-added.  A new stage adds its (name, loader) pair here.
REGISTRIES = [
    ("verifier", lambda: RULES),
    ("layout inference", lambda: INFER_RULES),
    ("interpreter", lambda: INTERPRET_RULES),
    ("lowering", lambda: LOWERINGS),
]


@pytest.mark.parametrize("stage, load", REGISTRIES, ids=[name for name, _ in REGISTRIES])
def test_every_op_has_a_rule_in_every_stage(stage, load):
    table = load()
    missing = sorted(set(ir.OPS) - set(table))
    unknown = sorted(set(table) - set(ir.OPS))
    assert not missing, f"{stage} has no rule for {missing}"
    assert not unknown, f"{stage} has rules for ops not in the catalogue: {unknown}"


# ------------------------------------------------------------------------------ printer
def _small_kernel():
    k = KernelBuilder(args=[("p", ir.PointerType(ir.float32)), ("n", ir.int32)])
    x = k.arange(64, layout=B1)
    y = k.arange(64, layout=B1)
    z = k.binary("add", x, y)
    k.reduce_sum(k.value("cast", [z], tensor([64], B1), {"to": ir.float32}), 0)
    return k.finish()


def test_printer_names_layouts_once_and_marks_lines():
    text = ir.print_function(_small_kernel())
    lines = text.splitlines()
    assert lines[0] == f"#L0 = {B1!r}"  # one alias for the three uses of B1
    assert sum(line.startswith("#L") for line in lines) == 1
    assert lines[1] == "func @kernel(%p0: ptr<float32>, %n1: int32) num_warps=4 {"
    assert "  %2 = arange {start = 0, end = 64} : tensor<64xint32, #L0>  // line 1" in lines
    assert "  %4 = binary %2, %3 {fn = 'add'} : tensor<64xint32, #L0>  // line 3" in lines
    assert lines[-1] == "}"


def test_printer_nests_regions_under_their_op():
    text = ir.print_function(_small_kernel())
    reduce_at = text.index("= reduce ")
    region_at = text.index("^region 0(")
    yield_at = text.index("yield ")
    assert reduce_at < region_at < yield_at
    assert "    ^region 0(%7: float32, %8: float32):" in text.splitlines()


# ----------------------------------------------------------------------------- verifier
def test_verifier_accepts_a_well_formed_kernel():
    ir.verify(_small_kernel(), concrete=True)


def _fails(func, *fragments, concrete=False):
    with pytest.raises(ir.CompilationError) as err:
        ir.verify(func, concrete=concrete)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_verifier_rejects_element_wise_shape_mismatch_at_its_line():
    k = KernelBuilder()
    a, b = k.arange(64, B1), k.arange(32, B1)
    k.value("binary", [a, b], a.type, {"fn": "add"}, src="c = a + b")
    _fails(k.finish(), "c = a + b", "different shapes [64] and [32]")


def test_verifier_rejects_element_wise_layout_mismatch_and_suggests_conversion():
    k = KernelBuilder()
    a, b = k.arange(64, B1), k.arange(64, C1)
    k.value("binary", [a, b], a.type, {"fn": "add"})
    _fails(k.finish(), "different layouts", "convert_layout")


def test_verifier_rejects_expand_dims_of_a_non_slice():
    k = KernelBuilder()
    x = k.arange(64, B1)
    k.value("expand_dims", [x], tensor([64, 1], P, ir.int32), {"axis": 1})
    _fails(k.finish(), f"must be {SliceLayout(1, P)!r}")


def test_verifier_accepts_expand_dims_of_the_right_slice():
    k = KernelBuilder()
    x = k.arange(64, SliceLayout(1, P))
    k.value("expand_dims", [x], tensor([64, 1], P, ir.int32), {"axis": 1})
    ir.verify(k.finish(), concrete=True)


def test_verifier_rejects_arange_of_non_power_of_two_length():
    k = KernelBuilder()
    k.value("arange", type=tensor([12], B1, ir.int32), attrs={"start": 0, "end": 12})
    _fails(k.finish(), "positive power of two")


def test_verifier_rejects_values_used_outside_their_region():
    k = KernelBuilder(args=[("c", ir.int1)])
    then, other = ir.Block(), ir.Block()
    with k.inside(then):
        inner = k.arange(64, B1)
        k.op("yield")
    with k.inside(other):
        k.op("yield")
    k.op("if", [k.args[0]], [], regions=[then, other])
    k.unary("neg", inner)
    _fails(k.finish(), "not defined in scope")


def test_verifier_rejects_a_loop_that_changes_a_carried_type():
    k = KernelBuilder(args=[("n", ir.int32)])
    zero = k.value("constant", type=ir.int32, attrs={"value": 0})
    init = k.arange(64, B1)
    body = ir.Block([ir.int32, tensor([64], C1, ir.int32)])
    with k.inside(body):
        k.op("yield", [body.args[1]])
    k.op("for", [zero, k.args[0], zero, init], [tensor([64], B1, ir.int32)], regions=[body])
    _fails(k.finish(), "carried value 0 changes type")


def test_verifier_requires_return_and_terminators_last():
    k = KernelBuilder()
    k.arange(64, B1)
    _fails(k.func, "must end with return")
    k.op("return")
    k.arange(64, B1)
    k.op("return")
    _fails(k.func, "must be the last op")


def test_concrete_verification_rejects_leftover_auto_layouts():
    k = KernelBuilder()
    k.arange(64, AUTO, src="x = gl.arange(0, 64)")
    func = k.finish()
    ir.verify(func)  # fine before inference
    _fails(func, "x = gl.arange(0, 64)", "AutoLayout", concrete=True)
