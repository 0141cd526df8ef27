"""Measured timelines: the opt-in instrumentation that stamps a kernel's pipeline events.

When a kernel is compiled with ``instrument=True`` (:func:`gluonkit.lower.compiler.compile_function`,
used by :func:`gluonkit.runtime.timeline.measure`), the block walker calls :meth:`Instrumentation.before`
and :meth:`Instrumentation.after` around every op and the ops of :data:`EVENTS` get a *record*:

* every lane of the warp reaches the record; lane 0 of the warp stores one 16-byte entry
  ``{u64 %globaltimer, u32 low word of %clock64, u32 event id | %smid << 20}`` into the warp's
  row of a device buffer whose address the host writes into the module's global
  ``gluonkit_timeline`` before the launch (so the kernel's signature does not change);
* the row of a warp is ``(linear CTA id * warps per CTA + physical warp id) * capacity``
  entries from the start; a per-thread counter (a register after LLVM's mem2reg) gives the slot,
  and entries past ``capacity`` are dropped (the host sees a full row and says so);
* waits (``mbarrier.wait``, ``warpgroup_mma_wait``, ``tma.store_wait``, ``cp.async`` group waits,
  ``thread_barrier``) get a record before and after; issues (TMA loads and stores, ``warpgroup_mma``,
  ``cp.async``, arrivals, expects) one before; the kernel's first op and its ``return`` one each.

The event table (:attr:`Instrumentation.table`: id → kind, phase, op, source location and line text)
goes into the compiled kernel's metadata so the host can decode the buffer.  A record is a few
special-register reads, an address computation and one predicated 16-byte store per warp: the
cost is measured in ``docs/timelines.rst``.
"""

from __future__ import annotations

import linecache
from typing import Dict, List, Optional

import llvmlite.ir as lir

from ..ir import Operation
from .llvm_types import I32, I64

__all__ = ["EVENTS", "GLOBAL_NAME", "ENTRY_BYTES", "DEFAULT_CAPACITY", "SMID_SHIFT", "Instrumentation",
           "instrumentation_for", "timeline_capacity"]

GLOBAL_NAME = "gluonkit_timeline"
ENTRY_BYTES = 16
DEFAULT_CAPACITY = 1024  # entries per warp
SMID_SHIFT = 20  # the tag word: event id in the low 20 bits, %smid above

# IR op -> (event kind, "wait": records before and after / "issue": one record before)
EVENTS: Dict[str, tuple] = {
    "mbarrier_wait": ("mbarrier.wait", "wait"),
    "warpgroup_mma_wait": ("wgmma.wait", "wait"),
    "async_tma_store_wait": ("tma.store_wait", "wait"),
    "async_wait_group": ("cp_async.wait", "wait"),
    "thread_barrier": ("thread_barrier", "wait"),
    "async_tma_copy_global_to_shared": ("tma.load", "issue"),
    "async_tma_copy_shared_to_global": ("tma.store", "issue"),
    "warpgroup_mma": ("wgmma", "issue"),
    "async_copy_global_to_shared": ("cp_async", "issue"),
    "mbarrier_arrive": ("mbarrier.arrive", "issue"),
    "mbarrier_expect": ("mbarrier.expect", "issue"),
    "return": ("kernel.end", "issue"),
}

