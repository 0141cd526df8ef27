"""The semantic layer's core: creating ops, constants, casts, splats and broadcasting.

The code generator and the ``gl.*`` builtins never create IR directly; they call a
:class:`~gluonkit.lang.semantic.Semantic`, whose methods check the user's operands, make
them agree (Triton's promotion and Gluon's broadcasting rules) and create the ops at the
builder's current source location.  Mistakes raise a
:class:`~gluonkit.ir.CompilationError` subclass at that location.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from ..ir import Builder, layouts_match
from ..ir.types import DType, PointerType, TensorType, dtype_from_name, element_type, int1
from ..layouts.distributed import AutoLayout, DistributedLayout
from . import promotion
from .errors import (
    CompilationError, ConstexprRequiredError, LayoutMismatchError, ShapeMismatchError,
    TypeMismatchError,
)
from .tensor import tensor
from .unsupported import UnsupportedFeatureError, is_unsupported, unsupported_message

__all__ = ["CoreSemantic", "is_power_of_two"]


def is_power_of_two(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0 and n & (n - 1) == 0


class CoreSemantic:
    """Op creation, constants, casts and broadcasting (see the module docstring)."""

    def __init__(self, builder: Builder, num_warps: int, num_ctas: int = 1):
        self.builder = builder
        self.num_warps = num_warps
        self.num_ctas = num_ctas
        self.debug = False  # whether device_assert is compiled in (the kernel's debug option)
        self.maxnreg = None  # the launch's register cap (warp_specialize plans its budgets within it)
        self.call_jit = None  # set by the code generator: (jit_fn, args) -> value (inlining)
        self.partition_warps = None  # inside a warp_specialize partition: its warp count (lang/warp_specialize.py)

    # ------------------------------------------------------------------ basics
    def error(self, message: str, cls=CompilationError):
        raise cls(message, self.builder.loc)

    def create(self, name: str, operands: Sequence, result_types: Sequence, attrs=None, regions=()):
        """Create op ``name``; operands may be :class:`tensor` or IR values."""
        handles = [o.handle if isinstance(o, tensor) else o for o in operands]
        return self.builder.create(name, handles, result_types, attrs, regions)

    def create1(self, name: str, operands: Sequence, result_type, attrs=None, regions=()) -> tensor:
        """Create a single-result op and return its result as a :class:`tensor`."""
        return tensor(self.create(name, operands, [result_type], attrs, regions).result)

    def require_constexpr(self, value, what: str):
        """``value`` if it is a compile-time value, else a :class:`ConstexprRequiredError`."""
        if isinstance(value, tensor) or (isinstance(value, tuple) and any(isinstance(v, tensor) for v in value)):
            hint = "" if isinstance(value, tensor) else (
                " (numbers in a tuple assigned with a plain '=' become runtime scalars, as in Gluon: write "
                "'name: gl.constexpr = (...)' to keep the tuple compile-time)")
            self.error(f"{what} must be a compile-time constant (gl.constexpr), got a runtime value "
                       f"of type {value.type if isinstance(value, tensor) else 'tuple'}{hint}", ConstexprRequiredError)
        return value

    def require_int(self, value, what: str) -> int:
        self.require_constexpr(value, what)
        if not isinstance(value, int) or isinstance(value, bool):
            self.error(f"{what} must be an int, got {value!r}", TypeMismatchError)
        return value

    def require_dtype(self, dtype, what: str = "dtype") -> DType:
        """``dtype`` as a gluonkit dtype: a ``gl`` dtype, or Triton's ``tl`` dtype of the same type
        (Gluon's dtypes *are* Triton's, so Gluon kernels mix ``tl.int16`` and ``gl.int16``)."""
        self.require_constexpr(dtype, what)
        if is_unsupported(dtype):
            self.error(unsupported_message(dtype), UnsupportedFeatureError)
        converted = dtype if isinstance(dtype, DType) else triton_dtype(dtype)
        if converted is None:
            self.error(f"{what} must be a gl dtype such as gl.float32, got {dtype!r}", TypeMismatchError)
        return converted

    def require_tensor(self, value, what: str, block: bool = False) -> tensor:
        if not isinstance(value, tensor):
            self.error(f"{what} must be a tensor, got the compile-time value {value!r}", TypeMismatchError)
        if block and not value.is_block():
            self.error(f"{what} must be a distributed tensor, got a scalar of type {value.type}", TypeMismatchError)
        return value

    def require_pointer(self, value, what: str) -> tensor:
        """``value`` as a pointer or tensor of pointers; ``what`` names the operation it feeds."""
        ptr = self.require_tensor(value, f"the pointer of {what}")
        if not isinstance(ptr.dtype, PointerType):
            self.error(f"{what} needs a pointer or tensor of pointers, got {ptr.dtype}", TypeMismatchError)
        return ptr

    def require_mask(self, mask, what: str) -> Optional[tensor]:
        """``mask`` (``None`` for none) as a runtime boolean value; ``what`` names the operation."""
        if mask is None:
            return None
        mask = self.to_tensor(mask)
        if mask.dtype != int1:
            self.error(f"the mask of {what} must be boolean (int1), got {mask.dtype}", TypeMismatchError)
        return mask

    def check_layout(self, layout, shape, what: str = "layout", allow_auto: bool = True):
        """``layout`` (None means AutoLayout) if it can lay out a tensor of ``shape``."""
        self.require_constexpr(layout, what)
        if layout is None:
            layout = AutoLayout()
        if not isinstance(layout, DistributedLayout):
            self.error(f"{what} must be a distributed layout (BlockedLayout, SliceLayout, …), got {layout!r}",
                       TypeMismatchError)
        if isinstance(layout, AutoLayout):
            if not allow_auto:
                self.error(f"{what} must be a concrete layout, got AutoLayout()", LayoutMismatchError)
            return layout
        try:
            ll = layout.to_linear_layout(list(shape))
        except ValueError as e:
            self.error(f"{what} {layout!r} cannot lay out a tensor of shape {list(shape)}: {e}",
                       LayoutMismatchError)
        warps = ll.in_dim_size("warp") if ll.has_in_dim("warp") else 1
        if warps != self.num_warps:
            self.error(f"{what} {layout!r} spreads the tensor over {warps} warp(s) but the code runs with "
                       f"num_warps={self.num_warps}; make its warps_per_cta multiply to {self.num_warps} "
                       "(or launch with the matching num_warps)", LayoutMismatchError)
        return layout

    def check_shape(self, shape, what: str = "shape") -> tuple:
        self.require_constexpr(shape, what)
        if isinstance(shape, int):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)) or not all(is_power_of_two(s) for s in shape):
            self.error(f"{what} must be a tuple of compile-time powers of two, got {shape!r}", ShapeMismatchError)
        return tuple(shape)

    # --------------------------------------------------------------- constants
    def constant(self, value, ty) -> tensor:
        """A constant of scalar or tensor type ``ty`` holding ``value`` in every element."""
        elem = element_type(ty)
        if elem.is_floating():
            value = float(value)
        elif elem.is_bool():
            value = bool(value)
        else:
            value = int(value)
        return self.create1("constant", [], ty, {"value": value})

    def to_tensor(self, value, dtype: Optional[DType] = None) -> tensor:
        """A runtime value for ``value``: tensors pass through; Python numbers become
        scalar constants of ``dtype`` (or their own literal type), checked to fit."""
        if isinstance(value, tensor):
            return value
        return self.constant(value, self.check_literal(value, dtype))

    def check_literal(self, value, dtype: Optional[DType] = None) -> DType:
        """The type of the Python number ``value`` as a constant of ``dtype`` (default: its
        own literal type), after checking that it is a number and fits."""
        if not promotion.is_literal(value):
            self.error(f"expected a tensor or a number, got {value!r}", TypeMismatchError)
        if dtype is None:
            try:
                return promotion.literal_dtype(value)
            except ValueError as e:
                self.error(str(e), TypeMismatchError)
        if not promotion.literal_fits(value, dtype):
            self.error(f"the constant {value!r} does not fit in {dtype}; cast explicitly", TypeMismatchError)
        return dtype

    # ------------------------------------------------------------------- casts
    def cast(self, x, dtype, bitcast: bool = False, rounding: Optional[str] = None) -> tensor:
        """``x.to(dtype)``: value conversion, or reinterpretation of the bits if ``bitcast``."""
        dtype = self.require_dtype(dtype)
        x = self.to_tensor(x)
        src = x.dtype
        if rounding not in (None, "rtne", "rtz"):
            self.error(f"fp_downcast_rounding must be 'rtne' or 'rtz', got {rounding!r}", TypeMismatchError)
        if rounding is not None and not (src.is_floating() and dtype.is_floating()
                                         and dtype.primitive_bitwidth < src.primitive_bitwidth):
            self.error(f"fp_downcast_rounding applies only to narrowing float casts, not {src} -> {dtype}",
                       TypeMismatchError)
        if src == dtype:
            return x
        if isinstance(src, PointerType):
            self.error(f"cannot cast a pointer ({src}) to {dtype}", TypeMismatchError)
        if bitcast:
            if src.primitive_bitwidth != dtype.primitive_bitwidth:
                self.error(f"bitcast needs types of one width, got {src} ({src.primitive_bitwidth} bits) "
                           f"and {dtype} ({dtype.primitive_bitwidth} bits)", TypeMismatchError)
        elif dtype.is_bool():
            return self.compare("ne", x, 0)
        return self.create1("cast", [x], self.retype(x, dtype),
                            {"to": dtype, "bitcast": bool(bitcast), "rounding": rounding})

    @staticmethod
    def retype(x: tensor, elem) -> object:
        """``x``'s type with element type ``elem``."""
        return x.type.with_element(elem) if x.is_block() else elem

    def to_bool(self, x, what: str) -> tensor:
        """A runtime value as ``int1`` (``x != 0``), as conditions and masks need."""
        x = self.to_tensor(x)
        if isinstance(x.dtype, PointerType):
            self.error(f"{what} must be a boolean or number, got a pointer ({x.dtype})", TypeMismatchError)
        return x if x.dtype == int1 else self.compare("ne", x, 0)

    # ------------------------------------------------------------ broadcasting
    def splat(self, x: tensor, shape, layout) -> tensor:
        return self.create1("splat", [x], TensorType(x.dtype, tuple(shape), layout))

    def broadcast_to(self, x, shape) -> tensor:
        """``x`` repeated along its size-1 dimensions to ``shape`` (a scalar is splat)."""
        shape = self.check_shape(shape)
        x = self.to_tensor(x)
        if not x.is_block():
            return self.splat(x, shape, AutoLayout())
        if len(x.shape) != len(shape):
            self.error(f"cannot broadcast a tensor of shape {list(x.shape)} to {list(shape)}: ranks differ "
                       "(use expand_dims or x[None, :] to add dimensions)", ShapeMismatchError)
        for i, (a, b) in enumerate(zip(x.shape, shape)):
            if a != b and a != 1:
                self.error(f"cannot broadcast shape {list(x.shape)} to {list(shape)}: dimension {i} has size {a}, "
                           f"expected 1 or {b}", ShapeMismatchError)
        if x.shape == shape:
            return x
        return self.create1("broadcast", [x], TensorType(x.dtype, shape, x.layout))

    def broadcast_all(self, values: Sequence[tensor]) -> List[tensor]:
        """Gluon's broadcasting: scalars are splat; tensors must have one rank, compatible
        shapes and one layout — an ``AutoLayout`` operand is pinned to the other operands'
        concrete layout with ``set_auto_layout``; two different concrete layouts are an error."""
        blocks = [v for v in values if v.is_block()]
        if not blocks:
            return list(values)
        rank = len(blocks[0].shape)
        for v in blocks[1:]:
            if len(v.shape) != rank:
                self.error(f"cannot broadcast tensors of shapes {list(blocks[0].shape)} and {list(v.shape)}: "
                           "ranks differ (use expand_dims or x[None, :] to add dimensions)", ShapeMismatchError)
        shape = []
        for i in range(rank):
            sizes = {v.shape[i] for v in blocks} - {1}
            if len(sizes) > 1:
                shapes = " and ".join(str(list(v.shape)) for v in blocks)
                self.error(f"cannot broadcast shapes {shapes}: dimension {i} has sizes {sorted(sizes)}",
                           ShapeMismatchError)
            shape.append(sizes.pop() if sizes else 1)
        concrete = [v.layout for v in blocks if not isinstance(v.layout, AutoLayout)]
        for other in concrete[1:]:
            if not layouts_match(other, concrete[0], shape):  # two spellings of one placement agree
                self.error(f"operands have different layouts {concrete[0]!r} and {other!r}; "
                           "insert gl.convert_layout to make them agree", LayoutMismatchError)
        layout = concrete[0] if concrete else AutoLayout()
        out = []
        for v in values:
            if not v.is_block():
                v = self.splat(v, shape, layout)
            else:
                if isinstance(v.layout, AutoLayout) and concrete:
                    v = self.create1("set_auto_layout", [v], v.type.with_layout(layout))
                v = self.broadcast_to(v, tuple(shape))
            out.append(v)
        return out


# Triton's dtype names that differ from gluonkit's (the rest agree: int1 … uint64).
_TRITON_DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                       "fp8e4nv": "float8e4nv", "fp8e5": "float8e5"}


def triton_dtype(value) -> Optional[DType]:
    """The gluonkit dtype of a ``triton.language`` dtype object (recognised by its class, so
    gluonkit never imports Triton), or ``None`` when ``value`` is not one gluonkit has."""
    kind = type(value)
    if kind.__name__ != "dtype" or not kind.__module__.startswith("triton.language"):
        return None
    name = getattr(value, "name", "")
    try:
        return dtype_from_name(_TRITON_DTYPE_NAMES.get(name, name))
    except ValueError:
        return None
