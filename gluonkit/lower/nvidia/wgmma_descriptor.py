"""wgmma shared-memory matrix descriptors, derived from the operand's shared layout.

A wgmma reads an operand tile from shared memory through a 64-bit descriptor (PTX ISA,
"Matrix Descriptor Format"): bits 0–13 the start address >> 4, 16–29 the *leading
dimension byte offset* (LBO) >> 4, 32–45 the *stride dimension byte offset* (SBO) >> 4,
49–51 the base offset (0: our swizzled buffers start on a swizzle-pattern boundary), 62–63
the swizzle mode (0 none, 1 128B, 2 64B, 3 32B).  The hardware forms each element's
address from a *canonical layout* fixed by the mode and the operand's major-ness (in units
of ``T`` = 16 bytes of elements):

=============  ====================================  ===============================
major-ness     no swizzle                            swizzle of ``S`` bytes
=============  ====================================  ===============================
K-major        ``((8,m),(T,2k)):((T,SBO),(1,LBO))``  ``((8,m),(T,2k)):((S/e,SBO),(1,T))``
MN-major       ``((T,m),(8,k)):((1,SBO),(T,LBO))``   ``((S/e,m),(8,k)):((1,LBO),(S/e,SBO))``
=============  ====================================  ===============================

and then XORs the 16-byte-chunk bits 4… of the address with the row bits 7… (the swizzle).

Nothing here is a table of layouts.  The view's own linear layout gives each coordinate
bit's byte offset; undoing the swizzle (an XOR of address bits, so still linear) gives the
unswizzled offsets ``Q``.  The major-ness is the dimension whose first bit is one element
apart; LBO and SBO are read off ``Q`` at the bits where the canonical layout leaves its atom,
and every bit an instruction reads is then checked against the canonical layout, so a
view the hardware would read differently (an odd slice, a foreign layout) is refused with
the user's line instead of computing garbage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from ...ir import CompilationError, SharedMemoryDescType
from ...ir.memdesc import view_to_offset
from ...layouts.linear import log2_exact

__all__ = ["OperandDescriptor", "describe_operand", "plan_bits", "SWIZZLE_MODE_BITS"]

#: The descriptor's swizzle field for each swizzle width in bytes.
SWIZZLE_MODE_BITS = {0: 0, 128: 1, 64: 2, 32: 3}
_FIELD_LIMIT = 1 << 18  # 14 bits of 16-byte units


def _unswizzle(byte_offset: int, swizzle: int) -> int:
    """Undo the hardware swizzle of ``swizzle`` bytes: chunk bits 4… ^= row bits 7… (an involution)."""
    if not swizzle:
        return byte_offset
    bits = log2_exact(swizzle // 16)
    mask = (1 << bits) - 1
    return byte_offset ^ (((byte_offset >> 7) & mask) << 4)


@dataclass(frozen=True)
class OperandDescriptor:
    """How one wgmma operand view is read.

    ``k_major``: K is the contiguous dimension (``imm-trans`` 0).  ``offset(mn, k)`` is the
    unswizzled byte offset of a tile's first element from the view's start; each instruction's
    descriptor is ``base | (start >> 4)``.  ``mn_bits``/``k_bits``: per coordinate bit, its
    unswizzled byte offset.
    """

    view: SharedMemoryDescType
    k_major: bool
    swizzle: int
    lbo: int
    sbo: int
    constant: int  # unswizzled byte offset of coordinate (0, 0) (slices XOR it in)
    mn_bits: Tuple[int, ...]
    k_bits: Tuple[int, ...]

    @property
    def base(self) -> int:
        """The descriptor's fields other than the start address."""
        return ((self.lbo >> 4) << 16) | ((self.sbo >> 4) << 32) | (SWIZZLE_MODE_BITS[self.swizzle] << 62)

    def offset_of(self, mn: int, k: int) -> int:
        """Unswizzled byte offset of coordinate (mn, k) (compile-time coordinates)."""
        out = self.constant
        for bits, value in ((self.mn_bits, mn), (self.k_bits, k)):
            for i, b in enumerate(bits):
                if value >> i & 1:
                    out ^= b
        return out


def describe_operand(view: SharedMemoryDescType, operand: int, xor: int, align: int,
                     mn_inst: int, k_inst: int, loc, op_name: str = "warpgroup_mma") -> OperandDescriptor:
    """The descriptor plan of shared operand ``operand`` (0 = A ``[M, K]``, 1 = B ``[K, N]``).

    ``xor`` is the view's slice constant (elements), ``align`` the known byte alignment of its
    start; one instruction reads ``mn_inst x k_inst`` elements (64 x K for A, N x K for B).
    The swizzle mode is the one whose unswizzled offsets form a canonical layout: an
    ``NVMMASharedLayout``'s own width first, then the others, widest first.  ``op_name`` is the
    user's op (``warpgroup_mma`` or ``tcgen05_mma``), which the error names.
    """
    declared = getattr(view.layout, "swizzle_byte_width", 0)
    reasons = {}
    for swizzle in dict.fromkeys([declared, 128, 64, 32, 0]):
        plan = _plan(view, operand, xor, align, mn_inst, k_inst, swizzle)
        if isinstance(plan, OperandDescriptor):
            return plan
        reasons[swizzle] = plan
    name = "a" if operand == 0 else "b"
    raise CompilationError(f"{op_name}: the shared memory view {view} of {name} cannot be read by the tensor "
                           f"cores: {reasons[declared]}; store the operand in a whole NVMMASharedLayout buffer with a "
                           "swizzle (slices along the non-contiguous dimension in whole 8-row groups are fine)", loc)


