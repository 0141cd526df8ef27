"""Verifier rules of Hopper's warpgroup MMA: ``warpgroup_mma`` and ``warpgroup_mma_wait``.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  The rules are the hardware's, checked here once so the interpreter and the
lowering can trust them (:func:`wgmma_shape_problem` is also what the frontend asks):

* ``acc`` is ``M x N`` float32 in an ``NVMMADistributedLayout`` of version ``[3, 0]``; the
  result has exactly ``acc``'s type;
* ``a`` is ``M x K``: a shared-memory view, or a tensor in ``DotOperandLayout(0, acc's
  layout, 32 // element bits)``; ``b`` is a ``K x N`` shared-memory view (one tile: index
  stages away first).  Shared views are usually ``NVMMASharedLayout``; any placement with a
  contiguous dimension passes here, and the lowering checks, from its linear layout, that it
  is one the wgmma descriptors can express;
* each warpgroup computes 64-row blocks, so ``M`` is a multiple of 16 rows per warp along M
  (64 per warpgroup), ``N`` a multiple of the instruction's N times the warps along N, and
  ``K`` a multiple of the instruction's K (32 bytes of elements: 8 for tf32, 16 for 16-bit
  types, 32 for fp8), which must also be the layout's ``instr_shape[2]``;
* inputs are float16 or bfloat16 (both the same), float32 (multiplied as tf32: ``precision``
  ``None`` or ``"tf32"``), or fp8 (e4m3/e5m2, mixable).  tf32 and fp8 shared operands must be
  K-major (PTX ISA: the transpose immediates exist only for 16-bit types): A an ``[M, K]``
  buffer with K contiguous, B the ``.permute((1, 0))`` view of an ``[N, K]`` buffer.
"""

from __future__ import annotations

from typing import Optional

from ..layouts.nvmma import DotOperandLayout, NVMMADistributedLayout
from ..layouts.shared import NVMMASharedLayout, SharedLayout
from .memdesc import view_to_offset
from .types import SharedMemoryDescType, TensorType, bfloat16, float8e4nv, float8e5, float16, float32, int1
from .verifier import rule
from .verify_checks import fail

__all__ = ["WGMMA_INPUT_TYPES", "TF32_PRECISIONS", "wgmma_k_step", "contiguous_dim", "is_k_major",
           "needs_k_major", "wgmma_shape_problem", "wgmma_precision_problem"]

WGMMA_INPUT_TYPES = (float16, bfloat16, float32, float8e4nv, float8e5)
#: ``precision`` values for float32 inputs that wgmma computes: tf32 products (None is the default, tf32).
TF32_PRECISIONS = (None, "tf32")


def wgmma_k_step(element) -> int:
    """The K of one wgmma instruction for ``element`` inputs: 32 bytes' worth."""
    return 256 // element.primitive_bitwidth


def contiguous_dim(view: SharedMemoryDescType) -> Optional[int]:
    """The dimension of a 2-D view whose consecutive elements are adjacent in memory, if any."""
    to_offset = view_to_offset(view)
    for d in range(2):
        bases = to_offset.bases[f"dim{d}"]
        if bases and bases[0] == [1]:
            return d
    return None


def is_k_major(view: SharedMemoryDescType, operand: int) -> bool:
    """Whether shared operand ``operand`` (0 = A ``[M, K]``, 1 = B ``[K, N]``) has K contiguous."""
    return contiguous_dim(view) == (1 if operand == 0 else 0)


def needs_k_major(element) -> bool:
    """Whether wgmma reads ``element`` operands K-major only (no transpose: tf32 and fp8)."""
    return element == float32 or element.is_fp8()


def _k_major_problem(operand: int, element) -> str:
    kind = "tf32 (float32)" if element == float32 else "fp8"
    if operand == 0:
        return (f"{kind} a must be K-major in shared memory (wgmma transposes only 16-bit operands), but its "
                "view has M contiguous: store A as an [M, K] buffer with K contiguous (row-major), not a "
                ".permute of a [K, M] one")
    return (f"{kind} b must be K-major in shared memory (wgmma transposes only 16-bit operands), but its "
            "view has N contiguous: store B as an [N, K] buffer (K contiguous) and pass b_smem.permute((1, 0))")


def wgmma_precision_problem(element, precision) -> Optional[str]:
    """Why ``precision`` cannot be used with ``element`` inputs (``None`` if it can)."""
    if element == float32 and precision not in TF32_PRECISIONS:
        return (f"precision={precision!r} is not supported for float32 inputs: wgmma multiplies float32 as "
                "tf32 (10-bit mantissa); use precision='tf32' (or None), or convert the inputs to a 16-bit type")
    return None


