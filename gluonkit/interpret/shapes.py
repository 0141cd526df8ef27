"""Rules for shape and layout ops.

``convert_layout`` is the one op here that moves data between threads: it goes through
the logical array (checking replicated copies agree) and redistributes.  Every other op
— ``broadcast``, ``expand_dims``, ``reshape``, ``permute``, ``split``, ``join``,
``set_auto_layout`` — moves no data on the GPU: each thread builds its result registers
from its own operand registers.  The interpreter does the same (:func:`gather_local`), so
a result layout that would need data from another thread — a layout bug in the program or
in inference — is reported instead of silently giving right answers on the CPU.

``reshape`` with ``can_reorder`` keeps every thread's registers as they are (the order of
elements is then whatever the layouts make it, as Triton allows).
"""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from ..layouts.conversion import moves_between_ctas
from .engine import rule
from .errors import InterpreterError
from .nvidia.cluster import exchange_across_ctas
from .values import Tensor, element_text, from_logical, gather_local, to_logical


def _local(program, op, src: Tensor, result_ty: TensorType, source_index_of) -> Tensor:
    """The result of a data-free op: each result register takes, from its own thread, the
    source element ``source_index_of(result coordinates)`` (a row-major flat index)."""
    sp = program.placement(src.type, op)
    rp = program.placement(result_ty, op)
    wanted = source_index_of(rp.coords)

    def explain(thread, reg, key):
        return (f"{op.name}: thread {thread} must hold {element_text(sp.shape, key)} of the operand to "
                f"produce register {reg} of its result, but operand layout {src.type.layout!r} "
                f"puts it in another thread (result layout {result_ty.layout!r}); the layouts do "
                f"not match this op, which moves no data — insert convert_layout")

    return Tensor(result_ty, gather_local(sp.index, src.regs, wanted, op.loc, explain))


def _flat(coords: np.ndarray, shape) -> np.ndarray:
    return np.ravel_multi_index(tuple(np.moveaxis(coords, -1, 0)), shape)


@rule("broadcast")
def _broadcast(program, op, operands):
    (src,) = operands
    ty = op.results[0].type
    keep = np.array([s != 1 for s in src.type.shape])
    return [_local(program, op, src, ty, lambda c: _flat(c * keep, src.type.shape))]


@rule("expand_dims")
def _expand_dims(program, op, operands):
    (src,) = operands
    axis = op.attrs["axis"]
    return [_local(program, op, src, op.results[0].type,
                   lambda c: _flat(np.delete(c, axis, axis=-1), src.type.shape))]


@rule("reshape")
def _reshape(program, op, operands):
    (src,) = operands
    ty = op.results[0].type
    if op.attrs.get("can_reorder"):
        rp = program.placement(ty, op)
        if rp.index.shape != src.regs.shape:
            raise InterpreterError(
                f"reshape: the result layout holds {rp.num_regs} registers per thread but the "
                f"operand's holds {src.regs.shape[1]}; a reordering reshape keeps registers in place", op.loc)
        return [Tensor(ty, src.regs.copy())]
    return [_local(program, op, src, ty, lambda c: _flat(c, ty.shape))]


@rule("permute")
def _permute(program, op, operands):
    (src,) = operands
    inverse = np.argsort(op.attrs["order"])
    return [_local(program, op, src, op.results[0].type, lambda c: _flat(c[..., inverse], src.type.shape))]


@rule("split")
def _split(program, op, operands):
    (src,) = operands
    results = []
    for half, r in enumerate(op.results):
        def index_of(c, half=half):
            return _flat(np.concatenate([c, np.full(c.shape[:-1] + (1,), half)], axis=-1), src.type.shape)
        results.append(_local(program, op, src, r.type, index_of))
    return results


@rule("join")
def _join(program, op, operands):
    a, b = operands
    ty = op.results[0].type
    pa, pb = program.placement(a.type, op), program.placement(b.type, op)
    # Both operands as one source whose element (c, k) has flat index 2 * flat(c) + k.
    keys = np.concatenate([2 * pa.index, 2 * pb.index + 1], axis=1)
    regs = np.concatenate([a.regs, b.regs], axis=1)
    rp = program.placement(ty, op)

    def explain(thread, reg, key):
        return (f"join: thread {thread} must hold {element_text(a.type.shape, key // 2)} of operand "
                f"{key % 2} for register {reg} of the result, but the operand layout puts it in "
                f"another thread (result layout {ty.layout!r}); insert convert_layout")

    return [Tensor(ty, gather_local(keys, regs, _flat(rp.coords, ty.shape), op.loc, explain))]


@rule("convert_layout")
def _convert_layout(program, op, operands):
    logical = to_logical(operands[0], program.threads, op.loc, "the converted value")
    src, dst = operands[0].type, op.results[0].type
    if program.cluster is not None and moves_between_ctas(src.layout, dst.layout, list(src.shape)):
        # each CTA's share, exchanged between two cluster barriers as the GPU does (lower/ops/convert_across_ctas.py)
        held = program.placement(src, op).owner >= 0
        logical = logical.copy()
        for theirs, their_held in exchange_across_ctas(program, op, (logical, held), range(program.cluster.num_ctas)):
            logical.ravel()[their_held] = theirs.ravel()[their_held]
    return [from_logical(logical, dst, program.threads, op.loc)]


@rule("set_auto_layout")
def _set_auto_layout(program, op, operands):
    (src,) = operands
    ty = op.results[0].type
    return [_local(program, op, src, ty, lambda c: _flat(c, ty.shape))]
