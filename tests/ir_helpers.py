"""Building small kernels' IR by hand for tests: one op per numbered source line.

``KernelBuilder.op`` gives every op its own :class:`~gluonkit.ir.Location` (line 1, 2, …
with a recognisable source text), so tests can assert which lines an error message shows.
"""

from __future__ import annotations

from contextlib import contextmanager

from gluonkit import ir
from gluonkit.layouts.distributed import AutoLayout

AUTO = AutoLayout()


def tensor(shape, layout=AUTO, element=ir.float32) -> ir.TensorType:
    return ir.TensorType(element, tuple(shape), layout)


class KernelBuilder:
    """A kernel under construction; ``op`` appends at the current block."""

    def __init__(self, args=(), num_warps: int = 4):
        self.func = ir.Function("kernel", [t for _, t in args], [n for n, _ in args],
                                num_warps=num_warps)
        self.builder = ir.Builder(self.func.body)
        self.line = 0

    @property
    def args(self):
        return self.func.args

    def op(self, name, operands=(), types=(), attrs=None, regions=(), src=None) -> ir.Operation:
        """Create op ``name`` on a new line whose source text is ``src``."""
        self.line += 1
        text = src or f"{name}_{self.line} = ..."
        loc = ir.Location("kernel.py", self.line, 4, "kernel", "    " + text)
        with self.builder.located(loc):
            return self.builder.create(name, operands, types, attrs, regions)

    def value(self, name, operands=(), type=None, attrs=None, src=None) -> ir.Value:
        """Create a one-result op and return its result."""
        return self.op(name, operands, [type], attrs, src=src).result

    @contextmanager
    def inside(self, block: ir.Block):
        with self.builder.at_end_of(block):
            yield block

    def finish(self) -> ir.Function:
        self.op("return")
        return self.func

    # -- common ops ---------------------------------------------------------------------
    def arange(self, n, layout=AUTO, src=None):
        return self.value("arange", type=tensor([n], layout, ir.int32), attrs={"start": 0, "end": n}, src=src)

    def full(self, shape, value=1.0, layout=AUTO, element=ir.float32, src=None):
        return self.value("constant", type=tensor(shape, layout, element), attrs={"value": value}, src=src)

    def binary(self, fn, a, b, src=None):
        both_concrete = not (_is_auto(a) or _is_auto(b))
        return self.value("binary", [a, b], a.type if both_concrete else a.type.with_layout(AUTO),
                          {"fn": fn}, src=src)

    def unary(self, fn, a, src=None):
        return self.value("unary", [a], a.type, {"fn": fn}, src=src)

    def expand_dims(self, x, axis, src=None):
        shape = list(x.type.shape)
        shape.insert(axis, 1)
        return self.value("expand_dims", [x], tensor(shape, AUTO, x.type.element), {"axis": axis}, src=src)

    def broadcast(self, x, shape, src=None):
        return self.value("broadcast", [x], tensor(shape, x.type.layout, x.type.element), src=src)

    def set_auto_layout(self, x, layout, src=None):
        return self.value("set_auto_layout", [x], x.type.with_layout(layout), src=src)

    def convert_layout(self, x, layout, src=None):
        return self.value("convert_layout", [x], x.type.with_layout(layout), src=src)

    def reduce_sum(self, x, axis, src=None):
        """``reduce`` with an ``add`` combine region over scalars."""
        element = x.type.element
        combine = ir.Block([element, element])
        with self.inside(combine):
            total = self.value("binary", combine.args, element, {"fn": "add"})
            self.op("yield", [total])
        shape = [s for i, s in enumerate(x.type.shape) if i != axis]
        result = tensor(shape, AUTO, element) if shape else element
        return self.op("reduce", [x], [result], {"axis": axis}, [combine], src=src).result


def _is_auto(v) -> bool:
    return isinstance(v.type.layout, AutoLayout)
