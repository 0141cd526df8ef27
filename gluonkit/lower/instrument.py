"""Measured timelines: the opt-in instrumentation that stamps a kernel's pipeline events.

When a kernel is compiled with ``instrument=...`` (:func:`gluonkit.lower.compiler.compile_function`,
used by :func:`gluonkit.runtime.timeline.measure`), the block walker calls :meth:`Instrumentation.before`
and :meth:`Instrumentation.after` around every op and the ops of :data:`EVENTS` that the build's
level asks for get a *record*.  A record is kept as cheap as the pipeline allows (measured with
ptxas here and on the H100, ``docs/timelines.rst``), because every cycle it costs a consumer warp
in the inner loop shows in the timeline it is meant to explain:

* every lane of the warp reaches the record; only lane 0 of the warp stores, one 8-byte
  ``st.global.cs`` (streaming: the records do not push the kernel's operands out of L2) of
  ``{u32 %clock, u32 event id | 1 << 31}`` into the second half of a 16-byte entry; the cheap
  32-bit ``%clock`` is enough, the host unwraps it between anchors;
* *anchors* — the kernel's start and end, each partition's start and end — store the whole
  16-byte entry: ``%globaltimer`` (slow to read: the host aligns warps of all SMs and converts
  cycles to nanoseconds with it) and ``%smid`` in the tag, in one vector store;
* a thread's whole state is **one register**, the index of its warp's next entry: the entries
  of the ``rows`` warps of the launch are interleaved (entry ``slot`` of warp ``row`` is entry
  ``slot * rows + row`` of the buffer), so a record stores at ``buffer + index * 16`` and
  advances the index by ``rows``, saturating at ``limit = rows * capacity`` (a full row drops
  later events; the host sees it full and says so).  ``buffer``, ``rows`` and ``limit`` are in
  the module's constant ``gluonkit_timeline``, which the host writes before the launch (so the
  kernel's signature does not change) and which ptxas keeps in uniform registers or folds into
  the instructions; "lane 0" is a predicate register.  A record is then about seven
  instructions (compare, address, clock, tag, store, advance) and no long-latency read;
* a wait (``mbarrier.wait``, ``warpgroup_mma_wait``, ``tma.store_wait``, ``cp.async`` group waits,
  ``thread_barrier``) is **one** record after it: the begin's ``%clock``, read before the wait and
  kept in a register, goes with the end into one 16-byte store ``{begin clock, begin tag, end
  clock, end tag}`` (the begin tag's valid bit is bit 63 of the entry's first eight bytes, which
  an anchor's ``%globaltimer`` never has: the host splits the entry in two events).  Nothing is
  stored before the wait, and a wait costs one store and one index advance, not two;
* issues (TMA loads and stores, ``warpgroup_mma``, ``cp.async``, arrivals, expects) get one
  record before.

**Levels** (:data:`LEVELS`): ``"anchors"`` records only the anchors (where and when each warp
and partition ran: load balance, tails; and the baseline the cost of the others is measured
against); ``"waits"`` (the default) also the waits that make a pipeline's bubbles — barrier
waits (``mbarrier.wait``, ``cp.async`` group waits) and ``tma.store_wait``; ``"all"`` adds the
MMA waits, ``thread_barrier`` (in a WS GEMM's K loop one per step, the warpgroup's own
handshake, not a bubble of the pipeline) and every issue, which in a GEMM's inner loop
triples the records.

The event table (:attr:`Instrumentation.table`: id → kind, phase, op, source location, line and
its text) goes into the compiled kernel's metadata so the host can decode the buffer.  The
records have no memory clobber (LLVM may move ordinary loads and stores across them; the
pipeline's own asm statements keep their order).
"""

from __future__ import annotations

import linecache
from typing import Dict, List, NamedTuple, Optional

import llvmlite.ir as lir

from ..ir import Operation
from .llvm_types import I1, I32

