"""Rules for Blackwell tensor memory: allocations, views, ``tcgen05.ld`` and ``tcgen05.st``.

Each program (CTA) has its own TMEM, 128 lanes x 512 columns of 32-bit cells, held as
bytes (:class:`TensorMemory`) with a per-byte "written" mask: an element of ``b`` bits
takes ``b / 8`` bytes of its column, so packed 16-bit pairs, unpacked elements (one per
column, ``col_stride`` 2) and fp8 quadruples sit where the hardware puts them.  The kernel's
column plan (:func:`gluonkit.ir.tmem.plan_columns`) is made at the first allocation, so
over-subscribing the 512 columns is reported here as in the compiler.

A descriptor's runtime value is a :class:`TmemRef`, the view's ``(lane, column)``
address.  A load or store moves each register of each thread through the cell
:func:`~gluonkit.ir.tmem.access_map` gives it, so the lane-quarter rule, packing and
round trips are exact; reading a cell nothing wrote is an error (TMEM starts undefined).
Copies of one element in several cells (a layout that repeats a tile in each lane
quarter) must agree when loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...ir.diagnostics import CompilationError
from ...ir.tmem import TMEM_COLUMNS, access_map, plan_columns, slice_offset, stage_columns, tile_layout
from ...ir.types import TensorMemoryDescType, TensorType
from ...layouts.distributed import shape_per_cta
from ...layouts.linear import LinearLayout
from ...layouts.tmem import TMEM_ROWS
from ..dtypes import numpy_dtype
from ..engine import rule
from ..errors import InterpreterError
from ..values import Tensor, from_logical, to_logical

__all__ = ["TensorMemory", "TmemRef", "read_view", "write_view", "read_tile", "write_tile", "share_shape"]


@dataclass(eq=False)
class TensorMemory:
    """One CTA's tensor memory: bytes, which were written, and the kernel's column plan."""

    data: np.ndarray  # (128 lanes, 4 * 512 bytes)
    written: np.ndarray
    plan: object

    @classmethod
    def of(cls, program, op) -> "TensorMemory":
        tm = program.async_state.get("tmem")
        if tm is None:
            try:
                plan = plan_columns(program.func)
            except CompilationError as e:
                raise InterpreterError(e.message, e.loc) from None
            shape = (TMEM_ROWS, 4 * TMEM_COLUMNS)
            tm = cls(np.zeros(shape, np.uint8), np.zeros(shape, bool), plan)
            program.async_state["tmem"] = tm
            if program.cluster is not None:  # the even CTA of a pair writes its peer's (cta_group::2 MMAs)
                program.cluster.tmem[program.cta_rank] = tm
        return tm


@dataclass(frozen=True)
class TmemRef:
    """A descriptor's runtime value: its CTA's memory and the view's first lane and column."""

    memory: TensorMemory
    lane: int
    column: int


@lru_cache(maxsize=256)
def _cells(ty: TensorMemoryDescType, tensor_type: TensorType):
    """``(rows, byte columns)`` of every (thread, register) of a ``tensor_type`` access to view ``ty``."""
    reg = tensor_type.layout.to_linear_layout(list(tensor_type.shape))
    amap, problem = access_map(ty, reg)
    if problem:
        raise ValueError(problem)
    n_regs = reg.in_dim_size("register") if reg.has_in_dim("register") else 1
    table = amap.cells.table().reshape(-1, n_regs, 2)  # (thread, register, [row, slot])
    item = ty.element.itemsize
    rows, byte_cols = table[..., 0], table[..., 1] * item
    rows.setflags(write=False)
    byte_cols.setflags(write=False)
    return rows, byte_cols


