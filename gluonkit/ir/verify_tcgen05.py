"""Verifier rules of Blackwell's tensor-core MMA: ``tcgen05_mma`` and ``tcgen05_commit``.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  :func:`tcgen05_shape_problem` is also what the frontend asks, so a bad call is
reported at the user's line.  The rules are the hardware's (PTX ISA, ``tcgen05.mma``,
``cta_group::1``):

* ``a`` is an ``[M, K]`` shared-memory view and ``b`` a ``[K, N]`` one (one tile each; any
  placement with a contiguous dimension passes here, the lowering checks from the linear
  layout that a matrix descriptor can express it, as for wgmma);
* ``acc`` is an ``[M, N]`` tensor-memory view in a one-CTA ``TensorMemoryLayout`` whose block
  has ``M`` rows and one element per 32-bit column (``col_stride = 32 // bits``), float32 —
  or float16 for 16-bit inputs;
* ``M`` is 64 or 128, ``N`` a multiple of 8 (M = 64) or 16 (M = 128) from 8 to 256, ``K``
  a multiple of 32 bytes of inputs (one instruction's K);
* kinds: float16/bfloat16 (``kind::f16``), float32 read as tf32 (``kind::tf32``, float32
  accumulator), fp8 e4m3/e5m2 in any mix (``kind::f8f6f4``, float32 accumulator);
* ``a`` may instead live in tensor memory (the ``[a_tmem]`` form), for every kind: an
  ``[M, K]`` view (M = 64 or 128; 128 rows per CTA in a pair) in the accumulator's row
  placement (its ``TensorMemoryLayout`` block M is M) with K packed along the columns
  (``col_stride=1``, 32 bits of inputs per column); for a CTA pair (``two_ctas``) split by
  rows like a shared A (``cga_layout=[[1, 0], ...]``), each CTA's rows in its own tensor memory.
"""

from __future__ import annotations

from typing import Optional

from ..layouts.distributed import shape_per_cta
from ..layouts.tmem import TensorMemoryLayout
from .core import Operation
from .types import (SharedMemoryDescType, TensorMemoryDescType, bfloat16, float8e4nv, float8e5, float16, float32,
                    int1)
from .verifier import rule
from .verify_checks import fail
from .verify_wgmma import contiguous_dim

__all__ = ["tcgen05_kind", "tcgen05_k_step", "tcgen05_shape_problem", "pair_mma_shape"]

_KINDS = {float16: "f16", bfloat16: "f16", float32: "tf32", float8e4nv: "f8f6f4", float8e5: "f8f6f4"}


def tcgen05_kind(element) -> Optional[str]:
    """The ``.kind`` qualifier of an MMA on ``element`` inputs (``None``: not an MMA input type)."""
    return _KINDS.get(element)


def tcgen05_k_step(element) -> int:
    """The K of one ``tcgen05.mma`` on ``element`` inputs: 32 bytes' worth."""
    return 256 // element.primitive_bitwidth


def _tmem_a_problem(ty) -> Optional[str]:
    """Why ``ty`` cannot be the A operand read from tensor memory (the ``[a_tmem]`` form of tcgen05.mma)."""
    layout = ty.layout
    if len(ty.shape) != 2 or not isinstance(layout, TensorMemoryLayout):
        return f"a in tensor memory must be a 2-D view in a TensorMemoryLayout, got {ty}"
    if tcgen05_kind(ty.element) is None:
        return (f"a in tensor memory must be an MMA input type (float16, bfloat16, float32 as tf32, float8e4nv or "
                f"float8e5), got {ty.element}")
    if layout.col_stride != 1:
        per_column = 32 // ty.element.primitive_bitwidth
        return (f"a in tensor memory must be packed (TensorMemoryLayout col_stride=1: {per_column} {ty.element} per "
                f"32-bit column), got col_stride={layout.col_stride}")
    rows = shape_per_cta("a", list(ty.shape), layout.cga_layout)[0] if layout.cga_layout else ty.shape[0]
    allowed = (128,) if layout.two_ctas else (64, 128)
    if rows not in allowed or layout.block[0] != rows:
        return (f"a in tensor memory must have M = {' or '.join(map(str, allowed))} rows in each CTA, its layout's "
                f"block M the same, got {list(ty.shape)}, {layout!r}")
    return None