_CONSTANT_SPACE = 4  # NVPTX's constant address space

__all__ = ["EVENTS", "LEVELS", "GLOBAL_NAME", "ENTRY_BYTES", "DEFAULT_CAPACITY", "SMID_SHIFT", "VALID",
           "TimelineOptions", "Instrumentation", "instrumentation_for", "timeline_options"]

GLOBAL_NAME = "gluonkit_timeline"
ENTRY_BYTES = 16
DEFAULT_CAPACITY = 1024  # entries per warp
SMID_SHIFT = 20  # the tag word: event id in the low 20 bits, %smid (anchors only) in the next 11, bit 31 set
VALID = 1 << 31
LEVELS = {"anchors": 0, "waits": 1, "all": 2}

# IR op -> (event kind, "wait": records before and after / "issue": one record before, level)
EVENTS: Dict[str, tuple] = {
    "mbarrier_wait": ("mbarrier.wait", "wait", 1),
    "async_tma_store_wait": ("tma.store_wait", "wait", 1),
    "async_wait_group": ("cp_async.wait", "wait", 1),
    "thread_barrier": ("thread_barrier", "wait", 2),
    "return": ("kernel.end", "issue", 0),
    "warpgroup_mma_wait": ("wgmma.wait", "wait", 2),
    "async_tma_copy_global_to_shared": ("tma.load", "issue", 2),
    "async_tma_copy_shared_to_global": ("tma.store", "issue", 2),
    "async_tma_gather": ("tma.load", "issue", 2),
    "async_tma_scatter": ("tma.store", "issue", 2),
    "warpgroup_mma": ("wgmma", "issue", 2),
    "async_copy_global_to_shared": ("cp_async", "issue", 2),
    "mbarrier_arrive": ("mbarrier.arrive", "issue", 2),
    "mbarrier_expect": ("mbarrier.expect", "issue", 2),
}


class TimelineOptions(NamedTuple):
    """What an instrumented build records: ``capacity`` entries per warp, ``events`` a level of :data:`LEVELS`."""

    capacity: int = DEFAULT_CAPACITY
    events: str = "waits"


# The host writes {u64 buffer, u32 rows, u32 limit} into this constant: rows = warps in the launch,
# limit = rows * capacity.  Entry ``slot`` of warp ``row`` is entry ``slot * rows + row`` of the buffer
# (interleaved: a warp's next entry is ``rows`` further on), so a thread's whole state is one register,
# its next entry's index, which stops at ``limit``; the records read the rest from constant memory,
# which ptxas folds into their instructions' operands.
# The prologue: the warp's row, linear CTA id * warps per CTA + physical warp id.
_ROW = """{
.reg .b32 %w<3>;
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
mad.lo.u32 $0, %w0, %w1, %w2;
}"""

def _entry_store(registers: int, store: str) -> str:
    """A record's PTX template: lane 0 (``$2``) runs ``store`` at the entry ``$1`` (address in ``%x1``,
    ``%clock`` in ``%w0``, the tag in ``%w1``) unless the row is full; ``$0`` is the next index."""
    return f"""{{{{
.reg .pred %p;
.reg .b32 %w<{registers}>;
.reg .b64 %x<2>;
ld.const.v2.u32 {{{{%w2, %w3}}}}, [{{constant}}+8];
setp.lt.and.u32 %p, $1, %w3, $2;
ld.const.u64 %x0, [{{constant}}];
mad.wide.u32 %x1, $1, {{entry_bytes}}, %x0;
mov.u32 %w0, %clock;
mov.u32 %w1, {{tag}};
{store}
add.u32 %w0, $1, %w2;
min.u32 $0, %w0, %w3;
}}}}"""


# One event: lane 0 stores {u32 %clock, u32 tag} at entry + 8.
_RECORD = _entry_store(4, "@%p st.global.cs.v2.u32 [%x1+8], {{%w0, %w1}};")