# One entry: lane 0 of the warp stores {globaltimer, clock, tag} at base + (row * capacity + slot) * 16.
_RECORD = """{{
.reg .pred %pw, %pk;
.reg .b32 %w<8>;
.reg .b64 %x<4>;
mov.u32 %w0, %laneid;
setp.eq.u32 %pw, %w0, 0;
setp.lt.u32 %pk, $1, {capacity};
and.pred %pw, %pw, %pk;
mov.u32 %w1, %ctaid.z;
mov.u32 %w2, %nctaid.y;
mov.u32 %w3, %ctaid.y;
mad.lo.u32 %w1, %w1, %w2, %w3;
mov.u32 %w2, %nctaid.x;
mov.u32 %w3, %ctaid.x;
mad.lo.u32 %w1, %w1, %w2, %w3;
mov.u32 %w2, %ntid.x;
shr.u32 %w2, %w2, 5;
mov.u32 %w3, %tid.x;
shr.u32 %w3, %w3, 5;
mad.lo.u32 %w1, %w1, %w2, %w3;
mul.wide.u32 %x0, %w1, {row_bytes};
mul.wide.u32 %x1, $1, {entry_bytes};
add.u64 %x0, %x0, %x1;
add.u64 %x0, %x0, $0;
mov.u64 %x2, %globaltimer;
mov.u32 %w4, %clock;
mov.u32 %w5, %smid;
shl.b32 %w5, %w5, {smid_shift};
or.b32 %w5, %w5, {event};
@%pw st.global.u64 [%x0], %x2;
@%pw st.global.v2.u32 [%x0+8], {{%w4, %w5}};
}}"""


class Instrumentation:
    """The records of one kernel being lowered with ``instrument=True`` (see the module docstring)."""

    def __init__(self, module: lir.Module, prologue: lir.IRBuilder, capacity: int = DEFAULT_CAPACITY):
        self.capacity = capacity
        self.table: List[dict] = []
        self._ids: Dict[tuple, int] = {}
        self.buffer = lir.GlobalVariable(module, I64, GLOBAL_NAME, addrspace=1)
        self.buffer.initializer = I64(0)
        self.buffer.align = 8
        self._counter = prologue.alloca(I32, name="timeline.slot")
        prologue.store(I32(0), self._counter)
        self._started = False

    # ------------------------------------------------------------------ the walker's hooks
    def before(self, builder: lir.IRBuilder, op: Operation) -> None:
        """Records due before ``op``: the kernel's first event, a wait's begin, an issue."""
        if not self._started:
            self._started = True
            self._record(builder, "kernel.start", "instant", op)
        event = EVENTS.get(op.name)
        if event is not None:
            kind, how = event
            self._record(builder, kind, "begin" if how == "wait" else "instant", op)

    def after(self, builder: lir.IRBuilder, op: Operation) -> None:
        """Records due after ``op``: a wait's end."""
        event = EVENTS.get(op.name)
        if event is not None and event[1] == "wait":
            self._record(builder, event[0], "end", op)

    # ------------------------------------------------------------------ emission
    def _event_id(self, kind: str, phase: str, op: Operation) -> int:
        key = (kind, phase, op.loc.file, op.loc.line, op.loc.col, op.name)
        if key not in self._ids:
            self._ids[key] = len(self.table)
            text = linecache.getline(op.loc.file, op.loc.line).strip() if op.loc.file else ""
            self.table.append({"kind": kind, "phase": phase, "op": op.name,
                               "location": f"{op.loc.file}:{op.loc.line}", "text": text})
        return self._ids[key]

    def _record(self, builder: lir.IRBuilder, kind: str, phase: str, op: Operation) -> None:
        event = self._event_id(kind, phase, op)
        slot = builder.load(self._counter)
        builder.store(builder.add(slot, I32(1)), self._counter)
        base = builder.load(self.buffer)
        text = _RECORD.format(capacity=self.capacity, row_bytes=self.capacity * ENTRY_BYTES, entry_bytes=ENTRY_BYTES,
                              smid_shift=SMID_SHIFT, event=event)
        fn_type = lir.FunctionType(lir.VoidType(), [I64, I32])
        builder.asm(fn_type, text, "l,r,~{memory}", [base, slot], side_effect=True)


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


def instrumentation_for(instrument, module: lir.Module, prologue: lir.IRBuilder) -> Optional[Instrumentation]:
    """An :class:`Instrumentation` when ``instrument`` asks for one (:func:`timeline_capacity`), else ``None``
    (the walker then pays one test per op)."""
    capacity = timeline_capacity(instrument)
    return Instrumentation(module, prologue, capacity) if capacity else None
