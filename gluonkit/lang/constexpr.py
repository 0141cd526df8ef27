"""``gl.constexpr``: marks compile-time values.

It is used three ways, as in Gluon:

* as a parameter annotation, ``def k(x_ptr, BLOCK: gl.constexpr)`` — the kernel is
  specialized on (compiled separately for) each value of ``BLOCK``;
* as an annotated local, ``XBLOCK: gl.constexpr = 128`` — the name stays a compile-time
  value (a plain ``x = 128`` makes a runtime ``int32`` scalar, as in Triton);
* as a wrapper, ``gl.constexpr(128)`` — for module-level globals a kernel may read, and for
  launch arguments that should be compile-time without an annotation.

Inside the frontend compile-time values are plain Python objects; :func:`unwrap` strips the
wrapper wherever one arrives.
"""

from __future__ import annotations

from typing import Any

__all__ = ["constexpr", "unwrap", "is_constexpr_annotation"]


class constexpr:  # noqa: N801 - Gluon's spelling
    """A compile-time value (see the module docstring)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = unwrap(value)

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return self.value == unwrap(other)

    def __hash__(self) -> int:
        return hash(self.value)


def unwrap(value: Any) -> Any:
    """``value`` without its :class:`constexpr` wrapper (tuples element by element)."""
    if isinstance(value, constexpr):
        return value.value
    if type(value) is tuple:
        return tuple(unwrap(v) for v in value)
    return value


def is_constexpr_annotation(annotation: Any) -> bool:
    """Whether a parameter annotation means "compile-time" (the class, or its name as a
    string under ``from __future__ import annotations``)."""
    if annotation is constexpr:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"
