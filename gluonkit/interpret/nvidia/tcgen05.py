"""Rules for Blackwell's tensor-core MMA: ``tcgen05_mma`` and ``tcgen05_commit``.

``acc = a @ b (+ acc where use_acc)``, with the products of the inputs formed exactly
(float16, bfloat16 and fp8 values are exact in float64; float32 is read as tf32, its low 13
mantissa bits ignored, as :mod:`.wgmma` does), summed in float64 and rounded once into the
accumulator's element type in tensor memory.

The hardware runs an MMA in the background; it is complete only when a ``tcgen05.commit``
issued after it arrives on its mbarrier and a wait observes that phase.  Here each program
keeps its MMAs in issue order (:class:`_Unit`).  A commit (``tcgen05_commit``, or an MMA's
``mbarriers=``) becomes a completion on its barrier, a member of the barrier's ``copies`` as
TMA loads are (:mod:`.mbarrier`): the wait that needs its phase *lands* it — every MMA
issued before the commit is computed, in order, and the commit arrives — and then
*releases* it.  The shared operands are read at issue (by the issuing partition, for the
race checks between partitions); they cannot change before completion without a report.
Until the wait, the checker reports, with both lines:

* writing shared bytes an MMA in flight reads (a stage refilled too early): the MMA's operands
  are registered as :class:`~..shared_memory.AsyncRead` from issue until released;
* reading or writing the accumulator in tensor memory while an MMA on it is in flight (no wait
  on its commit's barrier yet): ``tmem_load``/``tmem_store`` are checked against the
  accumulators of unreleased MMAs of every partition (they share the CTA's tensor memory;
  commits, like the hardware's, cover the MMAs of the partition that issues them);
* an MMA reading shared bytes written by generic stores with no ``fence_async_shared`` since;
* an MMA that no commit ever covers, at the end of the kernel, and a wait on a commit's barrier
  that nothing will arrive on (the usual deadlock report of :mod:`.mbarrier`).

A synchronous MMA (no ``mbarriers``) completes every earlier MMA and itself on the spot.
"""

from __future__ import annotations

from typing import List, Optional, Tuple
from weakref import WeakKeyDictionary

import numpy as np

from ...ir.tmem import cta_group
from ...ir.types import TensorMemoryDescType
from ...layouts.distributed import cta_class, cta_offset
from ..engine import RULES, rule
from ..errors import InterpreterError
from ..happens_before import release
from ..shared_memory import AsyncRead, byte_mask, owned, read, unfenced_write
from ..trace import view_name
from .tmem import TensorMemory, TmemRef, read_tile, share_shape, write_tile  # (rules exist before _checked)
from .mbarrier import arrive, barrier_state
from .wgmma import _TF32_MASK

__all__ = ["issue", "mma_in_flight", "pair_shares", "commit_ranks"]

#: Per tensor memory (one CTA's, shared by its partitions): the MMAs whose completion no wait has observed yet.
_IN_FLIGHT: "WeakKeyDictionary[TensorMemory, List[_Mma]]" = WeakKeyDictionary()


def _footprint(ref: TmemRef, ty: TensorMemoryDescType, op) -> np.ndarray:
    """Which bytes of tensor memory the MMA result of view ``ty`` at ``ref`` occupies (a bool mask).

    Exactly the cells :func:`.tmem.write_tile` writes: found by writing into an empty copy.
    """
    memory = ref.memory
    scratch = TensorMemory(np.zeros_like(memory.data), np.zeros_like(memory.written), memory.plan)
    write_tile(TmemRef(scratch, ref.lane, ref.column), ty, np.zeros(share_shape(ty)), op)
    return scratch.written


