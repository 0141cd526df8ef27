"""What is known about integer and pointer values along each tensor dimension.

For every value the analysis records, per dimension ``d`` (one entry for scalars):

* ``contiguity[d]`` — elements come in runs of this length along ``d`` whose values
  increase by exactly 1 (pointers: by one element);
* ``divisibility[d]`` — the first value of every such run is a multiple of this power of
  two (pointers: in bytes);
* ``constancy[d]`` — elements come in runs of this length along ``d`` with equal values.

The lowering combines these facts with a layout's contiguous registers to choose vector
widths for loads and stores (as Triton's AxisInfo analysis does).  Facts come from
constants, ``arange``, the divisibility-by-16 specialization of kernel arguments, the
``hint`` op (``multiple_of``, ``max_contiguous``) and arithmetic rules; everything else is
the conservative ``(1, 1, 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from ..ir import Function, Operation, PointerType, Value, element_type, shape_of

__all__ = ["AxisInfo", "analyze_axis_info"]

_MAX_DIVISIBILITY = 1 << 30


def _pow2_divisor(n: int) -> int:
    """The largest power of two dividing ``n`` (``_MAX_DIVISIBILITY`` for 0)."""
    if n == 0:
        return _MAX_DIVISIBILITY
    return min(n & -n, _MAX_DIVISIBILITY)


@dataclass(frozen=True)
class AxisInfo:
    """Per-dimension contiguity, divisibility and constancy (see the module docstring)."""

    contiguity: Tuple[int, ...]
    divisibility: Tuple[int, ...]
    constancy: Tuple[int, ...]

    @staticmethod
    def unknown(rank: int) -> "AxisInfo":
        one = (1,) * max(rank, 1)
        return AxisInfo(one, one, one)

    @staticmethod
    def constant(value: int, shape) -> "AxisInfo":
        dims = tuple(shape) or (1,)
        return AxisInfo((1,) * len(dims), (_pow2_divisor(int(value)),) * len(dims), dims)


def _element_bytes(v: Value) -> int:
    ty = element_type(v.type)
    return ty.element.itemsize if isinstance(ty, PointerType) else 1


def _add(a: AxisInfo, b: AxisInfo, scale_b: int = 1) -> AxisInfo:
    """a + scale_b*b, where a run of b's contiguity contributes scale_b per step.

    Used for integer add (scale 1) and ``addptr`` (pointer a, offset b scaled by the
    element size, with pointer contiguity counted in elements).
    """
    contig = tuple(max(min(ca, kb), min(ka, cb)) for ca, cb, ka, kb in
                   zip(a.contiguity, b.contiguity, a.constancy, b.constancy))
    div = tuple(min(da, db * scale_b) for da, db in zip(a.divisibility, b.divisibility))
    const = tuple(min(ka, kb) for ka, kb in zip(a.constancy, b.constancy))
    return AxisInfo(contig, div, const)


def _mul(a: AxisInfo, b: AxisInfo, const_a, const_b) -> AxisInfo:
    """a * b: runs survive only when multiplying by the constant 1."""
    def contig(ca, cb, ka, kb):
        if const_b == 1:
            return ca
        if const_a == 1:
            return cb
        return 1
    c = tuple(contig(*t) for t in zip(a.contiguity, b.contiguity, a.constancy, b.constancy))
    d = tuple(min(da * db, _MAX_DIVISIBILITY) for da, db in zip(a.divisibility, b.divisibility))
    k = tuple(min(ka, kb) for ka, kb in zip(a.constancy, b.constancy))
    return AxisInfo(c, d, k)


def _compare(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """``a < b``-style comparisons of a contiguous run with a value constant over it.

    Within a run of ``a`` aligned to its divisibility and on which ``b`` is constant and
    aligned alike, the comparison's outcome changes at most at a multiple of both
    divisibilities, so runs of ``min(contiguity, divisibilities)`` are constant.
    """
    def runs(x: AxisInfo, y: AxisInfo, d: int) -> int:
        """Constant runs when x is the contiguous side and y the constant side."""
        return min(x.contiguity[d], x.divisibility[d], y.constancy[d], y.divisibility[d]) if y.constancy[d] > 1 else 1

    k = tuple(max(runs(a, b, d), runs(b, a, d), min(a.constancy[d], b.constancy[d]))
              for d in range(len(a.contiguity)))
    return AxisInfo((1,) * len(k), (1,) * len(k), k)


class _Analysis:
    def __init__(self, func: Function):
        self.info: Dict[int, AxisInfo] = {}
        self.constants: Dict[int, int] = {}
        for arg, name in zip(func.args, func.arg_names):
            div = func.specialization.get(name, {}).get("divisibility", 1)
            self.info[arg.uid] = AxisInfo((1,), (div,), (1,))

    def get(self, v: Value) -> AxisInfo:
        return self.info.get(v.uid) or AxisInfo.unknown(len(shape_of(v.type)))

    def visit_block(self, block) -> None:
        for op in block.ops:
            self.visit(op)
            for region in op.regions:
                self.visit_block(region)

    def visit(self, op: Operation) -> None:
        if not op.results:
            return
        res = op.results[0]
        rank = max(len(shape_of(res.type)), 1)
        info = self.rule(op, res)
        if info is None:
            info = AxisInfo.unknown(rank)
        self.info[res.uid] = info

    def rule(self, op: Operation, res: Value):
        n, shape = op.name, shape_of(res.type)
        ops = [self.get(v) for v in op.operands]
        if n == "constant":
            value = op.attrs["value"]
            if isinstance(value, bool) or not isinstance(value, int):
                return AxisInfo((1,) * max(len(shape), 1), (1,) * max(len(shape), 1), tuple(shape) or (1,))
            self.constants[res.uid] = value
            return AxisInfo.constant(value, shape)
        if n == "arange":
            size = op.attrs["end"] - op.attrs["start"]
            return AxisInfo((size,), (_pow2_divisor(op.attrs["start"]),), (1,))
        if n == "splat":
            src = ops[0]
            return AxisInfo((1,) * len(shape), (src.divisibility[0],) * len(shape), tuple(shape))
        if n in ("broadcast",):
            src_shape = shape_of(op.operands[0].type)
            src = ops[0]
            return AxisInfo(
                src.contiguity,
                src.divisibility,
                tuple(dst if s == 1 else k for s, dst, k in zip(src_shape, shape, src.constancy)),
            )
        if n == "expand_dims":
            axis, src = op.attrs["axis"], ops[0]
            ins = lambda t, v: t[:axis] + (v,) + t[axis:]  # noqa: E731
            return AxisInfo(ins(src.contiguity, 1), ins(src.divisibility, src.divisibility[0]), ins(src.constancy, 1))
        if n in ("convert_layout", "set_auto_layout", "hint"):
            info = ops[0]
            if n == "hint":
                mult = op.attrs.get("multiple_of")
                cont = op.attrs.get("max_contiguous")
                if mult:
                    info = AxisInfo(info.contiguity, tuple(max(a, b) for a, b in zip(info.divisibility, mult)), info.constancy)
                if cont:
                    info = AxisInfo(tuple(max(a, b) for a, b in zip(info.contiguity, cont)), info.divisibility, info.constancy)
            return info
        if n == "addptr":
            return _add(ops[0], ops[1], scale_b=_element_bytes(op.operands[0]))
        if n == "binary":
            fn = op.attrs["fn"]
            a, b = ops
            if fn == "add":
                return _add(a, b)
            if fn == "sub" and self.constants.get(op.operands[1].uid) is not None:
                c = self.constants[op.operands[1].uid]
                return AxisInfo(a.contiguity, tuple(min(d, _pow2_divisor(c)) for d in a.divisibility), a.constancy)
            if fn == "mul":
                return _mul(a, b, self.constants.get(op.operands[0].uid), self.constants.get(op.operands[1].uid))
            if fn in ("and", "or", "xor", "maximum", "minimum"):
                # Equal inputs give equal outputs: runs constant in both operands stay constant.
                k = tuple(min(ka, kb) for ka, kb in zip(a.constancy, b.constancy))
                return AxisInfo((1,) * len(k), (1,) * len(k), k)
        if n == "select":
            k = tuple(min(x) for x in zip(*(self.get(v).constancy for v in op.operands)))
            return AxisInfo((1,) * len(k), (1,) * len(k), k)
        if n == "compare":
            return _compare(ops[0], ops[1])
        if n == "cast" and not op.attrs.get("bitcast"):
            return ops[0]
        if n == "program_id" or n == "num_programs":
            return AxisInfo((1,), (1,), (1,))
        return None


def analyze_axis_info(func: Function) -> Dict[int, AxisInfo]:
    """Axis facts for every value of ``func``, keyed by ``Value.uid``."""
    analysis = _Analysis(func)
    analysis.visit_block(func.body)
    return analysis.info