def _addresses(ref: TmemRef, ty: TensorMemoryDescType, tensor_type: TensorType, op):
    try:
        rows, byte_cols = _cells(ty, tensor_type)
    except ValueError as e:
        raise InterpreterError(f"{op.name}: {e}", op.loc) from None
    rows = rows + ref.lane
    starts = byte_cols + 4 * ref.column
    item = ty.element.itemsize
    if rows.max(initial=0) >= TMEM_ROWS or starts.max(initial=0) + item > 4 * TMEM_COLUMNS:
        raise InterpreterError(f"{op.name}: the view reaches outside tensor memory (lane {int(rows.max())}, "
                               f"column {int(starts.max()) // 4})", op.loc)
    return rows[..., None], starts[..., None] + np.arange(item)


def read_view(program, ref: TmemRef, ty: TensorMemoryDescType, tensor_type: TensorType, op) -> Tensor:
    """``tcgen05.ld``: the view in ``tensor_type``'s register layout."""
    rows, cols = _addresses(ref, ty, tensor_type, op)
    mem = ref.memory
    unwritten = ~mem.written[rows, cols].all(axis=-1)
    if unwritten.any():
        t, r = (int(x) for x in np.argwhere(unwritten)[0])
        raise InterpreterError(
            f"{op.name} reads TMEM lane {int(rows[t, r, 0])} column {int(cols[t, r, 0]) // 4} (thread {t} register "
            f"{r}), which nothing has written yet (tensor memory starts with undefined contents)", op.loc)
    raw = np.ascontiguousarray(mem.data[rows, cols])
    regs = raw.view(numpy_dtype(ty.element))[..., 0]
    value = Tensor(tensor_type, regs)
    to_logical(value, program.threads, op.loc, "the TMEM copies of")  # copies of one element must agree
    return value


def write_view(program, ref: TmemRef, ty: TensorMemoryDescType, value: Tensor, op) -> None:
    """``tcgen05.st`` of ``value`` (its replicated copies must agree) into the view."""
    to_logical(value, program.threads, op.loc, "the stored value")
    rows, cols = _addresses(ref, ty, value.type, op)
    raw = np.ascontiguousarray(value.regs.astype(numpy_dtype(ty.element), copy=False)).view(np.uint8)
    mem = ref.memory
    mem.data[rows, cols] = raw.reshape(cols.shape)
    mem.written[rows, cols] = True


# ------------------------------------------------------- whole views (for tcgen05 ops)
@lru_cache(maxsize=256)
def _element_cells(ty: TensorMemoryDescType):
    """``(rows, slots)`` arrays of the view's shape: every element's cell relative to the view's address, and
    the extra lane offsets (32, 64, 96 …) where the layout keeps copies of the tile."""
    tile = tile_layout(ty)
    inverse = tile.pseudoinvert()
    shape = share_shape(ty)
    bases = {f"dim{d}": [inverse.basis(f"dim{d}", b) for b in range(size.bit_length() - 1)]
             for d, size in enumerate(shape)}
    view = LinearLayout(bases, tile.in_dim_sizes)
    table = view.table()  # rows: dim0 is the least significant input
    rows = table[:, 0].reshape(shape[::-1]).transpose()
    slots = table[:, 1].reshape(shape[::-1]).transpose()
    copies = [0]
    for b in range(tile.in_dim_size_log2("row")):
        if tile.basis("row", b) == [0, 0]:
            copies = copies + [c + (1 << b) for c in copies]
    for a in (rows, slots):
        a.setflags(write=False)
    return rows, slots, tuple(copies)


def share_shape(ty: TensorMemoryDescType) -> tuple:
    """The shape of one CTA's share of a 2-D view (the view's own without a cluster split): what
    :func:`read_tile` returns and :func:`write_tile` takes."""
    return tuple(shape_per_cta("tensor memory", list(ty.shape), ty.layout.cga_layout))


def _tile_index(ref: TmemRef, ty: TensorMemoryDescType, op, copy: int = 0):
    rows, slots, _ = _element_cells(ty)
    item = ty.element.itemsize
    r = rows + ref.lane + copy
    c = (slots * item + 4 * ref.column)[..., None] + np.arange(item)
    if r.max(initial=0) >= TMEM_ROWS or c.max(initial=0) >= 4 * TMEM_COLUMNS:
        raise InterpreterError(f"{op.name}: the tensor memory view reaches outside the 128 x 512 cells", op.loc)
    return r[..., None], c


