"""Rules for shared-memory allocations, views, loads and stores.

Each ``local_alloc`` gives the running program its own zero-filled byte buffer
(:class:`SharedBuffer`), as each CTA has its own shared memory.  A descriptor's runtime
value is a :class:`SharedRef`: the buffer, the byte offset its ``index`` ops added and the
offset constant its ``slice`` ops XOR in (see :mod:`gluonkit.ir.memdesc`).  Loads and
stores go element by element through the view's offsets, so a layout bug in the shared
layout, a stage index out of range or a read of bytes nothing wrote shows up here with
the user's line.

Asynchronous ops register what they touch with the buffer: :class:`AsyncRead` for bytes an
in-flight op still reads (writing them is reported) and :class:`AsyncWrite` for bytes an
in-flight copy may still write (reading or writing them is reported).  Generic-proxy
writes (``store``) are stamped with a clock tick, so an async-proxy reader (a TMA store)
can tell whether a ``fence_async_shared`` came after them (:func:`unfenced_write`).
Inside warp-specialize partitions every load and store is also checked for races with the
other partitions (:mod:`.happens_before`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from ..ir.diagnostics import Location
from ..ir.memdesc import alloc_elements, cta_share_slots, cta_shares, shares_stride, slice_xor, stage_strides, view_to_offset
from ..ir.types import SharedMemoryDescType
from .dtypes import numpy_dtype
from .engine import rule
from .errors import InterpreterError
from .happens_before import on_access
from .values import element_text, from_logical, to_logical

__all__ = ["SharedBuffer", "SharedRef", "AsyncRead", "AsyncWrite", "element_addresses", "byte_mask", "fill_view", "note_fence",
           "owned",
           "unfenced_write"]

_CLOCK = itertools.count(1)  # orders generic writes and fences (programs run one at a time)


@dataclass(frozen=True, eq=False)
class AsyncRead:
    """Bytes of a buffer that an in-flight asynchronous op reads: writing them is a hazard.

    ``what`` names the op (with its line), ``fix`` says how to make the write safe.  Compared
    by identity: each in-flight op's record is removed from the buffer's list when it retires,
    and two records may hold equal masks (or masks numpy cannot compare with ``==``).
    """

    mask: np.ndarray  # one bool per byte of the buffer
    what: str
    fix: str
    # For a write from another CTA of the cluster (a multicast copy): whether that CTA (its rank) has
    # observed the op complete, which makes its write safe (None: only the buffer's CTA writes it).
    done_for: Optional[Callable[[int], bool]] = None


@dataclass(frozen=True, eq=False)
class AsyncWrite:
    """Bytes of a buffer that an in-flight asynchronous copy may still write: touching them is a hazard
    (compared by identity, like :class:`AsyncRead`)."""

    mask: np.ndarray  # one bool per byte of the buffer
    what: str
    fix: str


@dataclass(eq=False)
class SharedBuffer:
    """One allocation's bytes, which bytes were written, and its mbarriers' states."""

    ty: SharedMemoryDescType
    loc: Location
    data: np.ndarray
    written: np.ndarray
    barriers: Dict[int, object] = field(default_factory=dict)  # byte offset -> mbarrier state
    async_reads: List[AsyncRead] = field(default_factory=list)  # in-flight readers (see AsyncRead)
    async_writes: List[AsyncWrite] = field(default_factory=list)  # in-flight writers (see AsyncWrite)
    generic_ticks: Optional[np.ndarray] = None  # per byte: clock tick of its last generic write (0: none)
    generic_locs: Dict[int, Location] = field(default_factory=dict)  # tick -> the writing op's location
    generic_writers: Dict[int, dict] = field(default_factory=dict)  # tick -> the writer's async_state (its fences)
    cta: int = 0  # a buffer split between CTAs: the share this CTA holds (see ``owned``)

    def describe(self) -> str:
        return f"the shared buffer {list(self.ty.shape)} x {self.ty.element} allocated at line {self.loc.line}"


@dataclass(frozen=True)
class SharedRef:
    """A descriptor's runtime value: ``buffer``, bytes added by ``index``, offsets XORed by ``slice``."""

    buffer: SharedBuffer
    base: int
    xor: int


@lru_cache(maxsize=256)
def _view_offsets(ty: SharedMemoryDescType, share_stride: int) -> np.ndarray:
    """Element offset of every view coordinate, as an array of the view's shape (a split
    buffer's shares ``share_stride`` elements apart, see ``owned``)."""
    table = view_to_offset(ty, share_stride).table()[:, 0]  # rows: dim0 is the least significant input
    offsets = table.reshape(ty.shape[::-1]).transpose() if ty.shape else table
    offsets.setflags(write=False)
    return offsets


