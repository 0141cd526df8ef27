"""Verifier rules of Blackwell's block-scaled MMA family: ``tcgen05_copy`` and ``tcgen05_mma_scaled``.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  The frontend asks :func:`scaled_shape_problem` and :func:`copy_problem` too, so a bad
call is reported at the user's line; the lowering and the interpreter take the placement
from :func:`copy_chunks` and :func:`scale_cell`, so every stage agrees on it.

**Formats** (PTX ISA, ``tcgen05.mma … .block_scale``): ``a_type``/``b_type`` are ``"e4m3"``
(``float8e4nv`` in shared memory), ``"e5m2"`` (``float8e5``) or ``"e2m1"`` (fp4, two per
``uint8`` along K, the lower nibble first).  Scales are ``uint8`` (UE8M0: ``2**(s - 127)``,
one per 32 elements of K) or, for e2m1 x e2m1 only, ``float8e4nv`` read as UE4M3 (one per
16 elements: NVIDIA's nvfp4).  The kind follows: e2m1 x e2m1 with UE8M0 → ``kind::mxf4``
(``block32``), with UE4M3 → ``kind::mxf4nvf4`` (``block16``), fp8 x fp8 in any mix →
``kind::mxf8f6f4`` (``block32``) — Triton 3.9's choice.  fp8 x e2m1 (``mxf8f6f4`` with padded
fp4 operands) is not built.

**Shapes**: ``M = 128`` (Gluon rejects block M 64), ``N`` a multiple of 16 up to 256, K (in
elements) a multiple of one instruction's 32 bytes; ``acc`` float32 in a ``TensorMemoryLayout``
with block M 128; ``a_scale`` is ``[M, K/V]`` and ``b_scale`` ``[N, K/V]`` in tensor memory with
a ``TensorMemoryScalesLayout``.  A CTA pair (``two_ctas`` acc, ``M = 256``) splits A by rows and
B by columns as a plain pair MMA does, A's scales by rows (``cga_layout=[[1, 0]]``) and keeps
all of B's scales in both CTAs (``cga_layout=[[0, 0]]``).

**Scale placement** (:class:`~gluonkit.layouts.tmem.TensorMemoryScalesLayout`): rows 32g + r
sit in lane r (copied into every lane quarter), byte c of 32-bit column g of each group of 4
scales along K.  An MMA instruction takes its scales from the column that holds its first
scale and the byte (``scale_a_id``/``scale_b_id`` of the instruction descriptor) it starts at.

**tcgen05_copy** of block scales (``tcgen05.cp.cta_group::1.warpx4.32x128b``): one instruction moves 32 rows
of 16 bytes of shared memory into 4 columns of lanes 0-31 and copies them into the other
three lane quarters; each 128-row x 4-scale block of the view is one such chunk, so the
shared view must hold that block as 32 rows of 16 bytes, row r at byte 16r and scale
(32g + r, c) at byte 16r + 4g + c (the unswizzled form of the standard "packed block" scale
layout).  In a CTA pair (``tcgen05.cp.cta_group::2``) the same holds for each CTA's share
(:func:`pair_copy_shares`).  A copy into a ``TensorMemoryLayout`` (a 32-bit tile, Gluon's other use) is checked by
:func:`copy_problem` and planned, ``128x256b`` / ``128x128b`` at a time, by the lowering.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..layouts.shared import NVMMASharedLayout, PaddedSharedLayout, SharedLinearLayout
from ..layouts.tmem import TensorMemoryLayout, TensorMemoryScalesLayout
from .core import Operation
from .memdesc import view_to_offset
from .tmem import tile_layout
from .types import SharedMemoryDescType, TensorMemoryDescType, float8e4nv, float8e5, float32, int1, uint8
from .verifier import rule
from .verify_checks import fail
from .verify_tcgen05 import _multicast_bits, _pair_problem, _shared_problem, pair_mma_shape
from .verify_wgmma import contiguous_dim

__all__ = ["SCALED_FORMATS", "scaled_kind", "scaled_k", "scaled_shape_problem", "scale_cell", "copy_problem",
           "copy_chunks", "pair_copy_shares", "CHUNK_ROWS", "CHUNK_SCALES", "CHUNK_BYTES"]

#: The operand formats ``tcgen05_mma_scaled`` takes, and their element type in shared memory.
SCALED_FORMATS = {"e2m1": uint8, "e4m3": float8e4nv, "e5m2": float8e5}
CHUNK_ROWS, CHUNK_SCALES, CHUNK_BYTES = 128, 4, 512  # one tcgen05.cp .warpx4.32x128b


def scaled_kind(a_type: str, b_type: str, scale_element) -> Tuple[str, int]:
    """``(kind, V)``: the MMA kind qualifier and the elements of K one scale covers."""
    if a_type == b_type == "e2m1":
        return ("mxf4nvf4", 16) if scale_element == float8e4nv else ("mxf4", 32)
    return "mxf8f6f4", 32


def scaled_k(ty: SharedMemoryDescType, fmt: str, dim: int) -> int:
    """Logical elements along K of operand view ``ty`` (K is ``dim``): two per byte for e2m1."""
    return ty.shape[dim] * (2 if fmt == "e2m1" else 1)


def _scale_problem(ty, name: str, rows: int, k: int) -> Optional[str]:
    if not isinstance(ty, TensorMemoryDescType) or len(ty.shape) != 2:
        return f"{name} must be a 2-D tensor memory descriptor, got {ty}"
    if not isinstance(ty.layout, TensorMemoryScalesLayout):
        return f"{name} must be in a TensorMemoryScalesLayout(), got {ty.layout!r}"
    if ty.element not in (uint8, float8e4nv):
        return f"{name} must be uint8 (UE8M0 scales) or float8e4nv (UE4M3, nvfp4), got {ty.element}"
    vec = 16 if ty.element == float8e4nv else 32
    if k % vec or list(ty.shape) != [rows, k // vec]:
        return (f"{name} has shape {list(ty.shape)}; with {ty.element} scales (one per {vec} elements of K) it "
                f"must be [{rows}, {k // vec if k % vec == 0 else f'K/{vec}'}] for K = {k}")
    return None


def _scale_split_problem(a_scale, b_scale, acc_layout) -> Optional[str]:
    """A CTA pair's scales: each CTA holds A's for its own rows (``cga_layout=[[1, 0]]``) and all of B's (the
    same in both: ``cga_layout=[[0, 0]]``), as Gluon 3.9's 2-CTA block-scaled example lays them out; in a cluster
    of pairs each further CTA bit moves them with the accumulator (acc basis ``[r, c]``: A's scales ``[r, 0]``,
    B's ``[c, 0]``, B's rows being the product's columns).  A one-CTA MMA's scales are whole in its CTA."""
    pair = acc_layout.two_ctas
    further = [list(v) for v in acc_layout.cga_layout][1:] if pair else []
    want = ([[1, 0]] + [[r, 0] for r, _ in further], [[0, 0]] + [[c, 0] for _, c in further]) if pair else ([], [])
    what = ("a two_ctas MMA (A's scales split by rows like A, B's in both CTAs of a pair, each further CTA bit moving "
            "them as it moves acc)" if pair else "a one-CTA MMA")
    for ty, name, bases in ((a_scale, "a_scale", want[0]), (b_scale, "b_scale", want[1])):
        have = [list(v) for v in ty.layout.cga_layout]
        if have != bases and (pair or any(any(v) for v in have)):
            return f"{name} must be in TensorMemoryScalesLayout(cga_layout={bases}) for {what}, got {ty.layout!r}"
    return None


def scaled_shape_problem(a, b, acc, a_scale, b_scale, a_type: str, b_type: str) -> Optional[str]:
    """Why ``tcgen05_mma_scaled`` with these operand types and formats is not one MMA (``None`` if it is)."""
    for fmt, name in ((a_type, "a_type"), (b_type, "b_type")):
        if fmt not in SCALED_FORMATS:
            return f"{name} must be one of {sorted(SCALED_FORMATS)}, got {fmt!r}"
    for ty, name, fmt in ((a, "a", a_type), (b, "b", b_type)):
        problem = _shared_problem(ty, name)
        if problem:
            return problem
        if ty.element != SCALED_FORMATS[fmt]:
            return (f"{name} holds {fmt} values, so it must be {SCALED_FORMATS[fmt]} in shared memory "
                    f"(e2m1: two per uint8 along K), got {ty.element}")
    if (a_type == "e2m1") != (b_type == "e2m1"):
        return ("mixing e2m1 with an fp8 format (kind::mxf8f6f4 with padded fp4 operands) is not supported yet; "
                "use e2m1 for both operands or fp8 for both")
    if a_type == "e2m1" and (contiguous_dim(a) != 1 or contiguous_dim(b) != 0):
        return "e2m1 operands must be K-major: a [M, K/2] with K contiguous, b a [N, K/2] buffer's .permute((1, 0))"
    if not isinstance(acc, TensorMemoryDescType) or len(acc.shape) != 2 or acc.element != float32:
        return f"acc must be a 2-D float32 tensor memory descriptor, got {acc}"
    layout = acc.layout
    if not isinstance(layout, TensorMemoryLayout) or layout.col_stride != 1:
        return f"acc must be in a TensorMemoryLayout with col_stride=1, got {layout!r}"
    pair = _pair_problem(a, b, layout)
    if pair:
        return pair
    m, n = a.shape[0], b.shape[1]
    k = scaled_k(a, a_type, 1)
    if tuple(acc.shape) != (m, n) or scaled_k(b, b_type, 0) != k:
        return (f"shapes do not chain: a is {list(a.shape)} ({a_type}), b is {list(b.shape)} ({b_type}), acc is "
                f"{list(acc.shape)}; expected [M, K] x [K, N] -> [M, N] in elements (e2m1: two per byte)")
    pair_m, pair_n = pair_mma_shape(acc)  # one instruction's (a cluster of pairs holds one per pair)
    m_cta = pair_m // 2 if layout.two_ctas else pair_m
    if m_cta != 128 or layout.block[0] != 128:
        what = "M / 2 (two_ctas: each CTA of the pair holds half the rows)" if layout.two_ctas else "M"
        return f"{what} = {m_cta} must be 128 with acc's TensorMemoryLayout block M 128 (got {layout.block[0]})"
    if pair_n % 16 or not 16 <= pair_n <= 256:
        return f"N = {pair_n} must be a multiple of 16 from 16 to 256"
    if a.shape[1] % 32:
        return f"K = {k} must be a multiple of one instruction's 32 bytes ({32 * k // a.shape[1]} {a_type} elements)"
    for ty, name, rows in ((a_scale, "a_scale", m), (b_scale, "b_scale", n)):
        problem = _scale_problem(ty, name, rows, k)
        if problem:
            return problem
    problem = _scale_split_problem(a_scale, b_scale, layout)
    if problem:
        return problem
    if a_scale.element != b_scale.element:
        return f"a_scale and b_scale must have the same type, got {a_scale.element} and {b_scale.element}"
    if a_scale.element == float8e4nv and a_type != "e2m1":
        return "float8e4nv (UE4M3) scales go with e2m1 operands only (nvfp4); fp8 operands take uint8 scales"
    return None


def _cell_column(scale_ty: TensorMemoryDescType, row: int, k: int) -> int:
    """The 8-bit slot holding scale ``(row, k)``, relative to the view's address (4 slots per column)."""
    return tile_layout(scale_ty).pseudoinvert().apply({"dim0": row, "dim1": k})["col"]


def scale_cell(scale_ty: TensorMemoryDescType, k0: int) -> Tuple[int, int]:
    """``(column, byte)`` of the scale of row 0 and scale index ``k0`` relative to the view's address."""
    slot = _cell_column(scale_ty, 0, k0)
    return slot // 4, slot % 4


def _chunk_bytes() -> np.ndarray:
    """Byte of each (row, scale) of one 128 x 4 chunk in its 32 rows x 16 bytes of shared memory."""
    rows = np.arange(CHUNK_ROWS)[:, None]
    return 16 * (rows % 32) + 4 * (rows // 32) + np.arange(CHUNK_SCALES)[None, :]


def copy_chunks(src: SharedMemoryDescType, dst: TensorMemoryDescType, xor: int = 0):
    """The ``(byte offset in src, column of dst)`` of each tcgen05.cp chunk in dst column order, or why not.

    ``xor`` is the constant a sliced view XORs into its offsets.  Returns a problem string when
    the view does not hold each 128 x 4 block as :data:`CHUNK_BYTES` contiguous bytes of the
    32x128b form (see the module docstring).
    """
    rows, cols = dst.shape
    table = view_to_offset(src).table()[:, 0].reshape(cols, rows).T ^ xor  # [row, col] → element offset
    item = src.element.primitive_bitwidth // 8
    chunks: List[Tuple[int, int]] = []
    for r0 in range(0, rows, CHUNK_ROWS):
        for c0 in range(0, cols, CHUNK_SCALES):
            block = table[r0:r0 + CHUNK_ROWS, c0:c0 + CHUNK_SCALES] * item
            start = int(block[0, 0])
            if start % 16 or not np.array_equal(block - start, _chunk_bytes()):
                return (f"the shared view does not hold rows {r0}..{r0 + CHUNK_ROWS - 1}, scales {c0}..{c0 + 3} as "
                        "tcgen05.cp's 32 rows of 16 bytes (scale (32g + r, c) at byte 16r + 4g + c of a 16-byte "
                        "aligned block); use SharedLinearLayout(gluonkit.layouts.scales_copy_bases(rows, scales)) or a "
                        "view with the same bytes (docs/blackwell_block_scaled.rst)")
            chunks.append((start, _cell_column(dst, r0, c0) // 4))
    return sorted(chunks, key=lambda chunk: chunk[1])


def _tile_copy_problem(src: SharedMemoryDescType, dst: TensorMemoryDescType) -> Optional[str]:
    """Why ``tcgen05_copy`` cannot copy ``src`` into a ``TensorMemoryLayout`` tile (``None`` if it may).

    Gluon 3.9's rules: 32-bit elements, block M 128 in one CTA, a source that is neither transposed,
    padded nor an unswizzled NVMMASharedLayout.  Whether the tensor cores can read the view is decided
    when the copy is lowered (the shared view must form tcgen05.cp's canonical rows; see
    :mod:`gluonkit.lower.nvidia.tcgen05_scaled`).
    """
    layout = dst.layout
    if src.element != dst.element or src.element.primitive_bitwidth != 32:
        return (f"a copy into a TensorMemoryLayout moves 32-bit elements: src and dst must both be float32, int32 "
                f"or uint32, got {src.element} and {dst.element}")
    if tuple(src.shape) != tuple(dst.shape):
        return f"src is {list(src.shape)} but dst is {list(dst.shape)}; they must have the same shape"
    if layout.block[0] != 128 or layout.two_ctas:
        return (f"dst's TensorMemoryLayout must have block M 128 in one CTA (tcgen05.cp fills 128 lanes), got "
                f"{layout!r}")
    if isinstance(src.layout, PaddedSharedLayout) or getattr(src.layout, "transposed", False):
        return (f"src's layout {src.layout!r} must be neither transposed nor padded: tcgen05.cp reads rows of the "
                "tile along its last dimension")
    if isinstance(src.layout, NVMMASharedLayout) and not src.layout.swizzle_byte_width:
        return ("src's NVMMASharedLayout must be swizzled (swizzle_byte_width 32, 64 or 128) for a copy into a "
                "TensorMemoryLayout")
    return None


def pair_copy_shares(src: SharedMemoryDescType, dst: TensorMemoryDescType):
    """One CTA's ``(src, dst)`` of a CTA pair's scale copy (``tcgen05.cp.cta_group::2``), or why it is not one.

    The even CTA issues it for the pair, and each CTA's share of ``src`` (in its shared memory, at the same
    address in both) lands in its tensor memory: A's scales split by rows (``dst``
    ``TensorMemoryScalesLayout(cga_layout=[[1, 0]])`` from a ``SharedLinearLayout`` with
    ``block_bases=[[rows / 2, 0]]``) or B's whole in both CTAs (``[[0, 0]]`` from ``block_bases=[[0, 0]]``),
    as Triton 3.9 compiles Gluon's 2-CTA block-scaled example."""
    cga = [list(v) for v in dst.layout.cga_layout]
    rows, cols = dst.shape
    share_rows = rows // 2 if cga == [[1, 0]] else rows
    layout = src.layout
    if cga not in ([[1, 0]], [[0, 0]]):
        return (f"a copy into {dst.layout!r} is a copy within a cluster of CTA pairs, which is not built; within one "
                "pair dst's cga_layout is [[1, 0]] (A's scales, split by rows) or [[0, 0]] (B's, in both CTAs)")
    want = [[share_rows, 0]] if cga == [[1, 0]] else [[0, 0]]
    if (not isinstance(layout, SharedLinearLayout) or [list(v) for v in layout.block_bases] != want
            or tuple(src.shape) != tuple(layout.shape) or tuple(src.shape) != tuple(dst.shape)):
        return (f"a CTA pair's scale copy into {dst.layout!r} reads each CTA's share of a whole [{rows}, {cols}] "
                f"buffer in SharedLinearLayout(offset_bases=scales_copy_bases({share_rows}, {cols}), "
                f"block_bases={want}); got {src}")
    local = SharedLinearLayout(layout.offset_bases, (), layout.alignment)
    return (SharedMemoryDescType(src.element, (share_rows, cols), local, (share_rows, cols)),
            TensorMemoryDescType(dst.element, (share_rows, cols), TensorMemoryScalesLayout(), (share_rows, cols)))


def copy_problem(src, dst) -> Optional[str]:
    """Why ``tcgen05_copy(src, dst)`` with these view types is not a copy gluonkit can issue (``None`` if it is):
    block scales into a ``TensorMemoryScalesLayout``, or a 32-bit tile into a ``TensorMemoryLayout``."""
    if not isinstance(src, SharedMemoryDescType) or src.rank != 2 or src.num_stage_dims:
        return f"src must be one 2-D shared memory view (pick a stage with .index(i)), got {src}"
    if not isinstance(dst, TensorMemoryDescType) or len(dst.shape) != 2:
        return f"dst must be a 2-D tensor memory descriptor (pick a stage with .index(i)), got {dst}"
    if isinstance(dst.layout, TensorMemoryLayout):
        return _tile_copy_problem(src, dst)
    if not isinstance(dst.layout, TensorMemoryScalesLayout):
        return (f"dst must be in a TensorMemoryLayout (a 32-bit tile) or a TensorMemoryScalesLayout (block scales), "
                f"got {dst.layout!r}")
    if dst.layout.cga_layout:
        shares = pair_copy_shares(src, dst)
        if isinstance(shares, str):
            return shares
        src, dst = shares
    elif getattr(src.layout, "cga_layout", None) or getattr(src.layout, "block_bases", None):
        return (f"src's layout {src.layout!r} splits it between CTAs, but dst's {dst.layout!r} does not: a one-CTA "
                "copy reads a whole source")
    if src.element != dst.element or src.element.primitive_bitwidth != 8:
        return f"src and dst must both hold the same 8-bit scale type, got {src.element} and {dst.element}"
    if tuple(src.shape) != tuple(dst.shape):
        return f"src is {list(src.shape)} but dst is {list(dst.shape)}; they must have the same shape"
    rows, cols = dst.shape
    if rows % CHUNK_ROWS or cols % CHUNK_SCALES:
        return (f"the scales are copied in blocks of {CHUNK_ROWS} rows x {CHUNK_SCALES} scales; {list(dst.shape)} is "
                "not a whole number of them (store smaller scale tiles with .store() instead)")
    chunks = copy_chunks(src, dst)
    return chunks if isinstance(chunks, str) else None


def _barriers_problem(op: Operation, first: int) -> Optional[str]:
    """Check ``num_barriers`` mbarriers from operand ``first`` on, then their int1 predicates."""
    n = op.attrs.get("num_barriers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0 or len(op.operands) != first + 2 * n:
        return (f"expects {first} operands, then num_barriers barriers with their predicates; got "
                f"{len(op.operands)} operands and num_barriers={n!r}")
    if not isinstance(op.attrs.get("is_async"), bool) or (n and not op.attrs["is_async"]):
        return f"is_async must be a bool, and True when there are barriers, got {op.attrs.get('is_async')!r}"
    for v in op.operands[first:first + n]:
        if not isinstance(v.type, SharedMemoryDescType) or v.type.element.name != "int64":
            return f"barriers must be mbarriers (int64 shared memory), got {v.type}"
    for v in op.operands[first + n:]:
        if v.type != int1:
            return f"barrier predicates must be int1 scalars, got {v.type}"
    return None


@rule("tcgen05_mma_scaled")
def _tcgen05_mma_scaled(op: Operation):
    if op.results or op.regions or len(op.operands) < 7:
        fail(op, "expects a, b, acc, a_scale, b_scale, use_acc, pred and barriers, and has no results or regions")
    problem = _barriers_problem(op, 7)
    if problem:
        fail(op, problem)
    a, b, acc, a_scale, b_scale = (v.type for v in op.operands[:5])
    problem = scaled_shape_problem(a, b, acc, a_scale, b_scale, op.attrs.get("a_type"), op.attrs.get("b_type"))
    if problem:
        fail(op, problem)
    for v in op.operands[5:7]:
        if v.type != int1:
            fail(op, f"use_acc and pred must be int1 scalars, got {v.type}")
    _multicast_bits(op)


@rule("tcgen05_copy")
def _tcgen05_copy(op: Operation):
    if len(op.operands) != 2 or op.results or op.regions:
        fail(op, f"expects src and dst and no results, got {len(op.operands)} operands")
    problem = copy_problem(*(v.type for v in op.operands))
    if problem:
        fail(op, problem)
