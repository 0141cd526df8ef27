"""Measured timelines: the opt-in instrumentation that stamps a kernel's pipeline events.

When a kernel is compiled with ``instrument=True`` (:func:`gluonkit.lower.compiler.compile_function`,
used by :func:`gluonkit.runtime.timeline.measure`), the block walker calls :meth:`Instrumentation.before`
and :meth:`Instrumentation.after` around every op and the ops of :data:`EVENTS` get a *record*:

* every lane of the warp reaches the record; lane 0 of the warp stores the 8 bytes
  ``{u32 %clock, u32 event id | %smid << 20 | 1 << 31}`` of a 16-byte entry in the warp's
  row of a device buffer whose address the host writes into the module's global
  ``gluonkit_timeline`` before the launch (so the kernel's signature does not change);
  *anchors* — the kernel's start and end, each partition's start and end — also store the
  entry's first 8 bytes, ``%globaltimer``: the host aligns warps and turns cycles into
  nanoseconds with them, and reads the cheap ``%clock`` everywhere else;
* the row of a warp is ``(linear CTA id * warps per CTA + physical warp id) * capacity``
  entries from the start (computed once, in the prologue); a per-thread counter (a register
  after LLVM's mem2reg) gives the slot, and entries past ``capacity`` are dropped (the host
  sees a full row and says so);
* waits (``mbarrier.wait``, ``warpgroup_mma_wait``, ``tma.store_wait``, ``cp.async`` group waits,
  ``thread_barrier``) get a record before and after; issues (TMA loads and stores, ``warpgroup_mma``,
  ``cp.async``, arrivals, expects) one before.

The event table (:attr:`Instrumentation.table`: id → kind, phase, op, source location and line text)
goes into the compiled kernel's metadata so the host can decode the buffer.  A record is a few
special-register reads, a multiply-add and one predicated 8-byte store per warp, with no memory
clobber (LLVM may move ordinary loads and stores across it; the pipeline's own asm statements
keep their order): the cost is measured in ``docs/timelines.rst``.
"""

from __future__ import annotations

import linecache
from typing import Dict, List, Optional

import llvmlite.ir as lir

from ..ir import Operation
from .llvm_types import I32, I64

__all__ = ["EVENTS", "GLOBAL_NAME", "ENTRY_BYTES", "DEFAULT_CAPACITY", "SMID_SHIFT", "VALID", "Instrumentation",
           "instrumentation_for", "timeline_capacity"]

GLOBAL_NAME = "gluonkit_timeline"
ENTRY_BYTES = 16
DEFAULT_CAPACITY = 1024  # entries per warp
SMID_SHIFT = 20  # the tag word: event id in the low 20 bits, %smid in the next 11, bit 31 set
VALID = 1 << 31

# IR op -> (event kind, "wait": records before and after / "issue": one record before)
EVENTS: Dict[str, tuple] = {
    "mbarrier_wait": ("mbarrier.wait", "wait"),
    "warpgroup_mma_wait": ("wgmma.wait", "wait"),
    "async_tma_store_wait": ("tma.store_wait", "wait"),
    "async_wait_group": ("cp_async.wait", "wait"),
    "thread_barrier": ("thread_barrier", "wait"),
    "async_tma_copy_global_to_shared": ("tma.load", "issue"),
    "async_tma_copy_shared_to_global": ("tma.store", "issue"),
    "async_tma_gather": ("tma.load", "issue"),
    "async_tma_scatter": ("tma.store", "issue"),
    "warpgroup_mma": ("wgmma", "issue"),
    "async_copy_global_to_shared": ("cp_async", "issue"),
    "mbarrier_arrive": ("mbarrier.arrive", "issue"),
    "mbarrier_expect": ("mbarrier.expect", "issue"),
    "return": ("kernel.end", "issue"),
}

# The prologue computes, once per thread, the address of its warp's row:
# buffer + (linear CTA id * warps per CTA + physical warp id) * capacity * 16.
_ROW_ADDRESS = """{{
.reg .b32 %w<5>;
.reg .b64 %x<2>;
mov.u32 %w0, %ctaid.z;
mov.u32 %w1, %nctaid.y;
mov.u32 %w2, %ctaid.y;
mad.lo.u32 %w0, %w0, %w1, %w2;
mov.u32 %w1, %nctaid.x;
mov.u32 %w2, %ctaid.x;
mad.lo.u32 %w0, %w0, %w1, %w2;
mov.u32 %w1, %ntid.x;
shr.u32 %w1, %w1, 5;
mov.u32 %w2, %tid.x;
shr.u32 %w2, %w2, 5;
mad.lo.u32 %w0, %w0, %w1, %w2;
mul.wide.u32 %x0, %w0, {row_bytes};
add.u64 $0, %x0, $1;
}}"""