def _plan(view: SharedMemoryDescType, operand: int, xor: int, align: int, mn_inst: int, k_inst: int,
          swizzle: int):
    """The :class:`OperandDescriptor` for swizzle mode ``swizzle``, or why that mode cannot read the view."""
    e = view.element.itemsize
    to_offset = view_to_offset(view)
    mn_dim, k_dim = ("dim0", "dim1") if operand == 0 else ("dim1", "dim0")
    mn_bits, k_bits = (tuple(basis[0] * e for basis in to_offset.bases[dim]) for dim in (mn_dim, k_dim))
    return plan_bits(view, mn_bits, k_bits, xor * e, align, mn_inst, k_inst, swizzle,
                     "M/N" if operand == 0 else "N")


def plan_bits(view: SharedMemoryDescType, mn_bytes, k_bytes, constant: int, align: int, mn_inst: int,
              k_inst: int, swizzle: int, mn_name: str = "M/N"):
    """:func:`_plan` from the byte offsets themselves: per bit of the M/N and K coordinates, the (swizzled)
    byte offset it adds, and the (swizzled) byte offset of coordinate (0, 0).  Also used for tensor
    memory copies, whose rows and columns reach shared memory through the destination's layout."""
    e = view.element.itemsize
    if swizzle and align < 8 * swizzle:
        return (f"its start is only known to be {align}-byte aligned, but a {swizzle}-byte swizzle needs "
                f"{8 * swizzle}")
    mn_bits, k_bits = (tuple(_unswizzle(b, swizzle) for b in bits) for bits in (mn_bytes, k_bytes))
    constant = _unswizzle(constant, swizzle)
    k_major = bool(k_bits) and k_bits[0] == e
    if not k_major and not (mn_bits and mn_bits[0] == e):
        return "neither K nor the other dimension is contiguous"
    lbo, sbo, expected = _canonical(k_major, swizzle, e, mn_bits, k_bits, log2_exact(mn_inst), log2_exact(k_inst))
    for dim, bits, want in ((mn_name, mn_bits, expected[0]), ("K", k_bits, expected[1])):
        for i, (have, need) in enumerate(zip(bits, want)):
            if have != need:
                return (f"bit {i} of {dim} is {have} bytes from the start where the "
                        f"{'K' if k_major else 'MN'}-major canonical layout has {need}")
    used = [b for bits, n in ((mn_bits, mn_inst), (k_bits, k_inst)) for b in bits[:log2_exact(n)]]
    span = 0
    for b in used:
        if b & (b - 1) or b & span:
            return "an instruction's elements are not at distinct power-of-two offsets"
        span |= b
    tile_starts = constant
    for bits, n in ((mn_bits, mn_inst), (k_bits, k_inst)):
        for b in bits[log2_exact(n):]:
            tile_starts |= b
    if tile_starts & span:
        return "an instruction's tile does not start on a whole canonical tile (the view starts inside one)"
    for field, value in (("leading", lbo), ("stride", sbo)):
        if value % 16 or not 0 <= value < _FIELD_LIMIT:
            return f"its {field} dimension byte offset {value} is not a multiple of 16 below {_FIELD_LIMIT}"
    return OperandDescriptor(view, k_major, swizzle, lbo, sbo, constant, mn_bits, k_bits)


def _canonical(k_major: bool, swizzle: int, e: int, mn_bits, k_bits, mn_log: int, k_log: int):
    """(LBO, SBO, (expected mn bit offsets, expected k bit offsets)) for the instruction's bits.

    The strides outside the swizzle atom (LBO/SBO) come from the view's own bits; the bits
    inside the atom are fixed by the canonical layout.
    """
    t_log = log2_exact(16 // e)  # elements per 16 bytes

    def strided(bits, first_free: int, count: int, inside):
        """``inside`` for the atom's bits, then stride * 2**j read off bit ``first_free``."""
        stride = bits[first_free] if first_free < min(count, len(bits)) else 0
        return stride, list(inside) + [stride << j for j in range(count - len(inside))]

    if k_major:
        if swizzle:
            row = swizzle
            k_want = [e << i for i in range(k_log)]
            lbo = 16  # unused for swizzled K-major layouts ("assumed 1")
        else:
            row = 16
            k_want = [e << i for i in range(t_log)]
            lbo, k_want = strided(k_bits, t_log, k_log, k_want)
        sbo, mn_want = strided(mn_bits, 3, mn_log, [row << i for i in range(min(3, mn_log))])
        return lbo, sbo, (mn_want, k_want)
    if swizzle:
        atom_log = log2_exact(swizzle // e)  # MN elements in one swizzled row
        lbo, mn_want = strided(mn_bits, atom_log, mn_log, [e << i for i in range(min(atom_log, mn_log))])
        sbo, k_want = strided(k_bits, 3, k_log, [swizzle << i for i in range(min(3, k_log))])
    else:
        sbo, mn_want = strided(mn_bits, t_log, mn_log, [e << i for i in range(min(t_log, mn_log))])
        lbo, k_want = strided(k_bits, 3, k_log, [16 << i for i in range(min(3, k_log))])
    return lbo, sbo, (mn_want, k_want)