def element_addresses(ref: SharedRef, ty: SharedMemoryDescType, op) -> np.ndarray:
    """Byte offset in ``ref.buffer`` of every element of the view (shape ``ty.shape``)."""
    item = ty.element.itemsize
    stride = shares_stride(ref.buffer.ty) if cta_shares(ref.buffer.ty) > 1 else 0
    addresses = ref.base + (_view_offsets(ty, stride) ^ ref.xor) * item
    if ref.base % item:
        raise InterpreterError(f"{op.name}: the view starts at byte {ref.base} of {ref.buffer.describe()}, "
                               f"which is not aligned to its {item}-byte elements", op.loc)
    if addresses.size and int(addresses.max()) + item > ref.buffer.data.size:
        raise InterpreterError(f"{op.name}: the view reaches byte {int(addresses.max()) + item} of "
                               f"{ref.buffer.describe()}, which has {ref.buffer.data.size} bytes", op.loc)
    return addresses


def owned(ref: SharedRef, ty: SharedMemoryDescType, op) -> np.ndarray:
    """Which elements of the view (an array of its shape) this buffer's CTA holds.

    A buffer whose layout splits it between the CTAs of a cluster keeps, in the interpreter,
    every CTA's share in one array (``view_to_offset(cta_blocks=True)``); only the share of
    ``ref.buffer.cta`` is this CTA's memory, and only it is read or written."""
    shares = cta_shares(ref.buffer.ty)
    if shares == 1:
        return np.ones(ty.shape, bool)
    stride = shares_stride(ref.buffer.ty) * ty.element.itemsize
    # CTAs whose ranks differ only in bits the layout replicates hold the same share (a multicast operand).
    layout = ref.buffer.ty.layout  # (a SharedLinearLayout names its CTA bases block_bases)
    bases = getattr(layout, "cga_layout", None) or getattr(layout, "block_bases", None) or ()
    split = sum(1 << i for i, v in enumerate(bases) if any(v))
    return element_addresses(ref, ty, op) // stride == ref.buffer.cta & split


def _bytes_of(addresses: np.ndarray, item: int) -> np.ndarray:
    return addresses.reshape(-1, 1) + np.arange(item)


def read(ref: SharedRef, ty: SharedMemoryDescType, op) -> np.ndarray:
    """The view's elements as an array of its shape; every byte must have been written."""
    values, defined = read_undefined(ref, ty, op)
    if not defined.all():
        k = int(np.flatnonzero(~defined.ravel())[0])
        raise InterpreterError(
            f"{op.name} reads {element_text(ty.shape, k)} of the view, which nothing has written yet "
            f"({ref.buffer.describe()}; shared memory starts with undefined contents)", op.loc)
    return values


def read_undefined(ref: SharedRef, ty: SharedMemoryDescType, op) -> Tuple[np.ndarray, np.ndarray]:
    """``(values, defined)``: the view's elements and which of them were written (for a copy that moves undefined
    contents along instead of reading them, e.g. ``tcgen05_copy``; elements another CTA holds count as defined)."""
    mine = owned(ref, ty, op)
    addresses = element_addresses(ref, ty, op)[mine]
    item = ty.element.itemsize
    index = _bytes_of(addresses, item)
    _check_async_writes(ref.buffer, index, op, "reads")
    on_access(ref.buffer, index, op, write=False)
    defined = np.ones(ty.shape, bool)
    defined[mine] = ref.buffer.written[index].all(axis=1)
    values = np.zeros(ty.shape, numpy_dtype(ty.element))
    values[mine] = np.ascontiguousarray(ref.buffer.data[index]).view(numpy_dtype(ty.element)).ravel()
    return values, defined


def _check_async_writes(buffer: SharedBuffer, index: np.ndarray, op, verb: str) -> None:
    for writer in buffer.async_writes:
        if writer.mask[index].any():
            raise InterpreterError(f"{op.name} {verb} {buffer.describe()} while {writer.what} may still be writing "
                                   f"it; {writer.fix}", op.loc)


def byte_mask(ref: SharedRef, ty: SharedMemoryDescType, op) -> np.ndarray:
    """One bool per byte of ``ref``'s buffer: whether the view covers it."""
    mask = np.zeros(ref.buffer.data.size, bool)
    mask[_bytes_of(element_addresses(ref, ty, op)[owned(ref, ty, op)], ty.element.itemsize)] = True
    return mask


def fill_view(ref: SharedRef, ty: SharedMemoryDescType, values: np.ndarray, op) -> None:
    """Put an array of the view's shape into the view's bytes and mark them written: what an
    asynchronous copy does when it lands (its hazards were checked when it was issued) and the
    last step of :func:`write`."""
    item = ty.element.itemsize
    mine = owned(ref, ty, op)
    index = _bytes_of(element_addresses(ref, ty, op)[mine], item)
    values = np.broadcast_to(np.asarray(values, dtype=numpy_dtype(ty.element)), ty.shape)[mine]
    raw = np.ascontiguousarray(values).view(np.uint8)
    ref.buffer.data[index] = raw.reshape(-1, item)
    ref.buffer.written[index] = True