class _Mma:
    """One issued MMA: its operands, and the shared bytes it reads until released.

    A ``cta_group::2`` MMA (issued by the even CTA of a pair) reads A's and B's shares from
    both CTAs' shared memory and writes each CTA's rows of the accumulator into that CTA's
    tensor memory: ``shares`` lists, per CTA of the pair, its (a, b, acc) runtime values (one
    entry, the operands, without a pair).  ``tmem_reads``: tensor memory the MMA reads besides
    an A there (a block-scaled MMA's scales, in the issuing CTA)."""

    def __init__(self, program, op, operands, shares=None, tmem_reads: Optional[np.ndarray] = None):
        self.op = op
        self.use_acc = operands[3]
        self.types = [v.type for v in op.operands[:3]]
        self.shares = shares if shares is not None else [tuple(operands[:3])]
        self.ranks = [program.cta_rank | i for i in range(len(self.shares))]  # the CTA of each share
        self.cluster = program.cluster
        self.known = set()  # the CTAs (ranks) that have observed its completion
        self.a, self.b, self.acc = self.shares[0]  # the issuing CTA's
        self.what = f"the {op.name} at line {op.loc.line}"
        self.done = False
        self.acc_masks = [(acc.memory, _footprint(acc, self.types[2], op)) for _, _, acc in self.shares]
        # Tensor memory the MMA only reads: A when it lives there, and tmem_reads; storing into it
        # before the MMA is known complete is reported.
        self.a_in_tmem = isinstance(self.types[0], TensorMemoryDescType)
        self.a_masks = ([(a.memory, _footprint(a, self.types[0], op)) for a, _, _ in self.shares]
                        if self.a_in_tmem else [])
        self.tmem_reads = tmem_reads
        fix = "wait on the mbarrier its commit arrives on (mbarrier.wait) first"
        # The operands are read at issue, by the issuing partition (so races between partitions are judged
        # there); writing them before the MMA is known complete is reported, so the values cannot change.
        self.values = self.multiplicands()
        self.reads = []  # per share: (buffer, reader) pairs, until that CTA observes the completion
        for a, b, _ in self.shares:
            self.reads.append([])
            for ref, ty in ((a, self.types[0]), (b, self.types[1]))[self.a_in_tmem:]:
                reader = AsyncRead(byte_mask(ref, ty, op), self.what, fix, self.known.__contains__)
                ref.buffer.async_reads.append(reader)
                self.reads[-1].append((ref.buffer, reader))
        for memory, _ in self.acc_masks:
            _IN_FLIGHT.setdefault(memory, []).append(self)
        self.held = set(range(len(self.shares)))  # shares whose CTA has not observed the completion yet
        self.span = None  # its span on a trace (issue to completion), while recording one
        if program.trace is not None:
            reads = ", ".join("tensor memory" if isinstance(ty, TensorMemoryDescType) else view_name(ref, ty)
                              for ref, ty in ((self.a, self.types[0]), (self.b, self.types[1])))
            self.span = program.trace.start("tcgen05_mma", "tcgen05_mma", op, shape=list(self.types[2].shape),
                                            reads=reads, sync=not op.attrs.get("is_async", True))

    def multiplicands(self) -> List[np.ndarray]:
        """The ``[M, K]`` and ``[K, N]`` float64 values the tensor cores multiply, read now (A from tensor memory
        or, like B, gathered from the shares in shared memory)."""
        if self.a_in_tmem:
            a = self._tmem_a()
        else:
            a = _gather([(share[0], self.types[0]) for share in self.shares], self.op)
        b = _gather([(share[1], self.types[1]) for share in self.shares], self.op)
        return [_multiplicand(a, self.types[0]), _multiplicand(b, self.types[1])]

    def _tmem_a(self) -> np.ndarray:
        """A from tensor memory: each CTA's rows from its own (placed in the cluster's A by its rank)."""
        ty = self.types[0]
        if len(self.shares) == 1:
            return read_tile(self.a, ty, self.op)
        rows, cols = share_shape(ty)
        values = np.zeros(ty.shape, np.float64)
        for rank, (a, _, _) in zip(self.ranks, self.shares):
            r, c = cta_offset(ty.layout.cga_layout, (rows, cols), rank)
            values[r:r + rows, c:c + cols] = read_tile(a, ty, self.op)
        return values

    def compute(self) -> None:
        """Run the MMA now: update acc (each CTA's rows in its own tensor memory)."""
        acc_ty = self.types[2]
        product = self.values[0] @ self.values[1]
        rows, cols = share_shape(acc_ty)
        for rank, (_, _, acc) in zip(self.ranks, self.shares):  # each CTA's share of the cluster's accumulator
            r, c = cta_offset(acc_ty.layout.cga_layout, (rows, cols), rank) if len(self.shares) > 1 else (0, 0)
            part = product[r:r + rows, c:c + cols]
            if bool(self.use_acc):
                part = part + read_tile(acc, acc_ty, self.op).astype(np.float64)
            write_tile(acc, acc_ty, part, self.op)
        self.done = True
        if self.span is not None:
            self.span.finish()

    def observed(self, rank: int) -> None:
        """A wait in CTA ``rank`` observed the completion: that CTA may now rewrite the operands it
        holds and use its accumulator rows, and another CTA's multicast into them is safe from CTAs
        that observed it too (the readers' ``done_for``; until the multicasting CTA has, the
        cluster keeps them: :meth:`~.cluster.Cluster.keep_unobserved`)."""
        self.known.add(rank)
        self.release([i for i in self.held if self.ranks[i] == rank])

    def release(self, shares=None) -> None:
        """The operands of ``shares`` (indexes; all still held when ``None``) may be rewritten by
        their CTA and its accumulator rows used."""
        for i in sorted(self.held if shares is None else self.held & set(shares)):
            for buffer, reader in self.reads[i]:
                buffer.async_reads.remove(reader)
                if self.cluster is not None:
                    self.cluster.keep_unobserved(buffer, reader)
            _IN_FLIGHT[self.acc_masks[i][0]].remove(self)
            self.held.discard(i)