# A wait's begin and end in one entry ($3 the begin's %clock read before the wait): lane 0 stores
# {u32 begin clock, u32 begin tag, u32 %clock, u32 end tag}.  The begin tag's VALID bit lands on bit 63 of the
# entry's first eight bytes, which an anchor's %globaltimer never sets: that is how the host tells a pair from
# an anchor.
_PAIR = _entry_store(6, "mov.u32 %w4, {begin_tag};\n@%p st.global.cs.v4.u32 [%x1], {{$3, %w4, %w0, %w1}};")

# An anchor: the whole entry {u64 %globaltimer, u32 %clock, u32 tag | %smid << SMID_SHIFT} in one store.
_ANCHOR = """{{
.reg .pred %p;
.reg .b32 %w<4>;
.reg .b64 %x<4>;
ld.const.v2.u32 {{%w2, %w3}}, [{constant}+8];
setp.lt.and.u32 %p, $1, %w3, $2;
ld.const.u64 %x0, [{constant}];
mad.wide.u32 %x1, $1, {entry_bytes}, %x0;
mov.u32 %w0, %clock;
mov.u32 %w1, %smid;
shl.b32 %w1, %w1, {smid_shift};
or.b32 %w1, %w1, {tag};
mov.u64 %x2, %globaltimer;
mov.b64 %x3, {{%w0, %w1}};
@%p st.global.cs.v2.u64 [%x1], {{%x2, %x3}};
add.u32 %w0, $1, %w2;
min.u32 $0, %w0, %w3;
}}"""


class Instrumentation:
    """The records of one kernel being lowered with ``instrument=...`` (see the module docstring)."""

    def __init__(self, module: lir.Module, prologue: lir.IRBuilder, lane: lir.Value, options: TimelineOptions):
        self.capacity = options.capacity
        self.events = options.events
        self._level = LEVELS[options.events]
        self.table: List[dict] = []
        self._ids: Dict[tuple, int] = {}
        constant = lir.GlobalVariable(module, lir.ArrayType(I32, 4), GLOBAL_NAME, addrspace=_CONSTANT_SPACE)
        constant.initializer = lir.ArrayType(I32, 4)([I32(0)] * 4)
        constant.align = 8
        self._lane0 = prologue.icmp_unsigned("==", lane, I32(0), name="timeline.lane0")
        self._index = prologue.alloca(I32, name="timeline.index")
        prologue.store(prologue.asm(lir.FunctionType(I32, []), _ROW, "=r", [], side_effect=False,
                                    name="timeline.row"), self._index)
        self._started = False
        self._begins: Dict[int, lir.Value] = {}  # id(wait op) -> its begin's %clock, kept until its end

    # ------------------------------------------------------------------ the walker's hooks
    def before(self, builder: lir.IRBuilder, op: Operation) -> None:
        """Records due before ``op``: the kernel's first event, an issue; a wait's begin clock is only read here
        (kept in a register, stored with the wait's end)."""
        if not self._started:
            self._started = True
            self.anchor(builder, "kernel.start", op)
        event = self._wanted(op)
        if event is not None:
            kind, how, _ = event
            if op.name == "return":
                self.anchor(builder, kind, op)
            elif how == "wait":
                self._begins[id(op)] = builder.asm(lir.FunctionType(I32, []), "mov.u32 $0, %clock;", "=r", [],
                                                   side_effect=True, name="timeline.begin")
            else:
                self._record(builder, kind, "instant", op)

    def after(self, builder: lir.IRBuilder, op: Operation) -> None:
        """Records due after ``op``: a wait's begin and end, one entry."""
        event = self._wanted(op)
        if event is not None and event[1] == "wait":
            begin_tag = self._event_id(event[0], "begin", op) | VALID
            tag = self._event_id(event[0], "end", op) | VALID
            text = _PAIR.format(entry_bytes=ENTRY_BYTES, tag=tag, begin_tag=begin_tag, constant=GLOBAL_NAME)
            self._emit(builder, text, [self._begins.pop(id(op))])

    def anchor(self, builder: lir.IRBuilder, kind: str, op: Operation) -> None:
        """An instant that also stores ``%globaltimer`` and ``%smid`` (where a warp starts or ends: the host
        aligns warps and converts cycles to nanoseconds with these)."""
        self._record(builder, kind, "instant", op, anchor=True)

    # ------------------------------------------------------------------ emission
    def _wanted(self, op: Operation) -> Optional[tuple]:
        event = EVENTS.get(op.name)
        return event if event is not None and event[2] <= self._level else None

    def _event_id(self, kind: str, phase: str, op: Operation) -> int:
        key = (kind, phase, op.loc.file, op.loc.line, op.loc.col, op.name)
        if key not in self._ids:
            self._ids[key] = len(self.table)
            source = linecache.getline(op.loc.file, op.loc.line).strip() if op.loc.file else ""
            self.table.append({"kind": kind, "phase": phase, "op": op.name, "location": f"{op.loc.file}:{op.loc.line}",
                               "line": op.loc.line, "source": source})
        return self._ids[key]

    def _record(self, builder: lir.IRBuilder, kind: str, phase: str, op: Operation, anchor: bool = False) -> None:
        tag = self._event_id(kind, phase, op) | VALID
        text = (_ANCHOR if anchor else _RECORD).format(entry_bytes=ENTRY_BYTES, smid_shift=SMID_SHIFT, tag=tag,
                                                       constant=GLOBAL_NAME)
        self._emit(builder, text)

    def _emit(self, builder: lir.IRBuilder, text: str, extra: List[lir.Value] = ()) -> None:
        """One record's asm: it takes the entry index, "lane 0" and ``extra`` operands, returns the next index."""
        extra = list(extra)
        index = builder.asm(lir.FunctionType(I32, [I32, I1] + [I32] * len(extra)), text, "=r,r,b" + ",r" * len(extra),
                            [builder.load(self._index), self._lane0] + extra, side_effect=True)
        builder.store(index, self._index)