def _shared_problem(ty, name: str) -> Optional[str]:
    if isinstance(ty, TensorMemoryDescType):
        if name == "a":
            return _tmem_a_problem(ty)
        return f"{name} must be in shared memory (only a may come from tensor memory); got {ty}"
    if not isinstance(ty, SharedMemoryDescType) or ty.rank != 2 or ty.num_stage_dims:
        return f"{name} must be one 2-D shared memory tile (pick a stage with .index(i)), got {ty}"
    if contiguous_dim(ty) is None:
        return f"{name}'s layout {ty.layout!r} has no contiguous dimension; use an NVMMASharedLayout"
    return None


def tcgen05_shape_problem(a, b, acc) -> Optional[str]:
    """Why ``tcgen05_mma(a, b, acc)`` with these operand types is not one MMA (``None`` if it is)."""
    for ty, name in ((a, "a"), (b, "b")):
        problem = _shared_problem(ty, name)
        if problem:
            return problem
    if not isinstance(acc, TensorMemoryDescType) or len(acc.shape) != 2:
        return f"acc must be a 2-D tensor memory descriptor, got {acc}"
    kind = tcgen05_kind(a.element)
    if kind is None or tcgen05_kind(b.element) != kind or (kind != "f8f6f4" and a.element != b.element):
        return (f"a and b must both be float16, both bfloat16, both float32 (tf32) or both fp8 (float8e4nv/"
                f"float8e5), got {a.element} and {b.element}")
    allowed = (float32, float16) if kind == "f16" else (float32,)
    if acc.element not in allowed:
        return f"acc must be {' or '.join(str(t) for t in allowed)} for {a.element} inputs, got {acc.element}"
    layout = acc.layout
    if not isinstance(layout, TensorMemoryLayout):
        return f"acc must be in a TensorMemoryLayout, got {layout!r}"
    (m, k), (k2, n) = a.shape, b.shape
    if tuple(acc.shape) != (m, n) or k != k2:
        return (f"shapes do not chain: a is {list(a.shape)}, b is {list(b.shape)}, acc is {list(acc.shape)}; "
                "expected [M, K] x [K, N] -> [M, N]")
    pair = _pair_problem(a, b, layout)
    if pair:
        return pair
    m, n = pair_mma_shape(acc)
    m_cta = m // 2 if layout.two_ctas else m
    if m_cta not in (64, 128) or layout.block[0] != m_cta:
        what = "M / 2 (two_ctas: each CTA of the pair holds half the pair's rows)" if layout.two_ctas else "M"
        return f"{what} = {m_cta} must be 64 or 128 and equal acc's TensorMemoryLayout block M ({layout.block[0]})"
    if layout.col_stride != 32 // acc.element.primitive_bitwidth:
        return (f"acc's layout packs {layout.col_stride} column(s) per element; an MMA accumulator of {acc.element} "
                f"needs col_stride={32 // acc.element.primitive_bitwidth}")
    n_step = 8 if m == 64 else 16
    if n % n_step or not 8 <= n <= 256:
        return f"N = {n} must be a multiple of {n_step} from {n_step} to 256 for M = {m}"
    k_step = tcgen05_k_step(a.element)
    if k % k_step:
        return f"K = {k} must be a multiple of {k_step} (one {a.element} tcgen05.mma)"
    return None


def _cga(ty):
    return [list(v) for v in getattr(ty.layout, "cga_layout", None) or () if any(v)]


def pair_mma_shape(acc) -> tuple:
    """``(M, N)`` of one MMA instruction on accumulator view ``acc``: the whole view in one CTA;
    for a ``two_ctas`` accumulator the pair's part, twice one CTA's rows by one CTA's columns (a
    cluster of several pairs holds one such part per pair, placed by the other CTA bits)."""
    layout = acc.layout
    if not getattr(layout, "two_ctas", False):
        return tuple(acc.shape)
    rows, cols = shape_per_cta("tcgen05_mma's acc", list(acc.shape), layout.cga_layout)
    return 2 * rows, cols