def write(program, ref: SharedRef, ty: SharedMemoryDescType, values: np.ndarray, op) -> None:
    """Store an array of the view's shape into the view (not into bytes an async op still reads);
    ``program`` (the running partition) is the writer whose later ``fence_async_shared`` covers it."""
    index = _bytes_of(element_addresses(ref, ty, op)[owned(ref, ty, op)], ty.element.itemsize)
    for reader in ref.buffer.async_reads:
        if reader.mask[index].any():
            raise InterpreterError(f"{op.name} overwrites {ref.buffer.describe()} while {reader.what} is still "
                                   f"reading it; {reader.fix}", op.loc)
    _check_async_writes(ref.buffer, index, op, "overwrites")
    on_access(ref.buffer, index, op, write=True)
    fill_view(ref, ty, values, op)
    buffer = ref.buffer
    if buffer.generic_ticks is None:
        buffer.generic_ticks = np.zeros(buffer.data.size, np.int64)
    tick = next(_CLOCK)
    buffer.generic_ticks[index] = tick
    buffer.generic_locs[tick] = op.loc
    buffer.generic_writers[tick] = program.async_state


def note_fence(program) -> None:
    """A ``fence_async_shared``: the program's earlier generic writes are visible to the async proxy."""
    program.async_state["fence_tick"] = next(_CLOCK)


def unfenced_write(program, ref: SharedRef, ty: SharedMemoryDescType, op) -> Optional[Location]:
    """Where a generic write to the view's bytes was followed by no ``fence_async_shared``, if one was.

    A write is fenced by a later fence of the program (partition) that reads it through the async
    proxy, or of the partition that wrote it: a warp-specialize partition that stores a tile, fences
    and arrives on an mbarrier hands it to an MMA or TMA store issued by another partition."""
    ticks = ref.buffer.generic_ticks
    if ticks is None:
        return None
    index = _bytes_of(element_addresses(ref, ty, op), ty.element.itemsize)
    own_fence = program.async_state.get("fence_tick", 0)
    for tick in np.unique(ticks[index])[::-1].tolist():
        if tick <= own_fence:
            return None
        if ref.buffer.generic_writers[tick].get("fence_tick", 0) <= tick:
            return ref.buffer.generic_locs[tick]
    return None


# ---------------------------------------------------------------------- allocation
@rule("local_alloc")
def _local_alloc(program, op, operands):
    ty = op.results[0].type
    shares = cta_shares(ty)  # split between CTAs: room for every share (see ``owned``)
    nbytes = (alloc_elements(ty) if shares == 1 else shares_stride(ty) * cta_share_slots(ty)) * ty.element.itemsize
    buffer = SharedBuffer(ty, op.loc, np.zeros(nbytes, np.uint8), np.zeros(nbytes, bool), cta=program.cta_rank)
    ref = SharedRef(buffer, 0, 0)
    if program.cluster is not None:  # other CTAs reach this buffer's copy in this CTA (nvidia/cluster.py)
        program.cluster.register(program.cta_rank, op, buffer)
    if operands:
        write(program, ref, ty, to_logical(operands[0], program.threads, op.loc, "the initial value"), op)
    return [ref]


# ------------------------------------------------------------------- loads, stores
@rule("local_load")
def _local_load(program, op, operands):
    values = read(operands[0], op.operands[0].type, op)
    return [from_logical(values, op.results[0].type, program.threads, op.loc)]


@rule("local_store")
def _local_store(program, op, operands):
    values = to_logical(operands[1], program.threads, op.loc, "the stored value")
    write(program, operands[0], op.operands[0].type, values, op)
    return []


# -------------------------------------------------------------------------- views
@rule("memdesc_index")
def _memdesc_index(program, op, operands):
    ref, index = operands[0], int(operands[1])
    ty = op.operands[0].type
    if not 0 <= index < ty.shape[0]:
        raise InterpreterError(f"index {index} is out of range for the {ty.shape[0]} stages of {ref.buffer.describe()}",
                               op.loc)
    step = stage_strides(ty)[0] * ty.element.itemsize
    return [SharedRef(ref.buffer, ref.base + index * step, ref.xor)]


@rule("memdesc_slice")
def _memdesc_slice(program, op, operands):
    ref = operands[0]
    xor = slice_xor(op.operands[0].type, op.attrs["dim"], op.attrs["start"])
    return [SharedRef(ref.buffer, ref.base, ref.xor ^ xor)]


@rule("memdesc_permute", "memdesc_reshape", "memdesc_reinterpret")
def _same_bytes(program, op, operands):
    """Offsets do not change; only how coordinates name them (the result type) does."""
    return [operands[0]]