# One event: lane 0 stores {u32 %clock, u32 tag} at row + slot * 16 + 8; an anchor also stores the
# u64 %globaltimer at row + slot * 16.  Slots past the capacity are not stored.
_RECORD = """{{
.reg .pred %p<2>;
.reg .b32 %w<2>;
.reg .b64 %x<2>;
setp.eq.u32 %p0, $2, 0;
setp.lt.u32 %p1, $1, {capacity};
and.pred %p0, %p0, %p1;
mad.wide.u32 %x0, $1, {entry_bytes}, $0;
mov.u32 %w0, %clock;
mov.u32 %w1, %smid;
shl.b32 %w1, %w1, {smid_shift};
or.b32 %w1, %w1, {tag};
{anchor}@%p0 st.global.v2.u32 [%x0+8], {{%w0, %w1}};
}}"""
_ANCHOR = """mov.u64 %x1, %globaltimer;
@%p0 st.global.u64 [%x0], %x1;
"""


class Instrumentation:
    """The records of one kernel being lowered with ``instrument=True`` (see the module docstring)."""

    def __init__(self, module: lir.Module, prologue: lir.IRBuilder, lane: lir.Value, capacity: int = DEFAULT_CAPACITY):
        self.capacity = capacity
        self.table: List[dict] = []
        self._ids: Dict[tuple, int] = {}
        self._lane = lane
        buffer = lir.GlobalVariable(module, I64, GLOBAL_NAME, addrspace=1)
        buffer.initializer = I64(0)
        buffer.align = 8
        self._row = prologue.asm(lir.FunctionType(I64, [I64]),
                                 _ROW_ADDRESS.format(row_bytes=capacity * ENTRY_BYTES), "=l,l",
                                 [prologue.load(buffer)], side_effect=False, name="timeline.row")
        self._counter = prologue.alloca(I32, name="timeline.slot")
        prologue.store(I32(0), self._counter)
        self._started = False

    # ------------------------------------------------------------------ the walker's hooks
    def before(self, builder: lir.IRBuilder, op: Operation) -> None:
        """Records due before ``op``: the kernel's first event, a wait's begin, an issue."""
        if not self._started:
            self._started = True
            self.anchor(builder, "kernel.start", op)
        event = EVENTS.get(op.name)
        if event is not None:
            kind, how = event
            if op.name == "return":
                self.anchor(builder, kind, op)
            else:
                self._record(builder, kind, "begin" if how == "wait" else "instant", op)

    def after(self, builder: lir.IRBuilder, op: Operation) -> None:
        """Records due after ``op``: a wait's end."""
        event = EVENTS.get(op.name)
        if event is not None and event[1] == "wait":
            self._record(builder, event[0], "end", op)

    def anchor(self, builder: lir.IRBuilder, kind: str, op: Operation) -> None:
        """An instant that also stores ``%globaltimer`` (where a warp starts or ends: the host aligns
        warps and converts cycles to nanoseconds with these)."""
        self._record(builder, kind, "instant", op, anchor=True)

    # ------------------------------------------------------------------ emission
    def _event_id(self, kind: str, phase: str, op: Operation) -> int:
        key = (kind, phase, op.loc.file, op.loc.line, op.loc.col, op.name)
        if key not in self._ids:
            self._ids[key] = len(self.table)
            text = linecache.getline(op.loc.file, op.loc.line).strip() if op.loc.file else ""
            self.table.append({"kind": kind, "phase": phase, "op": op.name,
                               "location": f"{op.loc.file}:{op.loc.line}", "text": text})
        return self._ids[key]

    def _record(self, builder: lir.IRBuilder, kind: str, phase: str, op: Operation, anchor: bool = False) -> None:
        tag = self._event_id(kind, phase, op) | VALID
        slot = builder.load(self._counter)
        builder.store(builder.add(slot, I32(1)), self._counter)
        text = _RECORD.format(capacity=self.capacity, entry_bytes=ENTRY_BYTES, smid_shift=SMID_SHIFT, tag=tag,
                              anchor=_ANCHOR if anchor else "")
        builder.asm(lir.FunctionType(lir.VoidType(), [I64, I32, I32]), text, "l,r,r", [self._row, slot, self._lane],
                    side_effect=True)


def timeline_capacity(instrument) -> int:
    """Events per warp for an ``instrument`` option: ``False``/``0`` none, ``True`` the default, or a count."""
    if instrument is True:
        return DEFAULT_CAPACITY
    if not instrument:  # False, None, 0
        return 0
    if not isinstance(instrument, int) or not 1 <= instrument <= 1 << 20:
        raise ValueError(f"instrument must be True, False or a number of events per warp in [1, 2**20], "
                         f"got {instrument!r}")
    return instrument


def instrumentation_for(instrument, module: lir.Module, prologue: lir.IRBuilder,
                        lane: lir.Value) -> Optional[Instrumentation]:
    """An :class:`Instrumentation` when ``instrument`` asks for one (:func:`timeline_capacity`), else ``None``
    (the walker then pays one test per op)."""
    capacity = timeline_capacity(instrument)
    return Instrumentation(module, prologue, lane, capacity) if capacity else None
