"""Rules for Blackwell's block-scaled MMA family: ``tcgen05_copy`` and ``tcgen05_mma_scaled``.

**Values.**  ``acc = (a * a_scale) @ (b * b_scale) (+ acc)``: each operand element (fp8, or fp4
e2m1 unpacked from its byte, lower nibble first) times the scale of its block of V elements of
K (UE8M0 ``2**(s - 127)``, 255 is NaN; or UE4M3), formed exactly in float64, summed in float64
and rounded once into the float32 accumulator, as :mod:`gluonkit.interpret.nvidia.tcgen05` does for plain MMAs.

**Protocol** (PTX ISA, tcgen05 memory consistency): a ``tcgen05.cp`` and the ``tcgen05.mma``
the same thread issues after it run in order, and a ``tcgen05.commit`` covers both; nothing
else orders them.  Here a copy reads its shared source and writes its tensor-memory
destination when issued, and joins the issuing partition's queue of tcgen05 work (so a commit
covers it and a wait that observes that commit *releases* it).  Until then the checker reports,
with both lines:

* a ``tmem_load``/``tmem_store`` of the destination (the copy may not have landed);
* a block-scaled MMA of *another* partition reading scales the copy writes (only the issuing
  thread's MMAs are ordered after it);
* another copy writing the same cells, and a store into the shared source (as for MMA operands);
* a copy overwriting tensor memory an MMA still in flight reads or writes (``tcgen05.mma`` →
  ``tcgen05.cp`` is not an ordered pair: wait for the MMA's commit, or use another buffer);
* a ``tmem_store`` into scales an MMA in flight reads (:func:`gluonkit.interpret.nvidia.tcgen05.mma_in_flight`).
"""

from __future__ import annotations

from typing import List
from weakref import WeakKeyDictionary

import ml_dtypes
import numpy as np

from ...ir.verify_tcgen05_scaled import copy_chunks, pair_copy_shares, scaled_kind
from ...ir.types import TensorMemoryDescType
from ...layouts.distributed import cta_offset
from ...layouts.tmem import TensorMemoryScalesLayout
from ..engine import RULES, rule
from ..errors import InterpreterError
from ..shared_memory import AsyncRead, byte_mask, read_undefined, unfenced_write
from .tcgen05 import _Mma, _footprint, _gather, issue, mma_in_flight, pair_shares, peer_tensor_memory
from .tmem import TensorMemory, TmemRef, read_tile, share_shape, write_tile

__all__: List[str] = []

#: Per tensor memory: the copies whose completion no wait has observed yet.
_COPIES: "WeakKeyDictionary[TensorMemory, List[_Copy]]" = WeakKeyDictionary()
#: e2m1 bit patterns → values (sign, 2 exponent bits, 1 mantissa bit).
_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
_WAIT = "commit it (tcgen05_commit(bar), or an MMA's mbarriers=) and mbarrier.wait on that barrier first"


def _unfenced(program, op, ref, ty, what: str) -> None:
    unfenced = unfenced_write(program, ref, ty, op)
    if unfenced is not None:
        raise InterpreterError(f"{what} reads {ref.buffer.describe()}, which the store at line {unfenced.line} wrote "
                               "through the generic proxy with no fence_async_shared() since; call "
                               f"fence_async_shared() between the store and the {what}", op.loc)


def _copy_in_flight(memory, mask, issuer=None):
    """A copy into the cells ``mask`` of ``memory`` not yet known complete (to CTA ``issuer``, when given)."""
    return next((c for c in _COPIES.get(memory, ()) if (c.mask_in(memory) & mask).any() and issuer not in c.known),
                None)


