"""The IR's building blocks: values, operations, blocks and functions.

The IR is typed SSA with structured control flow.  An :class:`Operation` has a name from
the op catalogue (:mod:`gluonkit.ir.ops`), operands, results, attributes, nested blocks
(its regions; each region is a single :class:`Block` with arguments) and a source
location.  A kernel is one :class:`Function` whose body is a block; calls to other
``@jit`` functions are inlined by the frontend, so there is no call op.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .diagnostics import Location, UNKNOWN_LOCATION
from .types import Type

__all__ = ["Value", "Operation", "Block", "Function"]

_ids = itertools.count()


class Value:
    """An SSA value: a result of an operation or an argument of a block.

    ``type`` may be replaced once, by layout inference, when an ``AutoLayout`` is resolved.
    """

    __slots__ = ("type", "owner", "index", "name_hint", "uid")

    def __init__(self, type: Type, owner: "Operation | Block | None" = None, index: int = 0,
                 name_hint: str = ""):
        self.type = type
        self.owner = owner
        self.index = index
        self.name_hint = name_hint
        self.uid = next(_ids)

    @property
    def defining_op(self) -> Optional["Operation"]:
        return self.owner if isinstance(self.owner, Operation) else None

    @property
    def loc(self) -> Location:
        """Where the value was made: its op's location, or its block's parent op's."""
        if isinstance(self.owner, Operation):
            return self.owner.loc
        if isinstance(self.owner, Block) and self.owner.parent_op is not None:
            return self.owner.parent_op.loc
        return UNKNOWN_LOCATION

    def __repr__(self) -> str:
        return f"Value#{self.uid}: {self.type}"


class Operation:
    """One IR operation. Create it through :class:`gluonkit.ir.builder.Builder`."""

    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "parent")

    def __init__(self, name: str, operands: Sequence[Value], result_types: Sequence[Type],
                 attrs: Optional[Dict[str, Any]] = None, regions: Sequence["Block"] = (),
                 loc: Location = UNKNOWN_LOCATION):
        self.name = name
        self.operands: List[Value] = list(operands)
        self.results: List[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: Dict[str, Any] = dict(attrs or {})
        self.regions: List[Block] = list(regions)
        for r in self.regions:
            r.parent_op = self
        self.loc = loc
        self.parent: Optional[Block] = None

    @property
    def result(self) -> Value:
        """The single result (an error for ops with zero or several results)."""
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not one")
        return self.results[0]

    def walk(self) -> Iterator["Operation"]:
        """This op, then every op nested in its regions, in program order."""
        yield self
        for region in self.regions:
            yield from region.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


class Block:
    """A straight-line list of operations with typed arguments (one region of an op)."""

    __slots__ = ("args", "ops", "parent_op")

    def __init__(self, arg_types: Sequence[Type] = (), arg_names: Sequence[str] = ()):
        names = list(arg_names) + [""] * (len(arg_types) - len(arg_names))
        self.args: List[Value] = [Value(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: List[Operation] = []
        self.parent_op: Optional[Operation] = None

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> Optional[Operation]:
        return self.ops[-1] if self.ops else None

    def walk(self) -> Iterator[Operation]:
        for op in self.ops:
            yield from op.walk()


class Function:
    """A kernel: named, typed arguments and a body block ending in ``return``.

    ``constexprs`` records the compile-time arguments it was specialized on and
    ``specialization`` the runtime-argument facts (e.g. divisibility by 16) it assumes;
    ``maxnreg`` is the launch's register cap per thread (``None``: none); ``num_ctas`` the
    CTAs of each cluster (1: no cluster; see ``docs/clusters.rst``).
    """

    def __init__(self, name: str, arg_types: Sequence[Type], arg_names: Sequence[str],
                 loc: Location = UNKNOWN_LOCATION, constexprs: Optional[Dict[str, Any]] = None,
                 specialization: Optional[Dict[str, Any]] = None, num_warps: int = 4,
                 maxnreg: Optional[int] = None, num_ctas: int = 1):
        self.name = name
        self.body = Block(arg_types, arg_names)
        self.arg_names = list(arg_names)
        self.loc = loc
        self.constexprs = dict(constexprs or {})
        self.specialization = dict(specialization or {})
        self.num_warps = num_warps
        self.maxnreg = maxnreg
        self.num_ctas = num_ctas

    @property
    def args(self) -> List[Value]:
        return self.body.args

    def walk(self) -> Iterator[Operation]:
        return self.body.walk()
