"""Rules for TMA copies: ``async_tma_copy_global_to_shared``, ``…_shared_to_global``, ``store_wait``.

A descriptor's runtime value is a :class:`TensorMap` (what the host ``TensorDescriptor``
encodes: where element 0 of the global tensor is in :class:`~.memory.Memory`, its extents
and element strides, the out-of-bounds fill).  Copies move one block whose coordinates
start at ``coord``; elements outside ``[0, shape)`` read as zero (NaN with
``padding="nan"``) and are not written by stores, as the hardware does.  A descriptor in
im2col mode carries an :class:`~.tma_im2col.Im2ColMap`; its loads gather pixels
(:func:`~.tma_im2col.im2col_box`) and are otherwise loads like the others.

Copies complete asynchronously, at points a seeded scheduler chooses
(``GLUONKIT_INTERPRET_SEED``, default 0, mixed with the program id): before any later op
each copy in flight completes with probability 1/4, and a wait completes what it needs.

* A **load** reads global memory when it lands, writes the shared buffer (as the async
  proxy: no fence needed before a TMA store or wgmma reads it) and completes its bytes
  on the mbarrier (:func:`~.mbarrier.complete_tx`); at issue its bytes are counted towards
  the barrier phase the program's order gives it (:func:`~.mbarrier.issue_tx`), so checks
  do not depend on when it lands; an ``mbarrier.wait`` on that barrier lands the copies it
  needs.  From issue until a successful wait observes its phase, the
  buffer's bytes are registered as an :class:`~.shared_memory.AsyncWrite`: reading
  (``load``, wgmma) or writing them is reported with both lines.
* A **store** reads shared memory at issue (equivalent to the hardware's later read,
  because writing the buffer before ``store_wait`` retires the copy is reported), checks
  that no generic ``store`` to those bytes came after the last ``fence_async_shared``,
  and writes global memory when it completes; ``store_wait(n)`` retires the oldest until
  at most ``n`` remain (each copy is its own bulk group, as the lowering commits one per
  copy).  ``store_wait(n, read_only=True)``, the default, only ends the copies' reads of
  shared memory: their writes to global memory land later, at scheduler-chosen points (at
  the latest when the kernel ends), so a kernel that reads them back, or signals another
  program, without ``read_only=False`` can see the old values, as on the hardware.
* A **multicast** load of a cluster kernel is issued, as on the GPU, by CTA 0 alone, at its
  program point: one load per CTA of the cluster into the same buffer offset of that CTA's
  shared memory, completing its bytes on the barrier at the same offset in that CTA (the
  other CTAs issue nothing).  So a CTA that waits for a multicast block depends on CTA 0
  having issued it, and a multicast into a buffer another CTA still reads asynchronously
  (a wgmma in flight) is reported like any overwrite.
* The kernel may not return with copies in flight: the CTA's shared memory would go away
  under them (a store needs ``store_wait(0)``, a load a wait on its barrier).
"""

from __future__ import annotations

import os
import random
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, List, Optional, Tuple

import numpy as np

from ...ir.types import DType, SharedMemoryDescType
from ..dtypes import numpy_dtype
from ..engine import rule
from ..errors import InterpreterError
from ..happens_before import on_access, release
from .mbarrier import barrier_state, complete_tx, issue_tx
from ..shared_memory import AsyncRead, AsyncWrite, SharedRef, byte_mask, fill_view, owned, read, unfenced_write
from ..trace import view_name
from .tma_im2col import Im2ColMap, im2col_box

__all__ = ["TensorMap", "Im2ColMap", "start_load", "start_store"]

_COMPLETE_PROBABILITY = 0.25


@dataclass(frozen=True)
class TensorMap:
    """A descriptor in the interpreter: ``shape`` elements of ``element`` at ``origin`` (element 0's
    address), ``strides`` in elements (Python order), out-of-bounds ``padding`` ``"zero"`` or ``"nan"``;
    ``im2col`` for a descriptor in im2col mode."""

    origin: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    element: DType
    padding: str = "zero"
    im2col: Optional[Im2ColMap] = None


def _box(tmap: TensorMap, block: Tuple[int, ...], coords: List[int]):
    """(byte address per in-bounds element, in-bounds mask) of the block at ``coords``."""
    index = np.indices(block, dtype=np.int64)
    inside = np.ones(block, bool)
    offset = np.zeros(block, np.int64)
    for d, c in enumerate(coords):
        g = index[d] + c
        inside &= (g >= 0) & (g < tmap.shape[d])
        offset += g * tmap.strides[d]
    return tmap.origin + offset[inside] * tmap.element.itemsize, inside


@dataclass
class _State:
    """This program's TMA copies in flight and its scheduler."""

    rng: random.Random
    loads: List["_Load"] = field(default_factory=list)  # not yet released by a wait
    stores: Deque["_Store"] = field(default_factory=deque)  # not yet retired by store_wait
    writing: List["_Store"] = field(default_factory=list)  # retired read-only, global write pending