def _gather(views, op) -> np.ndarray:
    """An operand's whole value from each CTA's share of it (one view without a pair)."""
    (ref, ty), *others = views
    values = read(ref, ty, op)
    for peer, peer_ty in others:
        mine = owned(peer, peer_ty, op)
        values[mine] = read(peer, peer_ty, op)[mine]
    return values


def _multiplicand(values: np.ndarray, ty) -> np.ndarray:
    """Operand values as the float64 numbers the tensor cores multiply (float32 truncated to tf32)."""
    if ty.element.name == "float32":
        values = (np.ascontiguousarray(values, np.float32).view(np.uint32) & _TF32_MASK).view(np.float32)
    return values.astype(np.float64)


class _Units:
    """A program's MMAs not yet known complete, in issue order."""

    def __init__(self):
        self.issued: List[_Mma] = []
        self.committed = 0  # how many of ``issued`` some commit covers

    def land(self, upto: int) -> None:
        for mma in self.issued[:upto]:
            if not mma.done:
                mma.compute()

    def release(self, upto: int) -> None:
        for mma in self.issued[:upto]:
            mma.release()
        del self.issued[:upto]
        self.committed -= upto


def _units(program) -> _Units:
    units = program.async_state.get("tcgen05")
    if units is None:
        units = program.async_state["tcgen05"] = _Units()
        program.at_exit["tcgen05"] = _at_exit
    return units


class _Commit:
    """A ``tcgen05.commit`` as a completion on its barrier (the protocol of :mod:`.mbarrier`'s copies).

    A CTA pair's (or a multicast) commit arrives on the barrier of several CTAs: one :class:`_Commit`
    per barrier, sharing ``group``; each wait that observes it tells the MMAs it covers that its CTA
    knows them complete (``covered``: every MMA issued before it, even those another commit's group
    has dropped from the pipe since), and they leave the pipe when every barrier's wait has."""

    def __init__(self, program, op, state, mma: _Mma, group: list, rank: int):
        self.program, self.op, self.loc, self.state, self.last = program, op, op.loc, state, mma
        self.what = f"the tcgen05 commit at line {op.loc.line}"
        self.landed = False
        self.group, self.rank = group, rank  # the CTA whose barrier this is
        self.covered = list(_units(program).issued)
        group.append(self)
        # The phase its arrival counts towards: after the arrivals made and those of earlier commits still to land.
        earlier = sum(1 for c in state.copies if isinstance(c, _Commit) and not c.landed)
        self.issued_in = (state.arrivals + earlier) // state.count

    def _upto(self) -> int:
        units = _units(self.program)
        return units.issued.index(self.last) + 1 if self.last in units.issued else 0

    def land(self) -> None:
        _units(self.program).land(self._upto())
        self.landed = True
        arrive(self.program, self.state, 1, self.op)

    def release(self) -> None:
        units, upto = _units(self.program), self._upto()
        for mma in self.covered:
            mma.observed(self.rank)
        self.group.remove(self)
        if not self.group:
            units.release(upto)


