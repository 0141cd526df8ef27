"""What every layout class shares: value equality and hashing from its parameters; and, for
the layouts of tensors and buffers, their linear layout and Gluon's text views of it."""

from __future__ import annotations

from typing import Sequence

from .linear import LinearLayout
from .views import hardware_view, tensor_view

__all__ = ["LayoutBase", "TensorLayout"]


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


class TensorLayout(LayoutBase):
    """A layout that places the elements of a tensor (registers) or a buffer (shared memory).

    Subclasses define :attr:`rank`, :meth:`to_linear_layout` and :meth:`_key`; Gluon's two
    text views follow from the linear layout.
    """

    @property
    def rank(self) -> int:
        raise NotImplementedError

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        """The layout of a tensor or buffer of ``shape`` as a linear layout (Triton's conventions)."""
        raise NotImplementedError

    def format_tensor_view(self, shape: Sequence[int]) -> str:
        """Gluon's text view: each element of a ``shape`` tensor with where it is held."""
        return tensor_view(self.to_linear_layout(list(shape)), shape)

    def format_hardware_view(self, shape: Sequence[int]) -> str:
        """Gluon's text view: per hardware index (warp and register, or offset), the element held."""
        return hardware_view(self.to_linear_layout(list(shape)), shape)