def _pair_problem(a, b, layout) -> Optional[str]:
    """A ``two_ctas`` MMA needs A split by rows and B by columns between the CTA pair (rank bit 0:
    each CTA holds its share); in a cluster of pairs, every further CTA bit moves the accumulator by
    whole pair tiles and A and B along with it (A by the rows, B by the columns it moves), or
    replicates the operand that does not move (a multicast operand).  A one-CTA MMA reads whole
    operands."""
    if not layout.two_ctas:
        for ty, name in ((a, "a"), (b, "b")):
            if _cga(ty):
                return (f"{name}'s layout {ty.layout!r} splits it between CTAs, but acc's TensorMemoryLayout is not "
                        "two_ctas; a one-CTA MMA reads whole operands")
        return None
    acc_cga = [list(v) for v in layout.cga_layout]
    if not acc_cga or acc_cga[0] != [1, 0]:
        return (f"two_ctas acc must split its rows over the CTA pair first: cga_layout=[[1, 0], ...] (rank bit 0 "
                f"is the pair), got {layout!r}")
    want_a = [[1, 0]] + [[r, 0] for r, _ in acc_cga[1:]]
    want_b = [[0, 1]] + [[0, 2 * c] for _, c in acc_cga[1:]]
    got_a = [list(v) for v in getattr(a.layout, "cga_layout", None) or ()]
    got_b = [list(v) for v in getattr(b.layout, "cga_layout", None) or ()]
    if got_a != want_a or got_b != want_b:
        return (f"a two_ctas MMA reads A split by rows and B by columns between the CTA pair, each further CTA bit "
                f"moving them as it moves acc (cga_layout {acc_cga}): a's and b's NVMMASharedLayout need "
                f"cga_layout={want_a} and {want_b}, got {got_a} and {got_b}")
    return None


@rule("tcgen05_mma")
def _tcgen05_mma(op: Operation):
    n = op.attrs.get("num_barriers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0 or len(op.operands) != 5 + 2 * n:
        fail(op, f"expects a, b, acc, use_acc, pred and num_barriers barriers with their predicates, got "
                 f"{len(op.operands)} operands and num_barriers={n!r}")
    if not isinstance(op.attrs.get("is_async"), bool) or (n and not op.attrs["is_async"]):
        fail(op, f"is_async must be a bool, and True when there are barriers, got {op.attrs.get('is_async')!r}")
    if op.results or op.regions:
        fail(op, "has no results or regions")
    a, b, acc = (v.type for v in op.operands[:3])
    problem = tcgen05_shape_problem(a, b, acc)
    if problem:
        fail(op, problem)
    for v in op.operands[3:5] + op.operands[5 + n:]:
        if v.type != int1:
            fail(op, f"use_acc, pred and the barrier predicates must be int1 scalars, got {v.type}")
    for v in op.operands[5:5 + n]:
        if not isinstance(v.type, SharedMemoryDescType) or v.type.element.name != "int64":
            fail(op, f"barriers must be mbarriers (int64 shared memory), got {v.type}")
    _multicast_bits(op)


def _multicast_bits(op: Operation) -> None:
    """``multicast_bits`` (optional): per multicast operand, the CTA-rank bits its layout replicates."""
    bits = op.attrs.get("multicast_bits", ())
    if not isinstance(bits, tuple) or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0
                                              for b in bits):
        fail(op, f"multicast_bits must be a tuple of CTA-rank bit masks, got {bits!r}")


@rule("tcgen05_commit")
def _tcgen05_commit(op: Operation):
    if len(op.operands) != 2 or op.results or op.regions:
        fail(op, f"expects bar and pred, got {len(op.operands)} operands")
    bar, pred = (v.type for v in op.operands)
    if not isinstance(bar, SharedMemoryDescType) or bar.element.name != "int64":
        fail(op, f"bar must be an mbarrier (int64 shared memory), got {bar}")
    if pred != int1:
        fail(op, f"pred must be an int1 scalar, got {pred}")
    _multicast_bits(op)
