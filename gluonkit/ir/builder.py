"""Building IR: an insertion point and a current source location.

The frontend moves the builder into regions as it walks the AST; every created op gets the
builder's current location, so errors and debug info point at the user's line.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional, Sequence

from .core import Block, Operation, Value
from .diagnostics import Location, UNKNOWN_LOCATION
from .ops import op_def
from .types import Type

__all__ = ["Builder"]


class Builder:
    """Appends ops to a block at the current location."""

    def __init__(self, block: Optional[Block] = None):
        self.block = block
        self.loc: Location = UNKNOWN_LOCATION

    def create(self, name: str, operands: Sequence[Value] = (), result_types: Sequence[Type] = (),
               attrs: Optional[Dict[str, Any]] = None, regions: Sequence[Block] = ()) -> Operation:
        """Create op ``name`` (which must be in the catalogue) at the insertion point."""
        op_def(name)
        if self.block is None:
            raise RuntimeError("Builder has no insertion block")
        op = Operation(name, operands, result_types, attrs, regions, self.loc)
        return self.block.append(op)

    @contextmanager
    def at_end_of(self, block: Block) -> Iterator[Block]:
        """Temporarily insert into ``block``."""
        saved = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = saved

    @contextmanager
    def located(self, loc: Location) -> Iterator[None]:
        """Temporarily create ops at ``loc``."""
        saved = self.loc
        self.loc = loc
        try:
            yield
        finally:
            self.loc = saved
