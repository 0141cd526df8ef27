"""What every layout class shares: value equality and hashing from its parameters; and, for
the layouts of tensors and buffers, their linear layout and Gluon's text views of it."""

from __future__ import annotations

import functools
from typing import Callable, Sequence

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

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        method = cls.__dict__.get("to_linear_layout")
        if method is not None:
            cls.to_linear_layout = _memoized(method)

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


_MEMO_LIMIT = 4096  # linear layouts kept per layout class; the memo starts over past it


def _memoized(method: Callable) -> Callable:
    """``method`` (a class's ``to_linear_layout``) remembering its result per (layout, shape).

    Layouts are values and linear layouts immutable, so equal calls may share one result:
    compiling a kernel asks for the same shared-memory and register layouts dozens of times
    (the warp-specialized GEMM: 48 calls for a handful of layouts, a fifth of its Python
    compile time).  Shapes other than sequences of ints (or none, for the layouts that know
    their shape), and layouts with unhashable parameters, are not remembered."""
    memo: dict = {}

    @functools.wraps(method)
    def to_linear_layout(self, shape=None):
        if shape is None:  # the layouts that know their shape
            return method(self)
        if not all(type(extent) is int for extent in shape):
            return method(self, shape)  # (its errors name the bad extent)
        key = (self, tuple(shape))
        try:
            return memo[key]
        except KeyError:
            pass
        except TypeError:  # a layout parameter that cannot be hashed
            return method(self, shape)
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        result = memo[key] = method(self, shape)
        return result
    return to_linear_layout