def _tma(program) -> _State:
    state = program.async_state.get("tma")
    if state is None:
        seed = os.environ.get("GLUONKIT_INTERPRET_SEED", "0")
        state = program.async_state["tma"] = _State(random.Random(f"{seed}/{program.pid}"))
        program.progress["tma"] = _progress
        program.at_exit["tma"] = _at_exit
    return state


class _Load:
    """One global-to-shared copy: lands (writes the buffer, completes bytes), then is released by a wait."""

    def __init__(self, program, op, tmap: TensorMap, ref: SharedRef, ty: SharedMemoryDescType, box, barrier):
        self.program, self.op, self.loc = program, op, op.loc
        self.tmap, self.ref, self.ty, self.box, self.barrier = tmap, ref, ty, box, barrier
        self.what = f"the TMA load issued at line {op.loc.line}"
        self.landed = False
        self.issued_in = -1  # the barrier phase its bytes count towards (mbarrier.issue_tx)
        self.writer = AsyncWrite(byte_mask(ref, ty, op), self.what,
                                 "wait on its mbarrier (mbarrier.wait(bar, phase)) first")
        self.nbytes = int(self.writer.mask.sum())  # this CTA's share of a block split between CTAs
        self.span = None  # its span on a trace, while recording one

    def land(self) -> None:
        addresses, inside = self.box
        dtype = numpy_dtype(self.ty.element)
        fill = np.nan if self.tmap.padding == "nan" else 0
        values = np.full(self.ty.shape, fill, dtype=dtype)
        values[inside] = self.program.memory.read(addresses, dtype, self.loc,
                                                  lambda i: f"element {i} of the TMA load's in-bounds box")
        fill_view(self.ref, self.ty, values, self.op)
        self.landed = True
        if self.span is not None:
            self.span.finish()
        complete_tx(self.barrier, self.nbytes, self.loc, self.program.trace, self.op)

    def release(self) -> None:
        self.ref.buffer.async_writes.remove(self.writer)
        _tma(self.program).loads.remove(self)


class _Store:
    """One shared-to-global copy: its data (read at issue), written to global memory on completion."""

    def __init__(self, program, op, ref: SharedRef, ty: SharedMemoryDescType, box, coords):
        self.program, self.loc = program, op.loc
        self.what = f"the TMA store issued at line {op.loc.line}"
        values = read(ref, ty, op)
        addresses, inside = box
        mine = owned(ref, ty, op)[inside]  # a block split between CTAs: each writes its own share
        self.addresses, self.values = addresses[mine], values[inside][mine]
        self.buffer = ref.buffer
        self.reader = AsyncRead(byte_mask(ref, ty, op), self.what,
                                "call tma.store_wait(n) until it has completed, first")
        self.buffer.async_reads.append(self.reader)
        self.flushed = False
        self.span = None if program.trace is None else program.trace.start(
            f"TMA store from {view_name(ref, ty)}", "tma.store", op, source_buffer=view_name(ref, ty),
            coords=list(coords), bytes=ty.nbytes)

    def flush(self) -> None:
        if not self.flushed:
            self.program.memory.write(self.addresses, self.values, self.loc,
                                      lambda i: f"element {i} of the TMA store's in-bounds box")
            self.flushed = True

    def retire(self, read_only: bool) -> None:
        """``store_wait`` passed it: its read of shared memory is over; its global write too
        unless ``read_only`` (then it lands at a scheduler-chosen point, at the latest when
        the kernel ends)."""
        if not read_only:
            self.flush()
        self.buffer.async_reads.remove(self.reader)
        if self.span is not None:
            self.span.finish(read_only=read_only)


def _progress(program, op) -> None:
    """Before ``op``: complete some copies in flight (the seeded scheduler's choice)."""
    state = program.async_state["tma"]
    for load in list(state.loads):
        if not load.landed and state.rng.random() < _COMPLETE_PROBABILITY:
            load.land()
    for store in list(state.stores) + state.writing:
        if not store.flushed and state.rng.random() < _COMPLETE_PROBABILITY:
            store.flush()
    state.writing = [store for store in state.writing if not store.flushed]


def _at_exit(program, op) -> None:
    state = program.async_state["tma"]
    # A warp-specialize partition is checked when it ends, the kernel when it returns.
    ends = f"{program.partition_name} ends" if program.partition_name else "the kernel returns"
    end = f"{program.partition_name} ends" if program.partition_name else "the kernel ends"
    if state.stores:
        store = state.stores[0]
        raise InterpreterError(f"{ends} while {store.what} may still be reading shared memory; call "
                               f"tma.store_wait(0) before {end}", store.loc)
    # A multicast's loads into other CTAs are observed by those CTAs' waits (which land them).
    mine = [load for load in state.loads if load.ref.buffer.cta == getattr(program, "cta_rank", 0)]
    if mine:
        load = mine[0]
        raise InterpreterError(f"{ends} while {load.what} is in flight (no mbarrier.wait observed its "
                               f"completion); wait on its mbarrier before {end}", load.loc)
    for store in state.writing:  # the grid's end makes every global write visible
        store.flush()


def _coords(operands) -> List[int]:
    return [int(c) for c in operands]