def _commit(program, op, bar_ref, operand: int) -> None:
    """A commit onto barrier ``bar_ref``, arriving on the barrier at that address in each CTA of
    its ``ctaMask`` (:func:`commit_ranks`); in a CTA pair's kernel it is the even CTA's (the odd
    CTA's commit does nothing)."""
    units = _units(program)
    if _pair(program) and program.cta_rank & 1:
        return
    ranks = commit_ranks(program, op)
    refs = [bar_ref if r == program.cta_rank else program.cluster.peer(bar_ref, r, op) for r in ranks]
    states = [barrier_state(ref, op, operand) for ref in refs]
    if not units.issued:  # nothing in flight: the arrival is immediate
        for state in states:
            _trace_commit(program, op, state, state.arrivals // state.count)
            arrive(program, state, 1, op)
        return
    units.committed = len(units.issued)
    group: list = []
    for rank, state in zip(ranks, states):
        commit = _Commit(program, op, state, units.issued[-1], group, rank)
        _trace_commit(program, op, state, commit.issued_in)
        state.copies.append(commit)
        release(state, commit.issued_in)  # what this partition did so far happens before the arrival


def commit_ranks(program, op) -> List[int]:
    """The CTAs a commit at ``op`` arrives in: this one; in a pair's kernel the pair; with
    ``multicast_bits`` every CTA that differs from this one only in one operand's replicated
    bits (and the pair bit) — the lowering's ``ctaMask``."""
    if program.cluster is None:
        return [program.cta_rank]
    pair = 1 if _pair(program) else 0
    classes = {bits | pair for bits in op.attrs.get("multicast_bits", ())} or {pair}
    num_ctas = program.cluster.num_ctas
    return sorted({r for bits in classes for r in cta_class(bits, program.cta_rank, num_ctas)})


def _pair(program) -> bool:
    """Whether the kernel's tcgen05 ops are a CTA pair's (``cta_group::2``, :func:`~gluonkit.ir.tmem.cta_group`)."""
    group = program.async_state.get("cta_group")
    if group is None:
        group = program.async_state["cta_group"] = cta_group(program.func)
    return group == 2 and program.cluster is not None


def peer_tensor_memory(program, op, writes: str, first: str):
    """The tensor memory of the odd CTA of the pair whose even CTA issues ``op``, which ``writes``;
    an error naming the fix when that CTA has not allocated it yet (``first``: the op to put the
    cluster barrier before)."""
    peer_rank = program.cta_rank | 1
    memory = program.cluster.tmem.get(peer_rank)
    if memory is None:
        raise InterpreterError(f"{op.name}: {writes} of CTA {peer_rank}, which has not allocated its tensor memory "
                               f"yet; allocate it in both CTAs and put a cluster.barrier() before {first}", op.loc)
    return memory


def pair_shares(program, op, operands) -> list:
    """Per CTA of the pair, the (a, b, acc) of a ``cta_group::2`` MMA issued by the even CTA."""
    cluster, peer_rank = program.cluster, program.cta_rank | 1
    memory = peer_tensor_memory(program, op, "the two_ctas MMA writes the accumulator's rows", "the first MMA")
    a, acc = operands[0], operands[2]
    peer_a = TmemRef(memory, a.lane, a.column) if isinstance(a, TmemRef) else cluster.peer(a, peer_rank, op)
    return [tuple(operands[:3]),
            (peer_a, cluster.peer(operands[1], peer_rank, op), TmemRef(memory, acc.lane, acc.column))]


def _trace_commit(program, op, state, phase: int) -> None:
    """On a trace: the commit, issued here, arrives on ``state``'s ``phase`` when the MMAs so far are done
    (its arrival itself is recorded where the interpreter lands it)."""
    if program.trace is not None:
        program.trace.instant(f"commit → {state.name}", "tcgen05.commit", op, barrier=state.name, phase=phase)


@rule("tcgen05_mma")
def _tcgen05_mma(program, op, operands):
    if not bool(operands[4]):
        return []
    for ref, value in ((operands[0], op.operands[0]), (operands[1], op.operands[1])):
        if isinstance(value.type, TensorMemoryDescType):  # A in tensor memory: no proxy fence involved
            continue
        unfenced = unfenced_write(program, ref, value.type, op)
        if unfenced is not None:
            raise InterpreterError(f"tcgen05_mma reads {ref.buffer.describe()}, which the store at line "
                                   f"{unfenced.line} wrote through the generic proxy with no fence_async_shared() "
                                   "since; call fence_async_shared() between the store and the MMA", op.loc)
    shares = None
    if op.operands[2].type.layout.two_ctas:
        if program.cta_rank & 1:  # the even CTA issues the pair's MMA
            return []
        shares = pair_shares(program, op, operands)
    issue(program, op, _Mma(program, op, operands, shares), 5, operands)
    return []


def issue(program, op, unit, first_barrier: int, operands) -> None:
    """Queue ``unit`` (an issued MMA or copy) on ``program``'s tcgen05 pipe, then commit it to the op's barriers.

    The op's ``num_barriers`` barriers start at operand ``first_barrier``, their predicates follow;
    without ``is_async`` everything issued so far completes now (a synchronous MMA).
    """
    units = _units(program)
    units.issued.append(unit)
    n = op.attrs.get("num_barriers", 0)
    if not op.attrs.get("is_async", True):
        units.land(len(units.issued))
        units.release(len(units.issued))
        return
    for i in range(n):
        if bool(operands[first_barrier + n + i]):
            _commit(program, op, operands[first_barrier + i], first_barrier + i)


@rule("tcgen05_commit")
def _tcgen05_commit(program, op, operands):
    if bool(operands[1]):
        _commit(program, op, operands[0], 0)
    return []


def mma_in_flight(ref, mask: np.ndarray, writing: bool, issuer: Optional[int] = None) -> Tuple[Optional[_Mma], str]:
    """An MMA of any partition, its completion not yet observed, that writes (or, for a write, reads) the bytes
    ``mask`` of ``ref``'s tensor memory, and what it does there.  ``issuer``: the CTA of an asynchronous op (a
    pair's copy into the peer's tensor memory) that is ordered after every MMA that CTA has seen complete."""
    for m in _IN_FLIGHT.get(ref.memory, ()):
        if issuer in m.known:
            continue
        if any(memory is ref.memory and acc_mask[mask].any() for memory, acc_mask in m.acc_masks):
            return m, "updating"
        if writing and any(memory is ref.memory and a_mask[mask].any() for memory, a_mask in m.a_masks):
            return m, "reading (its A operand)"
        if writing and m.tmem_reads is not None and m.acc.memory is ref.memory and m.tmem_reads[mask].any():
            return m, "reading (its scales)"
    return None, ""


def _checked(name: str, verb: str):
    """``name``'s rule, first reporting an access to an accumulator an MMA may still be updating (or, for a
    store, to an A operand an MMA may still be reading)."""
    plain = RULES[name]

    def checked(program, op, operands):
        mma, doing = mma_in_flight(operands[0], _footprint(operands[0], op.operands[0].type, op),
                                   name == "tmem_store")
        if mma is not None:
            raise InterpreterError(
                f"{name} {verb} tensor memory that {mma.what} may still be {doing} (its completion has not been "
                "observed); commit the MMA (mbarriers=[bar] or tcgen05_commit(bar)) and mbarrier.wait on that "
                "barrier first", op.loc, notes=[("the MMA in flight", mma.op.loc)])
        return plain(program, op, operands)

    checked.__doc__ = f"{name}, checked against MMAs in flight."
    rule(name)(checked)


_checked("tmem_load", "reads")
_checked("tmem_store", "writes")


def _at_exit(program, op) -> None:
    units = program.async_state["tcgen05"]
    uncommitted = units.issued[units.committed:]
    if uncommitted:
        raise InterpreterError(f"the kernel ends with {uncommitted[0].what} never committed: its result is never "
                               "known complete; pass mbarriers=[bar] (or call tcgen05_commit(bar)) and wait on bar",
                               uncommitted[0].op.loc)
