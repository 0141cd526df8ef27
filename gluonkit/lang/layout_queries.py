"""Compile-time questions about layouts: Gluon 3.9's ``to_linear_layout`` and ``bank_conflicts``.

Both are builtins that build no IR: they answer from the layout algebra
(:mod:`gluonkit.layouts`) while the kernel is being compiled, so their results can be
``gl.constexpr`` values, ``static_assert`` conditions or arguments to other layouts.
"""

from __future__ import annotations

from ..ir.types import SharedMemoryDescType, TensorType
from ..layouts.banks import bank_conflicts as _count_conflicts
from ..layouts.distributed import AutoLayout, DistributedLayout, DistributedLinearLayout
from ..layouts.shared import SharedLayout, SharedLinearLayout
from ..layouts.tmem import TensorMemoryLayout, TensorMemoryScalesLayout
from .constexpr import unwrap
from .errors import ArgumentError, ShapeMismatchError, TypeMismatchError
from .tensor import builtin

__all__ = ["to_linear_layout", "bank_conflicts"]


@builtin
def to_linear_layout(layout, shape, _semantic=None):
    """``layout`` for a tensor of ``shape`` as its linear layout: a
    ``DistributedLinearLayout`` for a distributed layout, a ``SharedLinearLayout`` for a
    shared one (with the alignment the original needs), the algebra's ``LinearLayout``
    (``row``/``col`` inputs) for a tensor-memory layout.  ``AutoLayout`` and layouts that
    already are linear come back unchanged, as in Gluon."""
    sem = _semantic
    layout = unwrap(layout)
    if not isinstance(layout, (DistributedLayout, SharedLayout, TensorMemoryLayout, TensorMemoryScalesLayout)):
        sem.error(f"to_linear_layout expects a distributed, shared or tensor-memory layout, got {layout!r}",
                  TypeMismatchError)
    if isinstance(layout, (AutoLayout, DistributedLinearLayout, SharedLinearLayout)):
        return layout
    shape = [sem.require_int(s, "to_linear_layout shape") for s in unwrap(shape)]
    try:
        linear = layout.to_linear_layout(shape)
    except ValueError as e:
        sem.error(f"to_linear_layout({layout!r}, {shape}): {e}", ShapeMismatchError)
    if isinstance(layout, DistributedLayout):
        return DistributedLinearLayout.from_linear_layout(linear)
    if isinstance(layout, SharedLayout):
        b = linear.bases
        return SharedLinearLayout(b["offset"], b.get("block", []), getattr(layout, "alignment", 16))
    return linear


@builtin
def bank_conflicts(distr_ty, shared_ty, _semantic=None):
    """Extra shared-memory wavefronts per wavefront (0 = conflict-free) when a warp reads or
    writes a tensor of type ``distr_ty`` (``x.type``) with ``ld.shared``/``st.shared`` in a
    buffer of type ``shared_ty`` (``smem.type``), vectorized as the lowering does."""
    sem = _semantic
    distr_ty, shared_ty = unwrap(distr_ty), unwrap(shared_ty)
    if not isinstance(distr_ty, TensorType):
        sem.error(f"bank_conflicts expects a distributed tensor type (x.type) first, got {distr_ty!r}",
                  TypeMismatchError)
    if not isinstance(shared_ty, SharedMemoryDescType):
        sem.error(f"bank_conflicts expects a shared memory descriptor type (smem.type) second, got {shared_ty!r}",
                  TypeMismatchError)
    if tuple(distr_ty.shape) != tuple(shared_ty.shape):
        sem.error(f"bank_conflicts: register shape {list(distr_ty.shape)} and shared shape "
                  f"{list(shared_ty.shape)} must match", ShapeMismatchError)
    if distr_ty.element != shared_ty.element:
        sem.error(f"bank_conflicts: element types differ ({distr_ty.element} in registers, "
                  f"{shared_ty.element} in shared memory)", TypeMismatchError)
    if tuple(shared_ty.shape) != tuple(shared_ty.alloc_shape[-len(shared_ty.shape):]):
        sem.error(f"bank_conflicts of a sub-slice (shape {list(shared_ty.shape)} of "
                  f"{list(shared_ty.alloc_shape)}) is not supported, as in Gluon", ArgumentError)
    if isinstance(distr_ty.layout, AutoLayout):
        sem.error("bank_conflicts needs a concrete register layout, got AutoLayout", ArgumentError)
    try:
        return _count_conflicts(distr_ty.layout, shared_ty.layout, list(distr_ty.shape),
                                distr_ty.element.primitive_bitwidth)
    except ValueError as e:
        sem.error(f"bank_conflicts: {e}", ArgumentError)
