"""Source locations and the error every user mistake becomes.

Each IR op carries a :class:`Location` (file, line, column, function and the source line's
text).  :class:`CompilationError` formats a message with that excerpt and a caret, so any
stage — frontend, verifier, layout inference, lowering, interpreter — reports the user's
own line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["Location", "CompilationError", "UnsupportedFeatureError", "format_excerpt", "UNKNOWN_LOCATION"]


@dataclass(frozen=True)
class Location:
    """Where an op came from in the user's Python source (1-based line, 0-based column).

    ``inlined_at`` is the location of the call through which a ``@jit`` function's body was
    inlined (itself possibly inlined elsewhere), so errors can show the whole call chain.
    """

    file: str = "<unknown>"
    line: int = 0
    col: int = 0
    function: str = ""
    source_line: str = ""
    inlined_at: Optional["Location"] = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.col + 1}"
        return f"{where} in {self.function}" if self.function else where


UNKNOWN_LOCATION = Location()


def format_excerpt(loc: Location) -> str:
    """The source line of ``loc`` with a caret under its column (empty if unknown)."""
    if not loc.source_line:
        return ""
    text = loc.source_line.rstrip("\n")
    stripped = text.lstrip()
    indent = len(text) - len(stripped)
    caret_col = max(0, loc.col - indent)
    return f"    {stripped}\n    {' ' * caret_col}^"


class CompilationError(Exception):
    """A mistake in a kernel, reported at the user's source line(s).

    ``message`` says what was expected and what was found; ``loc`` is the main location;
    ``notes`` are further ``(text, location)`` pairs (e.g. where a conflicting layout was
    set), each shown with its own excerpt.
    """

    def __init__(self, message: str, loc: Optional[Location] = None,
                 notes: Sequence[tuple] = ()):
        self.message = message
        self.loc = loc or UNKNOWN_LOCATION
        self.notes = list(notes)
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.loc.line:
            parts.append(f"at {self.loc}:")
            excerpt = format_excerpt(self.loc)
            if excerpt:
                parts.append(excerpt)
        caller = self.loc.inlined_at
        while caller is not None:
            parts.append(f"inlined from {caller}:")
            excerpt = format_excerpt(caller)
            if excerpt:
                parts.append(excerpt)
            caller = caller.inlined_at
        parts.append(self.message)
        for text, loc in self.notes:
            if loc is not None and loc.line:
                parts.append(f"note: {text} (at {loc}):")
                excerpt = format_excerpt(loc)
                if excerpt:
                    parts.append(excerpt)
            else:
                parts.append(f"note: {text}")
        return "\n".join(parts)


class UnsupportedFeatureError(CompilationError):
    """A Gluon 3.9 name or option whose feature gluonkit does not support yet (see
    :mod:`gluonkit.lang.unsupported`); here so that ``sync/`` can raise it too."""