def timeline_options(instrument) -> Optional[TimelineOptions]:
    """The :class:`TimelineOptions` an ``instrument`` option asks for, or ``None`` for a plain build.

    ``instrument``: ``False``/``None``/``0`` none; ``True`` the defaults; a number of events per warp;
    a level of :data:`LEVELS` (default capacity); or a :class:`TimelineOptions` / ``(capacity, events)``.
    """
    if instrument is True:
        return TimelineOptions()
    if instrument is None or instrument is False or instrument == 0:
        return None
    if isinstance(instrument, str):
        instrument = (DEFAULT_CAPACITY, instrument)
    elif isinstance(instrument, int):
        instrument = (instrument, "waits")
    if not (isinstance(instrument, tuple) and len(instrument) == 2):
        raise ValueError(f"instrument must be True, False, a number of events per warp, 'waits', 'all' or "
                         f"(capacity, events), got {instrument!r}")
    capacity, events = instrument
    if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= 1 << 20:
        raise ValueError(f"instrument: the number of events per warp must be in [1, 2**20], got {capacity!r}")
    if events not in LEVELS:
        raise ValueError(f"instrument: events must be one of {list(LEVELS)} ('anchors': each warp's and partition's "
                         f"start and end; 'waits': also the barrier waits; 'all': also MMA waits and every issue), "
                         f"got {events!r}")
    return TimelineOptions(capacity, events)


def instrumentation_for(instrument, module: lir.Module, prologue: lir.IRBuilder,
                        lane: lir.Value) -> Optional[Instrumentation]:
    """An :class:`Instrumentation` when ``instrument`` asks for one (:func:`timeline_options`), else ``None``
    (the walker then pays one test per op)."""
    options = timeline_options(instrument)
    return Instrumentation(module, prologue, lane, options) if options else None
