"""The ``reduce`` rule: a combine function applied in the GPU's tree order.

The operand's linear layout says which hardware index bits move along the reduced axis.
The reduction runs on the register files in three stages, like Triton's lowering:

1. **within each thread**: the registers holding one output element are combined as a
   balanced tree in increasing register order (``f(f(r0, r1), f(r2, r3))``…,
   :func:`~gluonkit.ir.reduce_order.combine_pairwise`); registers that are copies of
   another (zero register bases) are skipped;
2. **across lanes**: a butterfly — for each lane bit along the axis, from the highest to
   the lowest, every thread combines its partial with the partial of the lane that differs
   in that bit (``acc = f(acc, shuffle_xor(acc, bit))``);
3. **across warps**: the same butterfly over the warp bits along the axis (the GPU
   exchanges these partials through shared memory; the pairing is the same);
4. **across the CTAs of a cluster**, when the ``cga_layout`` splits the axis: the CTAs that
   share a result element (their ranks differ in the axis bits only) exchange their partials
   between two cluster barriers (:func:`~.nvidia.cluster.exchange_across_ctas`) and each
   combines them in CTA order (:func:`~gluonkit.ir.reduce_order.combine_butterfly`), as the
   lowering does, so every CTA and the GPU get the same bits.

With a commutative combine function every thread ends with the same bits; a
non-commutative one leaves lanes disagreeing, and the replicated-copy check reports it
where the result is used, as the GPU would silently give lane-dependent results.  The
combine region runs once per step on numpy arrays holding every thread's partials.
Layouts whose bases mix the reduced axis with other dimensions are not supported.
"""

from __future__ import annotations

from typing import List

import numpy as np

from ..ir.reduce_order import combine_butterfly, combine_pairwise
from ..ir.types import TensorType
from .engine import rule
from .errors import InterpreterError
from .nvidia.cluster import exchange_across_ctas
from .values import Tensor, element_text, gather_local


def _classify(op, dim: str, vectors, axis: int) -> List[str]:
    """Each basis of ``dim``: 'zero', 'axis' (moves only along axis) or 'other' (never along it)."""
    kinds = []
    for i, v in enumerate(vectors):
        if not any(v):
            kinds.append("zero")
        elif v[axis] and any(c for j, c in enumerate(v) if j != axis):
            raise InterpreterError(
                f"reduce: basis {i} of input dimension {dim!r} ({v}) moves along the reduced axis "
                f"{axis} and another dimension at once; the interpreter cannot reduce such layouts", op.loc)
        else:
            kinds.append("axis" if v[axis] else "other")
    return kinds


def _register_groups(kinds: List[str]) -> np.ndarray:
    """Register indices as (output group, step along the axis), skipping replicated copies."""
    index = np.zeros((1, 1), dtype=np.int64)
    for bit, kind in enumerate(kinds):
        if kind == "other":
            index = np.concatenate([index, index + (1 << bit)], axis=0)
        elif kind == "axis":
            index = np.concatenate([index, index + (1 << bit)], axis=1)
    return index


@rule("reduce")
def _reduce(program, op, operands):
    axis = op.attrs["axis"]
    combine = op.regions[0]
    first: Tensor = operands[0]
    p = program.placement(first.type, op)
    bases = p.linear.bases
    lane_bits = len(bases.get("lane", []))
    cta_bits = [bit for bit, kind in enumerate(_classify(op, "block", bases.get("block", []), axis)) if kind == "axis"]

    def combine_all(acc, new):
        out = program.run_block(combine, list(acc) + list(new))
        return [np.broadcast_to(np.asarray(o), acc[0].shape).copy() for o in out]

    groups = _register_groups(_classify(op, "register", bases.get("register", []), axis))
    acc = combine_pairwise([[t.regs[:, groups[:, step]] for t in operands] for step in range(groups.shape[1])],
                           combine_all)
    thread = np.arange(p.num_threads)
    for dim in ("lane", "warp"):
        kinds = _classify(op, dim, bases.get(dim, []), axis)
        offset = 0 if dim == "lane" else lane_bits
        for bit in reversed([b for b, k in enumerate(kinds) if k == "axis"]):
            partner = thread ^ (1 << (offset + bit))
            acc = combine_all(acc, [a[partner] for a in acc])
    if cta_bits:
        mask = sum(1 << bit for bit in cta_bits)
        ranks = [program.cta_rank & ~mask | sum(1 << bit for i, bit in enumerate(cta_bits) if w >> i & 1)
                 for w in range(1 << len(cta_bits))]
        acc = combine_butterfly(exchange_across_ctas(program, op, acc, ranks), combine_all)

    # The output element each partial belongs to: its first register's coordinate, axis dropped.
    keep = [d for d in range(len(p.shape)) if d != axis]
    out_shape = tuple(p.shape[d] for d in keep)
    coords = p.coords[:, groups[:, 0]][..., keep]
    keys = np.ravel_multi_index(tuple(np.moveaxis(coords, -1, 0)), out_shape) if keep else \
        np.zeros(acc[0].shape, dtype=np.int64)
    return [_result(program, op, r.type, keys, a, out_shape) for r, a in zip(op.results, acc)]


def _result(program, op, ty, keys, partials, out_shape):
    if not isinstance(ty, TensorType):
        values = partials.ravel()
        bits = np.ascontiguousarray(values).view(np.dtype(f"uint{8 * values.itemsize}"))
        if (bits != bits[0]).any():
            k = int(np.flatnonzero(bits != bits[0])[0])
            raise InterpreterError(
                f"reduce: the threads' results disagree (thread 0 has {values[0]!r}, thread "
                f"{k // partials.shape[1]} has {values[k]!r}); is the combine function commutative?", op.loc)
        return values[0]
    rp = program.placement(ty, op)

    def explain(thread, reg, key):
        return (f"reduce: thread {thread} must hold the result {element_text(out_shape, key)} in register "
                f"{reg} of result layout {ty.layout!r}, but it reduced other elements; the result "
                f"layout must be SliceLayout({op.attrs['axis']}, operand layout)")

    return Tensor(ty, gather_local(keys, partials, rp.index, op.loc, explain))
