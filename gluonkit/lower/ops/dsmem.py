"""Distributed shared memory: reading a word of another CTA's shared memory in the cluster.

Ops that exchange values between the CTAs of a cluster (:mod:`.reduce_across_ctas`,
:mod:`.convert_across_ctas`) store them in their own CTA's scratch memory as integers of
their width (:func:`to_bits`), pass a cluster barrier, and read the other CTAs' copies with
:func:`load_remote`: ``mapa.shared::cluster.u32`` turns this CTA's ``shared::cta`` address
into the other CTA's ``shared::cluster`` address, and ``ld.shared::cluster`` reads it.
"""

from __future__ import annotations

from typing import List

import llvmlite.ir as lir

from ...ir import CompilationError, Operation
from ..context import KernelLowering
from ..llvm_types import I8, I16, I32, I64, bit_width

__all__: List[str] = ["require_every_thread", "bits_type", "to_bits", "from_bits", "load_remote"]

_INT = {8: I8, 16: I16, 32: I32, 64: I64}
# ld.shared::cluster's register class per width (a byte is loaded into a 16-bit register).
_LOAD = {8: ("b8", "h", I16), 16: ("b16", "h", I16), 32: ("b32", "r", I32), 64: ("b64", "l", I64)}


def require_every_thread(ctx: KernelLowering, op: Operation, what: str) -> None:
    """Refuse an exchange between CTAs in a kernel with ``warp_specialize``: its cluster
    barriers wait for every thread of every CTA.  Inside a partition the other partitions'
    warps never come; outside, the workers' warps are parked at the fork (they join only
    ``cluster.barrier()``, counted at compile time: ``ops/warp_specialize.py``; not built for
    exchanges)."""
    if ctx.sync_group[1] is not None:
        raise CompilationError(
            f"{what} moves values between the CTAs of the cluster, which takes cluster barriers that every thread "
            "of the cluster must reach; in a kernel with warp_specialize (inside a partition only its warps run, "
            "outside them the workers' warps are parked) gluonkit does not build this yet — do it in a kernel "
            "without warp_specialize", op.loc)


def bits_type(ty: lir.Type) -> lir.Type:
    """The integer type a value of ``ty`` is stored as (``i1`` as a byte)."""
    return _INT[max(8, bit_width(ty))]


def to_bits(b: lir.IRBuilder, value: lir.Value) -> lir.Value:
    """``value`` as an integer of its width in memory (``i1`` as a byte)."""
    if isinstance(value.type, lir.IntType):
        return b.zext(value, I8) if bit_width(value.type) < 8 else value
    return b.bitcast(value, bits_type(value.type))


def from_bits(b: lir.IRBuilder, raw: lir.Value, ty: lir.Type) -> lir.Value:
    """The value of type ``ty`` that :func:`to_bits` stored, from :func:`load_remote`'s register."""
    width = max(8, bit_width(ty))
    if raw.type != _INT[width]:
        raw = b.trunc(raw, _INT[width])
    if isinstance(ty, lir.IntType):
        return b.trunc(raw, ty) if bit_width(ty) < width else raw
    return b.bitcast(raw, ty)


def load_remote(b: lir.IRBuilder, address: lir.Value, rank: lir.Value, width: int) -> lir.Value:
    """``ld.shared::cluster`` of the ``width``-bit word at ``address`` (a ``shared::cta``
    address, i32) in CTA ``rank`` of the cluster; ordered after earlier barriers (side effects)."""
    suffix, constraint, register = _LOAD[max(8, width)]
    text = ("{ .reg .b32 remote;\n"
            "mapa.shared::cluster.u32 remote, $1, $2;\n"
            f"ld.shared::cluster.{suffix} $0, [remote]; }}")
    return b.asm(lir.FunctionType(register, [I32, I32]), text, f"={constraint},r,r,~{{memory}}", [address, rank],
                 side_effect=True)
