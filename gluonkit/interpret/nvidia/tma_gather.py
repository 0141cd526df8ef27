"""Rules for Blackwell's TMA gather and scatter: ``async_tma_gather``, ``async_tma_scatter``.

A gather is a TMA load whose box is rows ``x_offsets`` of the descriptor's tensor, columns
``y_offset …``; a scatter is a TMA store to such a box.  Both go through
:func:`~.tma.start_load` / :func:`~.tma.start_store`, so they complete, are checked and are
waited for exactly as TMA loads and stores are (mbarrier bytes, hazards, ``store_wait``).
Rows or columns outside the tensor read as zero (NaN with ``padding="nan"``) and are not
written.  What the hardware faults on (an illegal-instruction error that ends the CUDA
context) is reported at the line instead: a ``y_offset`` that is not a multiple of 16
bytes, and negative scatter offsets.  Two scatter offsets naming the same row with
different data are reported too (the GPU leaves either row there).
"""

from __future__ import annotations

import numpy as np

from ..engine import rule
from ..errors import InterpreterError
from ..shared_memory import read
from ..values import to_logical
from .mbarrier import barrier_state
from .tma import TensorMap, start_load, start_store

__all__ = []


def _rows_box(program, op, tmap: TensorMap, offsets_value, y_offset: int, block_y: int, what: str):
    """(rows, (byte address per in-bounds element, in-bounds mask)) of the rows × columns box."""
    rows = to_logical(offsets_value, program.num_warps, op.loc, f"{what}'s x_offsets").astype(np.int64)
    if (y_offset * tmap.element.itemsize) % 16:
        raise InterpreterError(f"{what}: y_offset {y_offset} is not a multiple of 16 bytes "
                               f"({16 // tmap.element.itemsize} {tmap.element} elements); the GPU stops the kernel "
                               "with an illegal-instruction error", op.loc)
    cols = y_offset + np.arange(block_y, dtype=np.int64)
    inside = (((rows >= 0) & (rows < tmap.shape[0]))[:, None]) & (((cols >= 0) & (cols < tmap.shape[1]))[None, :])
    offset = rows[:, None] * tmap.strides[0] + cols[None, :] * tmap.strides[1]
    return rows, (tmap.origin + offset[inside] * tmap.element.itemsize, inside)


@rule("async_tma_gather")
def _gather(program, op, operands):
    tmap, ref, bar, pred, offsets, y_offset = operands
    if not bool(pred):
        return []
    ty = op.operands[1].type
    barrier = barrier_state(bar, op, operand=2)
    _, box = _rows_box(program, op, tmap, offsets, int(y_offset), ty.shape[1], "async_gather")
    start_load(program, op, tmap, ref, ty, box, barrier, [int(y_offset)])
    return []


@rule("async_tma_scatter")
def _scatter(program, op, operands):
    tmap, ref, offsets, y_offset = operands
    ty = op.operands[1].type
    rows, box = _rows_box(program, op, tmap, offsets, int(y_offset), ty.shape[1], "async_scatter")
    if (rows < 0).any() or int(y_offset) < 0:
        bad = int(rows[rows < 0][0]) if (rows < 0).any() else int(y_offset)
        raise InterpreterError(f"async_scatter: offset {bad} is negative; scatter offsets must be non-negative (the "
                               "GPU stops the kernel with an illegal-instruction error)", op.loc)
    kept = rows < tmap.shape[0]
    unique, first = np.unique(rows[kept], return_index=True)
    if len(unique) < kept.sum():
        src = read(ref, ty, op)[kept]
        for i, row in enumerate(rows[kept]):
            j = first[np.searchsorted(unique, row)]
            if not np.array_equal(src[i], src[j], equal_nan=True):
                raise InterpreterError(f"async_scatter: row {int(row)} is scattered twice with different data (from "
                                       f"rows {j} and {i} of the source, counting in-bounds offsets); the GPU "
                                       "leaves either one", op.loc)
    start_store(program, op, ref, ty, box, [int(y_offset)])
    return []