def _operand_problem(value_type, operand: int, acc_layout) -> Optional[str]:
    name = "a" if operand == 0 else "b"
    if isinstance(value_type, SharedMemoryDescType):
        layout = value_type.layout
        if not isinstance(layout, SharedLayout) or value_type.rank != 2:
            return f"{name} must be a 2-D shared memory view, got {value_type}"
        if value_type.num_stage_dims:
            return f"{name} is a multi-stage buffer {list(value_type.shape)}; pick one stage with .index(i)"
        if isinstance(layout, NVMMASharedLayout) and (
                layout.fp4_padded or layout.element_bitwidth != value_type.element.primitive_bitwidth):
            return (f"{name}'s layout {layout!r} is not one for plain {value_type.element} elements; use "
                    f"NVMMASharedLayout.get_default_for(shape, gl.{value_type.element})")
        if contiguous_dim(value_type) is None:
            return (f"{name}'s layout {layout!r} has no contiguous dimension; wgmma reads rows of 16 bytes "
                    "(use an NVMMASharedLayout)")
        return None
    if operand == 1:
        return f"b must be a shared memory descriptor (wgmma reads B from shared memory), got {value_type}"
    if not isinstance(value_type, TensorType):
        return f"a must be a shared memory descriptor or a tensor, got {value_type}"
    k_width = 32 // value_type.element.primitive_bitwidth
    expected = DotOperandLayout(0, acc_layout, k_width)
    if value_type.layout != expected:
        return f"a in registers must have the layout {expected!r} (the accumulator's), got {value_type.layout!r}"
    return None


def _tiles(extent: int, tile: int) -> bool:
    """Whether a dimension of ``extent`` is whole tiles of ``tile``, or one part of a tile."""
    return extent % tile == 0 or tile % extent == 0


def _cta_bases(layout, count: int) -> tuple:
    """``layout``'s ``cga_layout`` as ``count`` bases (zeros where it replicates)."""
    bases = tuple(getattr(layout, "cga_layout", ()) or ())
    return bases + ((0, 0),) * (count - len(bases))


def _cluster_problem(a_type, b_type, layout) -> Optional[str]:
    """Why the operands' split between the CTAs of a cluster does not match the accumulator's.

    Each CTA runs its own wgmma on its shares, so A must be split along M as the accumulator's
    rows are and replicated along K, and B split along N as its columns are (an operand that
    several CTAs share is replicated, e.g. loaded with TMA multicast)."""
    shared = [t.layout for t in (a_type, b_type) if isinstance(t, SharedMemoryDescType)]
    count = max(len(getattr(x, "cga_layout", ()) or ()) for x in [layout] + shared)
    if count == 0:
        return None
    acc = _cta_bases(layout, count)
    if not isinstance(a_type, SharedMemoryDescType):
        return ("a in registers cannot be used with an accumulator split between CTAs (cga_layout "
                f"{[list(v) for v in acc]}); keep a in shared memory")
    for name, ty, expected in (("a", a_type, tuple((v[0], 0) for v in acc)),
                               ("b", b_type, tuple((0, v[1]) for v in acc))):
        if _cta_bases(ty.layout, count) != expected:
            return (f"{name}'s cga_layout {[list(v) for v in _cta_bases(ty.layout, count)]} does not match the "
                    f"accumulator's {[list(v) for v in acc]}: each CTA multiplies its own shares, so {name} "
                    f"must have cga_layout {[list(v) for v in expected]}")
    return None


