"""What every layout class shares: value equality and hashing from its parameters."""

from __future__ import annotations

__all__ = ["LayoutBase"]


class LayoutBase:
    """Layouts are values: two are equal when they are of one class with equal parameters.

    Subclasses define :meth:`_key`, the tuple of parameters that defines the layout.
    """

    def _key(self) -> tuple:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))
