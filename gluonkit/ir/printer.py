"""Readable text form of the IR, meant to be pasted into a bug report.

Layouts are printed once at the top as aliases (``#L0 = BlockedLayout(...)``) and referred
to by alias in types, so long layout parameters do not drown the program; every op line
ends with its source location.
"""

from __future__ import annotations

from typing import Dict, List

from .core import Block, Function, Operation, Value
from .types import SharedMemoryDescType, TensorMemoryDescType, TensorType, Type

__all__ = ["print_function"]


class _Printer:
    def __init__(self):
        self.names: Dict[int, str] = {}
        self.layouts: Dict[str, str] = {}
        self.lines: List[str] = []

    def name(self, v: Value) -> str:
        if v.uid not in self.names:
            hint = v.name_hint if v.name_hint and v.name_hint.isidentifier() else ""
            self.names[v.uid] = f"%{hint or ''}{len(self.names)}"
        return self.names[v.uid]

    def layout_alias(self, layout) -> str:
        text = repr(layout)
        if text not in self.layouts:
            self.layouts[text] = f"#L{len(self.layouts)}"
        return self.layouts[text]

    def type(self, t: Type) -> str:
        if isinstance(t, TensorType):
            dims = "x".join(str(s) for s in t.shape)
            return f"tensor<{dims}x{t.element}, {self.layout_alias(t.layout)}>"
        if isinstance(t, (SharedMemoryDescType, TensorMemoryDescType)):
            dims = "x".join(str(s) for s in t.shape)
            alloc = "x".join(str(s) for s in t.alloc_shape)
            kind = "smem" if isinstance(t, SharedMemoryDescType) else "tmem"
            return f"!{kind}<{dims}x{t.element}, {self.layout_alias(t.layout)}, alloc {alloc}>"
        return str(t)

    def attr(self, value) -> str:
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(self.attr(v) for v in value) + "]"
        if isinstance(value, str):
            return repr(value)
        if hasattr(value, "to_linear_layout") or type(value).__name__.endswith("Layout"):
            return self.layout_alias(value)
        return str(value)

    def op(self, op: Operation, indent: str) -> None:
        results = ", ".join(self.name(r) for r in op.results)
        lhs = f"{results} = " if results else ""
        operands = ", ".join(self.name(o) for o in op.operands)
        attrs = {k: v for k, v in op.attrs.items() if v is not None and v is not False}
        attr_text = (" {" + ", ".join(f"{k} = {self.attr(v)}" for k, v in attrs.items()) + "}") if attrs else ""
        types = ""
        if op.results:
            types = " : " + ", ".join(self.type(r.type) for r in op.results)
        loc = f"  // line {op.loc.line}" if op.loc.line else ""
        self.lines.append(f"{indent}{lhs}{op.name} {operands}{attr_text}{types}{loc}".replace("  {", " {"))
        for i, region in enumerate(op.regions):
            self.block(region, indent + "  ", label=f"region {i}")

    def block(self, block: Block, indent: str, label: str) -> None:
        args = ", ".join(f"{self.name(a)}: {self.type(a.type)}" for a in block.args)
        self.lines.append(f"{indent}^{label}({args}):")
        for op in block.ops:
            self.op(op, indent + "  ")


def print_function(func: Function) -> str:
    """The text form of a kernel function."""
    p = _Printer()
    args = ", ".join(f"{p.name(a)}: {p.type(a.type)}" for a in func.args)
    maxnreg = f" maxnreg={func.maxnreg}" if func.maxnreg is not None else ""
    num_ctas = f" num_ctas={func.num_ctas}" if func.num_ctas != 1 else ""
    header = f"func @{func.name}({args}) num_warps={func.num_warps}{num_ctas}{maxnreg} {{"
    for op in func.body.ops:
        p.op(op, "  ")
    aliases = [f"{alias} = {text}" for text, alias in p.layouts.items()]
    return "\n".join(aliases + [header] + p.lines + ["}"])