@rule("async_tma_copy_global_to_shared")
def _global_to_shared(program, op, operands):
    tmap, ref, bar, pred = operands[:4]
    if not bool(pred):
        return []
    ty = op.operands[1].type
    barrier = barrier_state(bar, op, operand=2, program=program)  # a pair barrier: the even CTA's
    rank = len(tmap.shape)
    if tmap.im2col is not None:
        coords = _coords(operands[4:4 + rank])
        box = im2col_box(tmap, tmap.im2col, ty.shape, coords, operands[4 + rank:], op.operands[0].type.max_offset,
                         op.loc)
    else:
        coords = _coords(operands[4:])
        box = _box(tmap, ty.shape, coords)
    if op.attrs.get("multicast") and program.cluster is not None:
        _multicast(program, op, tmap, ref, bar, ty, box, coords)
        return []
    start_load(program, op, tmap, ref, ty, box, barrier, coords)
    return []


def _multicast(program, op, tmap: TensorMap, ref: SharedRef, bar: SharedRef, ty, box, coords) -> None:
    """CTA 0's multicast: the block into ``ref`` of every CTA of the cluster, its bytes on ``bar``
    of that CTA (the other CTAs issue nothing)."""
    if program.cta_rank != 0:
        return
    for target in range(len(program.cluster.arrivals)):
        peer = (lambda r: r) if target == 0 else (lambda r: program.cluster.peer(r, target, op))
        try:
            barrier = barrier_state(peer(bar), op, operand=2)
        except InterpreterError as e:
            e.notes.append((f"CTA 0 multicasts into CTA {target} here: every CTA must initialize the barrier, and "
                            "a cluster.barrier() must follow, before CTA 0 multicasts", None))
            e.args = (e._format(),)
            raise
        start_load(program, op, tmap, peer(ref), ty, box, barrier, coords)


def start_load(program, op, tmap: TensorMap, ref: SharedRef, ty: SharedMemoryDescType, box, barrier, coords) -> None:
    """Issue a load of ``ty``'s bytes into ``ref`` from ``box`` (byte address per in-bounds element, in-bounds
    mask): the hazard checks, the barrier's transaction count and the in-flight bookkeeping of every TMA load."""
    load = _Load(program, op, tmap, ref, ty, box, barrier)
    mask = load.writer.mask
    for other in ref.buffer.async_reads:
        if (other.mask & mask).any():
            raise InterpreterError(f"{op.name} overwrites {ref.buffer.describe()} while {other.what} is still "
                                   f"reading it; {other.fix}", op.loc)
    for other in ref.buffer.async_writes:
        if (other.mask & mask).any():
            raise InterpreterError(f"{op.name} copies into {ref.buffer.describe()} while {other.what} may still be "
                                   f"writing it; {other.fix}", op.loc)
    on_access(ref.buffer, np.flatnonzero(mask), op, write=True)  # between partitions: written at issue
    load.issued_in = issue_tx(barrier, load.nbytes, op)
    release(barrier, load.issued_in)  # its bytes complete that phase: the write happens before it
    ref.buffer.async_writes.append(load.writer)
    barrier.copies.append(load)
    if program.trace is not None:
        dest = view_name(ref, ty)
        load.span = program.trace.start(f"TMA load → {dest}", "tma.load", op, destination=dest,
                                        barrier=barrier.name, phase=load.issued_in, coords=coords,
                                        bytes=load.nbytes)
    _tma(program).loads.append(load)


@rule("async_tma_copy_shared_to_global")
def _shared_to_global(program, op, operands):
    tmap, ref = operands[:2]
    ty = op.operands[1].type
    coords = _coords(operands[2:])
    start_store(program, op, ref, ty, _box(tmap, ty.shape, coords), coords)
    return []


def start_store(program, op, ref: SharedRef, ty: SharedMemoryDescType, box, coords) -> None:
    """Issue a store of ``ref`` to ``box`` (byte address per in-bounds element, in-bounds mask): the fence
    check and one bulk group, as every TMA store."""
    unfenced = unfenced_write(program, ref, ty, op)
    if unfenced is not None:
        raise InterpreterError(f"{op.name} reads {ref.buffer.describe()}, which the store at line {unfenced.line} "
                               "wrote through the generic proxy with no fence_async_shared() since; call "
                               "fence_async_shared() between the store and the TMA copy", op.loc)
    _tma(program).stores.append(_Store(program, op, ref, ty, box, coords))


@rule("async_tma_store_wait")
def _store_wait(program, op, operands):
    state = _tma(program)
    read_only = op.attrs["read_only"]
    if program.trace is not None:
        retires = max(0, len(state.stores) - op.attrs["pendings"])
        program.trace.instant("store_wait", "tma.store_wait", op, pendings=op.attrs["pendings"], retires=retires,
                              read_only=read_only)
    while len(state.stores) > op.attrs["pendings"]:
        store = state.stores.popleft()
        store.retire(read_only)
        if not store.flushed:
            state.writing.append(store)
    if not read_only:  # wait_group N: at most N incomplete, counting earlier read-only retirements
        for store in state.writing:
            store.flush()
        state.writing.clear()
    return []
