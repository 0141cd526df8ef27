"""``gl.inline_asm_elementwise``: PTX applied element by element.

Gluon 3.9's signature (from Triton): ``inline_asm_elementwise(asm, constraints, args, dtype,
is_pure, pack)``.  The tensor ``args`` broadcast to one shape and layout (numbers become
scalars); ``dtype`` is one element type or a tuple of them, giving one result or a tuple;
``pack`` elements of every argument go to one execution of ``asm``, elements narrower
than 32 bits packed into 32-bit registers (see :mod:`gluonkit.lower.ops.inline_asm`).
``constraints`` are LLVM inline-assembly constraints, outputs first.

(The module is not called ``inline_asm``: as a submodule of :mod:`gluonkit.lang` that name
would become the attribute ``gl.inline_asm``, which is Gluon's other, thread-wise builtin.)
"""

from __future__ import annotations

from ..ir.types import DType
from .constexpr import unwrap
from .errors import ArgumentError, TypeMismatchError
from .tensor import builtin, tensor

__all__ = ["inline_asm_elementwise"]


@builtin
def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, _semantic=None):
    """Run ``asm`` over ``pack`` elements of ``args`` at a time; results of element type(s) ``dtype``."""
    sem = _semantic
    asm, constraints, is_pure, pack = (unwrap(x) for x in (asm, constraints, is_pure, pack))
    if not isinstance(asm, str) or not isinstance(constraints, str):
        sem.error("inline_asm_elementwise needs the assembly and the constraints as compile-time strings",
                  ArgumentError)
    if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1 or pack & (pack - 1):
        sem.error(f"inline_asm_elementwise's pack must be a positive power of two, got {pack!r}", ArgumentError)
    single = not isinstance(unwrap(dtype), (tuple, list))
    dtypes = [sem.require_dtype(d, "inline_asm_elementwise's dtype") for d in ((dtype,) if single else unwrap(dtype))]
    if not dtypes:
        sem.error("inline_asm_elementwise must return at least one value (return a dummy one if need be)",
                  ArgumentError)
    values = [a if isinstance(a, tensor) else sem.to_tensor(a) for a in unwrap(tuple(args))]
    for v in values:
        if not isinstance(v.dtype, DType):
            sem.error(f"inline_asm_elementwise's arguments must be numbers, got {v.dtype}", TypeMismatchError)
    values = sem.broadcast_all(values)
    shaped = next((v for v in values if v.is_block()), None)
    if shaped is None and pack != 1:
        sem.error(f"inline_asm_elementwise with scalar arguments needs pack=1, got pack={pack}", ArgumentError)
    types = [shaped.type.with_element(d) if shaped is not None else d for d in dtypes]
    attrs = {"asm": asm, "constraints": constraints, "is_pure": bool(is_pure), "pack": pack}
    op = sem.create("inline_asm_elementwise", values, types, attrs)
    results = [tensor(r) for r in op.results]
    return results[0] if single else tuple(results)