class _Copy:
    """One issued tcgen05_copy: landed at issue, unordered for others until a wait observes its commit.

    A CTA pair's (issued by the even CTA): ``parts`` lists, per CTA of the pair, its rank, its share of the
    source and its tensor memory; each CTA's share lands in its own, and is released when that CTA's wait
    observes the commit (as for a pair's MMA)."""

    done = True  # (nothing left to compute when a commit lands)

    def __init__(self, program, op, parts):
        src_ty, dst_ty = (v.type for v in op.operands)
        self.program, self.op = program, op
        self.what = f"the tcgen05_copy at line {op.loc.line}"
        share_src, share_dst = src_ty, dst_ty
        if len(parts) > 1:
            share_src, share_dst = pair_copy_shares(src_ty, dst_ty)
        if isinstance(dst_ty.layout, TensorMemoryScalesLayout):
            chunks = copy_chunks(share_src, share_dst, parts[0][1].xor)
            if isinstance(chunks, str):
                raise InterpreterError(f"tcgen05_copy: {chunks}", op.loc)
        self.parts = {}  # rank -> (memory, mask, reads)
        self.known = set()  # the CTAs (ranks) that have observed its completion
        for rank, src, dst in parts:
            _unfenced(program, op, src, src_ty, "tcgen05_copy")
            mask = _footprint(dst, dst_ty, op)
            self._check(dst, mask, program.cta_rank)
            values, defined = read_undefined(src, src_ty, op)  # unwritten bytes stay undefined in tensor memory
            if len(parts) > 1:  # the CTA's share of the pair's source
                rows, cols = share_shape(dst_ty)
                r, c = cta_offset(dst_ty.layout.cga_layout, (rows, cols), rank)
                values, defined = values[r:r + rows, c:c + cols], defined[r:r + rows, c:c + cols]
            write_tile(dst, dst_ty, values, op, defined)
            reader = AsyncRead(byte_mask(src, src_ty, op), self.what,
                               "wait on the mbarrier its commit arrives on first")
            src.buffer.async_reads.append(reader)
            self.parts[rank] = (dst.memory, mask, [(src.buffer, reader)])
            _COPIES.setdefault(dst.memory, []).append(self)

    def _check(self, dst, mask, issuer: int) -> None:
        """Report a copy over tensor memory an MMA or another copy in flight still uses (one the issuing CTA has
        seen complete is not: in a pair, the peer's part may still be held until the peer's own wait)."""
        mma, _ = mma_in_flight(dst, mask, writing=True, issuer=issuer)
        if mma is not None:
            raise InterpreterError(f"tcgen05_copy overwrites tensor memory that {mma.what} may still be using (its "
                                   "completion has not been observed, and the PTX ISA does not order a tcgen05.cp "
                                   "after an earlier tcgen05.mma); wait on the MMA's barrier first, or copy into "
                                   "another buffer (one per pipeline stage)", self.op.loc,
                                   notes=[("the MMA in flight", mma.op.loc)])
        earlier = _copy_in_flight(dst.memory, mask, issuer)
        if earlier is not None:
            raise InterpreterError(f"tcgen05_copy writes tensor memory that {earlier.what} may still be writing (no "
                                   f"wait has observed its completion); {_WAIT}", self.op.loc,
                                   notes=[("the earlier copy", earlier.op.loc)])

    def mask_in(self, memory):
        """The cells of ``memory`` this copy writes (``None``: none)."""
        return next((mask for mem, mask, _ in self.parts.values() if mem is memory), None)

    def compute(self) -> None:
        """Nothing to do: the copy landed when issued."""

    def observed(self, rank: int) -> None:
        """A wait in CTA ``rank`` observed the copy's completion: that CTA's part is released."""
        self.known.add(rank)
        self._release([rank])

    def release(self, shares=None) -> None:
        """Every part still held is released (the tcgen05 pipe dropped the copy; ``shares`` as for MMAs)."""
        self._release(list(self.parts))

    def _release(self, ranks) -> None:
        for rank in ranks:
            part = self.parts.pop(rank, None)
            if part is None:
                continue
            memory, _, reads = part
            for buffer, reader in reads:
                buffer.async_reads.remove(reader)
            _COPIES[memory].remove(self)


@rule("tcgen05_copy")
def _tcgen05_copy(program, op, operands):
    src, dst = operands
    parts = [(program.cta_rank, src, dst)]
    if getattr(op.operands[1].type.layout, "cga_layout", None):  # a CTA pair's copy: the even CTA issues it
        if program.cta_rank & 1:
            return []
        cluster, peer = program.cluster, program.cta_rank | 1
        memory = peer_tensor_memory(program, op, "the pair's copy writes the tensor memory", "the copy")
        parts.append((peer, cluster.peer(src, peer, op), TmemRef(memory, dst.lane, dst.column)))
    issue(program, op, _Copy(program, op, parts), 2, operands)
    return []


def _decode(values: np.ndarray, fmt: str, k_dim: int) -> np.ndarray:
    """Operand values in float64; e2m1 bytes unpacked along K (dimension ``k_dim``), lower nibble first."""
    if fmt != "e2m1":
        return values.astype(np.float64)
    pair = np.stack([_E2M1[values & 0xF], _E2M1[values >> 4]], axis=k_dim + 1)
    shape = list(values.shape)
    shape[k_dim] *= 2
    return pair.reshape(shape)


def _scales(raw: np.ndarray, op) -> np.ndarray:
    """Scale factors in float64: uint8 as UE8M0 (255 is NaN), float8e4nv as UE4M3 (the sign bit must be clear)."""
    if raw.dtype == np.uint8:
        return np.where(raw == 255, np.nan, np.ldexp(1.0, raw.astype(np.int64) - 127))
    bits = raw.view(np.uint8)
    if (bits & 0x80).any():
        raise InterpreterError("tcgen05_mma_scaled: a UE4M3 (float8e4nv) scale has its sign bit set; nvfp4 scales "
                               "are unsigned", op.loc)
    return raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _placed(ty, parts, ranks) -> np.ndarray:
    """The scales of the whole cluster-level view ``ty`` with each CTA's ``parts`` at its place (zeros elsewhere:
    the rows of other pairs, which this pair's MMA does not use)."""
    rows, cols = share_shape(ty)
    values = np.zeros(ty.shape, np.float64)
    for part, rank in zip(parts, ranks):
        r, c = cta_offset(ty.layout.cga_layout, (rows, cols), rank)
        values[r:r + rows, c:c + cols] = part
    return values