def read_tile(ref: TmemRef, ty: TensorMemoryDescType, op) -> np.ndarray:
    """The 2-D view's elements (this CTA's share, :func:`share_shape`) as an array (what an MMA
    reads); every cell must be written."""
    rows, cols = _tile_index(ref, ty, op)
    if not ref.memory.written[rows, cols].all():
        raise InterpreterError(f"{op.name} reads tensor memory that nothing has written yet (tensor memory starts "
                               "with undefined contents; use use_acc=False or store the accumulator first)", op.loc)
    raw = np.ascontiguousarray(ref.memory.data[rows, cols])
    return raw.view(numpy_dtype(ty.element))[..., 0]


def write_tile(ref: TmemRef, ty: TensorMemoryDescType, values: np.ndarray, op, defined=None) -> None:
    """Put an array of the 2-D view's shape into its cells (and into every lane-quarter copy the layout keeps).

    ``defined`` (a bool array of the shape) marks the elements that carry data; the cells of the others stay
    undefined (a copy of unwritten shared memory), so a later read of them is reported."""
    raw = np.ascontiguousarray(np.asarray(values, dtype=numpy_dtype(ty.element))).view(np.uint8)
    for copy in _element_cells(ty)[2]:
        rows, cols = _tile_index(ref, ty, op, copy)
        ref.memory.data[rows, cols] = raw.reshape(cols.shape)
        ref.memory.written[rows, cols] = True if defined is None else np.broadcast_to(defined[..., None], cols.shape)


# ---------------------------------------------------------------------- allocation
@rule("tmem_alloc")
def _tmem_alloc(program, op, operands):
    memory = TensorMemory.of(program, op)
    ref = TmemRef(memory, 0, memory.plan.first_column[op.results[0].uid])
    if operands:
        write_view(program, ref, op.results[0].type, operands[0], op)
    return [ref]


# ------------------------------------------------------------------- loads, stores
@rule("tmem_load")
def _tmem_load(program, op, operands):
    value = read_view(program, operands[0], op.operands[0].type, op.results[0].type, op)
    if op.attrs["red"] == "none":
        return [value]
    x = to_logical(value, program.threads, op.loc).astype(np.float32)
    if op.attrs["abs"]:
        x = np.abs(x)
    reduce = np.min if op.attrs["red"] == "min" else np.max
    if op.attrs["propagate_nan"] == "all":
        red = reduce(x, axis=1)
    else:
        red = (np.nanmin if op.attrs["red"] == "min" else np.nanmax)(x, axis=1)
    return [value, from_logical(red, op.results[1].type, program.threads, op.loc)]


@rule("tmem_store")
def _tmem_store(program, op, operands):
    if bool(operands[2]):
        write_view(program, operands[0], op.operands[0].type, operands[1], op)
    return []


# -------------------------------------------------------------------------- views
@rule("tmem_index")
def _tmem_index(program, op, operands):
    ref, index = operands[0], int(operands[1])
    ty = op.operands[0].type
    if not 0 <= index < ty.shape[0]:
        raise InterpreterError(f"index {index} is out of range for the {ty.shape[0]} stages of a tensor memory "
                               f"buffer", op.loc)
    return [TmemRef(ref.memory, ref.lane, ref.column + index * stage_columns(ty)[0])]


@rule("tmem_slice")
def _tmem_slice(program, op, operands):
    ref = operands[0]
    lanes, columns = slice_offset(op.operands[0].type, op.attrs["dim"], op.attrs["start"])
    return [TmemRef(ref.memory, ref.lane + lanes, ref.column + columns)]


@rule("tmem_reinterpret")
def _tmem_reinterpret(program, op, operands):
    """The address does not change; only how coordinates name the cells (the result type) does."""
    return [operands[0]]
