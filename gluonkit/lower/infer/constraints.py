"""The constraint store of layout inference: layout groups, pins and relations.

* A **group** is a set of tensor values that must have one layout (union-find over value
  ids): the operands and results of an element-wise op, the values tied by a loop, …
* A **pin** is a group's known layout and where it came from (a concrete layout in the
  IR, a ``set_auto_layout``, a relation, or the default), kept so that a conflict can show
  the user both source lines.
* A **relation** ties two groups through an op that changes the layout in a known way
  (``expand_dims``, ``reduce``, ``permute``, ``reshape``, ``join``, ``split``): knowing
  either side determines the other.

Pinning a group that already has a different layout, or merging two groups pinned to
different layouts, raises :class:`LayoutConflictError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from ...ir import CompilationError, Location, Operation, TensorType, Value
from ...layouts.distributed import AutoLayout, DistributedLinearLayout
from .derive import same_layout

__all__ = ["LayoutInferenceError", "LayoutConflictError", "Pin", "Relation", "Constraints"]


class LayoutInferenceError(CompilationError):
    """Layout inference cannot give every ``AutoLayout`` value a valid layout."""


class LayoutConflictError(LayoutInferenceError):
    """Two different concrete layouts meet in values that must share one layout."""


@dataclass(frozen=True)
class Pin:
    """A group's layout, the shape it was stated for, and its origin (for messages)."""

    layout: object
    shape: Tuple[int, ...]
    loc: Location
    why: str


@dataclass(frozen=True)
class Relation:
    """``dst``'s layout is ``forward(src's layout)``; ``src``'s is ``backward(dst's)``.

    Either function raises :class:`~gluonkit.lower.infer.derive.Underivable` when the
    given layout determines no valid layout on the other side.
    """

    op: Operation
    src: Value
    dst: Value
    forward: Callable[[object], object]
    backward: Callable[[object], object]


def _describe(layout) -> str:
    return repr(layout)


def _origin(value: Value) -> str:
    """Why a value with a concrete layout in the IR has it (for conflict notes)."""
    op = value.defining_op
    if op is None:
        return "the layout of this block argument"
    if op.name == "set_auto_layout":
        return "set by set_auto_layout"
    return f"the layout of the {op.name} result here"


class Constraints:
    """Groups of tensor values (union-find), their pins, and the relations between them."""

    def __init__(self):
        self.values: Dict[int, Value] = {}  # every tensor value, in program order
        self._parent: Dict[int, int] = {}
        self._pins: Dict[int, Pin] = {}
        self.relations: List[Relation] = []

    # ----------------------------------------------------------------- membership
    def add(self, value: Value) -> None:
        """Register a tensor value; a concrete layout in its type pins its group."""
        if not isinstance(value.type, TensorType) or value.uid in self.values:
            return
        self.values[value.uid] = value
        self._parent[value.uid] = value.uid
        layout = value.type.layout
        if not isinstance(layout, AutoLayout):
            self.pin(value, Pin(layout, value.type.shape, value.loc, _origin(value)))

    def find(self, value: Value) -> int:
        """The id of the representative of ``value``'s group."""
        uid = value.uid
        root = uid
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[uid] != root:
            self._parent[uid], uid = root, self._parent[uid]
        return root

    def pin_of(self, value: Value) -> Optional[Pin]:
        return self._pins.get(self.find(value))

    def pin_of_root(self, root: int) -> Optional[Pin]:
        return self._pins.get(root)

    # ----------------------------------------------------------------- constraints
    def unify(self, values: Iterable[Value], op: Operation) -> None:
        """``values`` (tensors among them) must share one layout, because of ``op``."""
        tensors = [v for v in values if isinstance(v.type, TensorType)]
        for v in tensors:
            self.add(v)
        for v in tensors[1:]:
            self._merge(self.find(tensors[0]), self.find(v), op)

    def pin(self, value: Value, pin: Pin, op: Optional[Operation] = None) -> None:
        """``value``'s group has layout ``pin.layout`` (``op`` is where they meet, if any)."""
        self.add(value)
        root = self.find(value)
        old = self._pins.get(root)
        self._pins[root] = pin if old is None else self._combine(old, pin, op)

    def relate(self, relation: Relation) -> None:
        self.add(relation.src)
        self.add(relation.dst)
        self.relations.append(relation)

    def _merge(self, a: int, b: int, op: Operation) -> None:
        if a == b:
            return
        pa, pb = self._pins.pop(a, None), self._pins.pop(b, None)
        self._parent[b] = a
        if pa is not None and pb is not None:
            self._pins[a] = self._combine(pa, pb, op)
        elif pa is not None or pb is not None:
            self._pins[a] = pa or pb

    def _combine(self, old: Pin, new: Pin, op: Optional[Operation]) -> Pin:
        """The pin of a group that both pins describe, or a conflict error."""
        if not _agree(old, new):
            raise conflict_error(old, new, op, "these values must share one layout")
        # Equal placements: keep the named layout over a derived linear one (readability).
        if isinstance(old.layout, DistributedLinearLayout) and not isinstance(new.layout, DistributedLinearLayout):
            return new
        return old


def _agree(a: Pin, b: Pin) -> bool:
    """Two pins of one group describe one layout.

    A group may hold several shapes (``broadcast`` ties ``[1, N]`` to ``[M, N]``): named
    layouts are compared at the larger shape, where every bit of their placement shows; a
    layout tied to one shape (:class:`DistributedLinearLayout`) at the smaller one, which
    the larger one's projection must match.
    """
    big = tuple(map(max, a.shape, b.shape))
    if not any(isinstance(p.layout, DistributedLinearLayout) and p.layout.shape != big for p in (a, b)):
        return same_layout(a.layout, b.layout, big)
    return same_layout(a.layout, b.layout, tuple(map(min, a.shape, b.shape)))


def conflict_error(a: Pin, b: Pin, op: Optional[Operation], what: str) -> LayoutConflictError:
    """The error for layouts ``a`` and ``b`` meeting (at ``op``), showing both origins."""
    where = f" at {op.name}" if op is not None else ""
    message = (
        f"layout conflict{where}: {what}, but one is {_describe(a.layout)} and the other "
        f"{_describe(b.layout)}; insert gl.convert_layout(value, layout) where one should "
        f"become the other"
    )
    primary = op.loc if op is not None and op.loc.line else b.loc
    notes = [(f"{_describe(p.layout)} is {p.why}", p.loc) for p in (a, b)]
    notes = [(text, loc) for text, loc in notes if loc != primary or not loc.line]
    return LayoutConflictError(message, primary, notes)