class _ScaledMma(_Mma):
    """One issued block-scaled MMA: a plain MMA whose multiplicands carry their block scales.

    A CTA pair's (``shares``, as for :class:`~.tcgen05._Mma`): each CTA's tensor memory holds A's scales of its
    rows and all of B's, which must be the same in both CTAs (each CTA's half of the product reads its own)."""

    def __init__(self, program, op, operands, shares=None):
        a, b, acc, a_scale, b_scale, use_acc = operands[:6]
        types = [v.type for v in op.operands[:5]]
        self.formats = op.attrs["a_type"], op.attrs["b_type"]
        self.vec = scaled_kind(*self.formats, types[3].element)[1]
        memories = [a_scale.memory] + [share[2].memory for share in (shares or [])[1:]]
        per_cta = []  # per CTA: (a_scale values, b_scale values)
        reads = np.zeros_like(a_scale.memory.written)
        for memory in memories:
            values = []
            for ref, ty in ((a_scale, types[3]), (b_scale, types[4])):
                ref = TmemRef(memory, ref.lane, ref.column)
                mask = _footprint(ref, ty, op)
                copy = _copy_in_flight(memory, mask)
                if copy is not None and copy.program is not program:
                    raise InterpreterError(f"tcgen05_mma_scaled reads scales that {copy.what} (issued by another "
                                           "partition) may still be writing: the PTX ISA orders a tcgen05.cp only "
                                           f"before the MMAs of the thread that issued it; {_WAIT}", op.loc,
                                           notes=[("the copy in flight", copy.op.loc)])
                values.append(_scales(read_tile(ref, ty, op), op))
                if memory is a_scale.memory:
                    reads |= mask
            per_cta.append(values)
        if any(not np.array_equal(b_scales, per_cta[0][1], equal_nan=True) for _, b_scales in per_cta[1:]):
            raise InterpreterError("tcgen05_mma_scaled: the CTAs of the pair hold different b_scale values; each CTA's "
                                   "half of the product reads B's scales from its own tensor memory, so store or copy "
                                   "the same scales in both", op.loc)
        ranks = [program.cta_rank | i for i in range(len(per_cta))]
        self.scales = [_placed(types[3], [values[0] for values in per_cta], ranks),
                       _placed(types[4], [per_cta[0][1]], ranks[:1])]
        super().__init__(program, op, [a, b, acc, use_acc], shares, tmem_reads=reads)

    def multiplicands(self) -> List[np.ndarray]:
        a = _decode(_gather([(share[0], self.types[0]) for share in self.shares], self.op), self.formats[0], 1)
        b = _decode(_gather([(share[1], self.types[1]) for share in self.shares], self.op), self.formats[1], 0)
        a_scale, b_scale = (np.repeat(s, self.vec, axis=1) for s in self.scales)
        return [a * a_scale, b * b_scale.T]


@rule("tcgen05_mma_scaled")
def _tcgen05_mma_scaled(program, op, operands):
    if not bool(operands[6]):
        return []
    for ref, value in ((operands[0], op.operands[0]), (operands[1], op.operands[1])):
        _unfenced(program, op, ref, value.type, "tcgen05_mma_scaled")
    shares = None
    if op.operands[2].type.layout.two_ctas:
        if program.cta_rank & 1:  # the even CTA issues the pair's MMA
            return []
        shares = pair_shares(program, op, operands)
    issue(program, op, _ScaledMma(program, op, operands, shares), 7, operands)
    return []


def _checked(name: str, verb: str):
    """``name``'s rule, first reporting an access to tensor memory a copy may still be writing."""
    plain = RULES[name]

    def checked(program, op, operands):
        copy = _copy_in_flight(operands[0].memory, _footprint(operands[0], op.operands[0].type, op))
        if copy is not None:
            raise InterpreterError(f"{name} {verb} tensor memory that {copy.what} may still be writing (its "
                                   f"completion has not been observed); {_WAIT}", op.loc,
                                   notes=[("the copy in flight", copy.op.loc)])
        return plain(program, op, operands)

    checked.__doc__ = f"{name}, checked against copies in flight."
    rule(name)(checked)


_checked("tmem_load", "reads")
_checked("tmem_store", "writes")


def _mma_after_copy(program, op, operands):
    """A plain ``tcgen05_mma`` whose accumulator (or A in tensor memory) a copy of *another* partition may still be
    writing is reported; one the same thread issued is ordered before it (``tcgen05.cp`` → ``tcgen05.mma``)."""
    for index in (2, 0):
        ref, ty = operands[index], op.operands[index].type
        if not isinstance(ty, TensorMemoryDescType):
            continue
        copy = _copy_in_flight(ref.memory, _footprint(ref, ty, op))
        if copy is not None and copy.program is not program:
            raise InterpreterError(f"tcgen05_mma uses tensor memory that {copy.what} (issued by another partition) "
                                   "may still be writing: the PTX ISA orders a tcgen05.cp only before the MMAs of "
                                   f"the thread that issued it; {_WAIT}", op.loc,
                                   notes=[("the copy in flight", copy.op.loc)])
    return _plain_mma(program, op, operands)


_plain_mma = RULES["tcgen05_mma"]
rule("tcgen05_mma")(_mma_after_copy)
