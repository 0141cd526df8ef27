"""Verifier rules of Blackwell's TMA gather and scatter (``async_tma_gather``, ``async_tma_scatter``).

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  The hardware instructions (``cp.async.bulk.tensor.2d.tile::gather4`` /
``scatter4``) move four rows of one descriptor box per instruction, each warp issuing the
instructions for the row offsets its registers hold, so:

* the descriptor is a tiled rank-2 descriptor whose block is ``[1, BLOCK_Y]`` with rows of
  at least 32 bytes (``BLOCK_Y >= 8 * 32 // bits``), in a row-major (not transposed)
  :class:`~gluonkit.layouts.shared.NVMMASharedLayout`;
* the shared view is a whole ``[BLOCK_X, BLOCK_Y]`` tile of the descriptor's element type
  and layout, ``BLOCK_X`` (the number of offsets) at least 8;
* the offsets are a 1-D int32 tensor whose layout puts each group of four consecutive
  offsets in four consecutive registers of a thread (register bases ``[1]``, ``[2]`` first)
  and gives every lane of a warp the same offsets (zero lane bases) — Gluon's rule;
  :func:`gather_problem` says what is wrong, for the frontend and this verifier alike.
"""

from __future__ import annotations

from typing import Optional

from ..layouts.distributed import AutoLayout
from ..layouts.shared import NVMMASharedLayout
from .core import Operation
from .types import DType, SharedMemoryDescType, TensorDescIm2ColType, TensorDescType, TensorType, int1, int32
from .verify_checks import fail, one_mbarrier
from .verifier import rule

__all__ = ["gather_problem", "offsets_layout_problem"]

MIN_ROWS = 8
MIN_ROW_BYTES = 32


def gather_problem(desc, smem: SharedMemoryDescType, rows: int) -> Optional[str]:
    """Why a gather/scatter of ``rows`` offsets between descriptor type ``desc`` and the
    shared view ``smem`` cannot be issued, or None."""
    if not isinstance(desc, TensorDescType) or isinstance(desc, TensorDescIm2ColType):
        return f"the descriptor must be a tiled tensor descriptor, got {desc}"
    block = list(desc.block_shape)
    if len(block) != 2 or block[0] != 1:
        return f"the descriptor's block must be [1, BLOCK_Y] (one row per offset), got {block}"
    layout = desc.layout
    if not isinstance(layout, NVMMASharedLayout) or layout.transposed:
        return f"the descriptor's layout must be a row-major NVMMASharedLayout, got {layout!r}"
    if block[1] * desc.element.itemsize < MIN_ROW_BYTES:
        least = MIN_ROW_BYTES // desc.element.itemsize
        return (f"a row of the block is {block[1]} x {desc.element} = {block[1] * desc.element.itemsize} bytes; "
                f"TMA gather/scatter needs at least {MIN_ROW_BYTES} (BLOCK_Y >= {least})")
    if rows < MIN_ROWS:
        return f"{rows} row offsets: TMA gather/scatter needs at least {MIN_ROWS}"
    if not isinstance(smem, SharedMemoryDescType):
        return f"the shared memory operand must be a shared memory descriptor, got {smem}"
    if smem.element != desc.element or list(smem.shape) != [rows, block[1]]:
        return (f"the shared view is {list(smem.shape)} x {smem.element} but {rows} offsets of the descriptor's "
                f"[1, {block[1]}] x {desc.element} rows need [{rows}, {block[1]}] x {desc.element}")
    if smem.shape != smem.alloc_shape:
        return f"the shared view is a slice of a {list(smem.alloc_shape)} buffer; index() stages instead of slicing"
    if smem.layout != layout:
        return f"the shared view's layout {smem.layout!r} must be the descriptor's layout {layout!r}"
    return None


def offsets_layout_problem(ty: TensorType) -> Optional[str]:
    """Why the row offsets' tensor type cannot feed gather4/scatter4, or None (AutoLayout: not yet known)."""
    if len(ty.shape) != 1 or ty.element != int32:
        return f"the row offsets must be a 1-D int32 tensor, got {ty}"
    if isinstance(ty.layout, AutoLayout):
        return None
    ll = ty.layout.to_linear_layout(list(ty.shape))
    regs = ll.bases.get("register", [])
    lanes = ll.bases.get("lane", [])
    if [b[0] for b in regs[:2]] != [1, 2] or any(b[0] for b in lanes):
        return (f"the row offsets' layout {ty.layout!r} must hold each 4 consecutive offsets in 4 consecutive "
                "registers of a thread (register bases [1], [2] first) and give every lane of a warp the same "
                "offsets (zero lane bases); e.g. gl.SliceLayout(0, gl.BlockedLayout([1, 4], [32, 1], "
                "[1, num_warps], [1, 0]))")
    return None


def _check(op: Operation, smem_index: int, offsets_index: int) -> None:
    if op.results or op.regions or len(op.operands) != offsets_index + 2:
        fail(op, f"takes {offsets_index + 2} operands and has no results or regions")
    offsets = op.operands[offsets_index].type
    if not isinstance(offsets, TensorType):
        fail(op, f"the row offsets must be a tensor, got {offsets}")
    problem = offsets_layout_problem(offsets) or gather_problem(op.operands[0].type, op.operands[smem_index].type,
                                                                offsets.shape[0])
    if problem:
        fail(op, problem)
    if op.operands[offsets_index + 1].type != int32:
        fail(op, f"the column offset must be an int32 scalar, got {op.operands[offsets_index + 1].type}")


@rule("async_tma_gather")
def _gather(op):
    _check(op, 1, 4)
    one_mbarrier(op, op.operands[2])
    pred = op.operands[3].type
    if not isinstance(pred, DType) or pred != int1:
        fail(op, f"the predicate must be an int1 scalar, got {pred}")


@rule("async_tma_scatter")
def _scatter(op):
    _check(op, 1, 2)