def wgmma_shape_problem(a_type, b_type, acc_type) -> Optional[str]:
    """Why ``warpgroup_mma(a, b, acc)`` with these operand types is not a wgmma (``None`` if it is)."""
    if not isinstance(acc_type, TensorType) or acc_type.rank != 2:
        return f"acc must be a 2-D tensor, got {acc_type}"
    layout = acc_type.layout
    if not isinstance(layout, NVMMADistributedLayout) or not layout.is_hopper:
        return (f"acc must be in an NVMMADistributedLayout of version [3, 0] (the wgmma accumulator), "
                f"got {layout!r}")
    if acc_type.element != float32:
        return f"acc must be float32 (wgmma accumulates in float32 here), got {acc_type.element}; use .to(gl.float32)"
    for operand, ty in ((0, a_type), (1, b_type)):
        problem = _operand_problem(ty, operand, layout)
        if problem:
            return problem
    a_elem, b_elem = a_type.element, b_type.element
    if a_elem not in WGMMA_INPUT_TYPES or b_elem not in WGMMA_INPUT_TYPES:
        return (f"wgmma inputs must be float16, bfloat16, float32 (tf32), float8e4nv or float8e5, got "
                f"{a_elem} and {b_elem}")
    if a_elem.is_fp8() != b_elem.is_fp8() or (not a_elem.is_fp8() and a_elem != b_elem):
        return (f"a and b must have the same type (float16, bfloat16 or float32), or both be fp8, got "
                f"{a_elem} and {b_elem}")
    if needs_k_major(a_elem):
        for operand, ty in ((0, a_type), (1, b_type)):
            if isinstance(ty, SharedMemoryDescType) and not is_k_major(ty, operand):
                return _k_major_problem(operand, a_elem)
    (m, k), (k2, n) = a_type.shape, b_type.shape
    if acc_type.shape != (m, n) or k != k2:
        return (f"shapes do not chain: a is {list(a_type.shape)}, b is {list(b_type.shape)}, acc is "
                f"{list(acc_type.shape)}; expected [M, K] x [K, N] -> [M, N]")
    cluster_problem = _cluster_problem(a_type, b_type, layout)
    if cluster_problem:
        return cluster_problem
    m //= 1 << sum(1 for v in layout.cga_layout if v[0])  # each CTA's wgmma sees its share
    n //= 1 << sum(1 for v in layout.cga_layout if v[1])
    w_m, w_n = layout.warps_per_cta
    n_inst, k_inst = layout.instr_shape[1], layout.instr_shape[2]
    # A shape smaller than the layout's tile (16 w_m x n_inst w_n) is held by several
    # warpgroups at once (zero warp bases), which then issue the same instructions, as in Gluon.
    if m % 64 or not _tiles(m, 16 * w_m):
        return (f"M = {m} must be a multiple of 64 (one wgmma's rows) that divides or is divided by "
                f"{16 * w_m}, the rows of warps_per_cta {list(layout.warps_per_cta)}")
    if n % n_inst or not _tiles(n, n_inst * w_n):
        return (f"N = {n} must be a multiple of instr_shape N ({n_inst}) that divides or is divided by "
                f"{n_inst * w_n} (times the warps along N, {w_n}); pick a smaller instr_shape")
    k_step = wgmma_k_step(a_elem)
    if k_inst != k_step:
        return f"the accumulator layout's instr_shape K is {k_inst} but {a_elem} wgmma has K = {k_step}"
    if k % k_step:
        return f"K = {k} must be a multiple of {k_step} (one {a_elem} wgmma instruction)"
    return None


@rule("warpgroup_mma")
def _warpgroup_mma(op):
    if len(op.operands) != 4 or len(op.results) != 1 or op.regions:
        fail(op, f"expects a, b, acc, use_acc and one result, got {len(op.operands)} operands and "
                 f"{len(op.results)} results")
    a, b, acc, use_acc = (v.type for v in op.operands)
    problem = wgmma_shape_problem(a, b, acc)
    if problem:
        fail(op, problem)
    if use_acc != int1:
        fail(op, f"use_acc must be an int1 scalar, got {use_acc}")
    if op.results[0].type != acc:
        fail(op, f"the result must have acc's type {acc}, got {op.results[0].type}")
    if not isinstance(op.attrs.get("is_async"), bool):
        fail(op, f"is_async must be a bool, got {op.attrs.get('is_async')!r}")
    precision_problem = wgmma_precision_problem(a.element, op.attrs.get("precision"))
    if precision_problem:
        fail(op, precision_problem)
    imprecise = op.attrs.get("max_num_imprecise_acc")
    if imprecise is not None and (not isinstance(imprecise, int) or imprecise < 0):
        fail(op, f"max_num_imprecise_acc must be a non-negative int or None, got {imprecise!r}")


@rule("warpgroup_mma_wait")
def _warpgroup_mma_wait(op):
    if op.regions or len(op.results) != len(op.operands):
        fail(op, f"returns one value per dep: {len(op.operands)} deps, {len(op.results)} results")
    for dep, result in zip(op.operands, op.results):
        if dep.type != result.type:
            fail(op, f"result {result.type} must have its dep's type {dep.type}")
        if not isinstance(dep.type, (TensorType, SharedMemoryDescType)):
            fail(op, f"deps must be accumulators or shared memory descriptors, got {dep.type}")
    n = op.attrs.get("num_outstanding")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        fail(op, f"num_outstanding must be a non-negative int, got {n!r}")
