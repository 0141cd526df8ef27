"""The runtime values kernels compute with, and the ``@builtin`` calling convention.

A :class:`tensor` wraps one IR :class:`~gluonkit.ir.Value`: a scalar (``shape == ()``,
e.g. a kernel argument or ``program_id``) or a distributed tensor.  Its methods mirror
Gluon's tensor methods; like every ``gl.*`` builtin they take a hidden ``_semantic``
argument that the frontend passes when it meets the call in a kernel, so calling them
from plain Python fails with a message instead of doing something wrong.
"""

from __future__ import annotations

from typing import Tuple

from ..ir import Value
from ..ir.types import TensorType, element_type, layout_of, shape_of
from ..sync.builtin import builtin  # the one calling convention of lang's and sync's builtins

__all__ = ["tensor", "builtin", "is_builtin", "shape_args", "tensor_member"]


def is_builtin(fn) -> bool:
    """Whether ``fn`` (a function or bound method) is a kernel builtin."""
    return bool(getattr(fn, "__gluonkit_builtin__", False))


class tensor:  # noqa: N801 - Gluon's spelling
    """A runtime value in a kernel: an IR value plus Gluon's tensor methods."""

    __slots__ = ("handle",)

    def __init__(self, handle: Value):
        self.handle = handle

    @property
    def type(self):
        """The IR type: a ``DType``/``PointerType`` for scalars, else a ``TensorType``."""
        return self.handle.type

    @property
    def dtype(self):
        """The element type."""
        return element_type(self.handle.type)

    @property
    def shape(self) -> Tuple[int, ...]:
        """The shape; ``()`` for a scalar."""
        return tuple(shape_of(self.handle.type))

    @property
    def layout(self):
        """The distributed layout (``None`` for a scalar)."""
        return layout_of(self.handle.type)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def is_block(self) -> bool:
        """Whether this is a distributed tensor rather than a scalar."""
        return isinstance(self.handle.type, TensorType)

    def __bool__(self):
        raise TypeError("a runtime tensor has no compile-time truth value")

    def __repr__(self) -> str:
        return f"tensor({self.handle.type})"

    # Methods: ``to`` here; the builtins marked @tensor_member add the rest (x.sum(), x.reshape() …).
    @builtin
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
        return _semantic.cast(self, dtype, bitcast=bitcast, rounding=fp_downcast_rounding)


def tensor_member(fn):
    """Also make the builtin ``fn`` a method of :class:`tensor` (``x.cumsum(0)`` is
    ``gl.cumsum(x, 0)``), as Gluon does for the builtins whose first argument is a tensor."""
    setattr(tensor, fn.__name__, fn)
    return fn


def shape_args(args) -> tuple:
    """``f(2, 3)`` and ``f((2, 3))`` / ``f([2, 3])`` both mean the tuple ``(2, 3)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)
