"""Register layouts of NVIDIA tensor-core instructions: MMA accumulators and register operands.

``NVMMADistributedLayout`` is the accumulator (C/D) layout of ``wgmma`` (version ``[3, 0]``,
Hopper) or ``mma.sync`` (version ``[2, 0]``, Ampere); ``DotOperandLayout`` is the layout of
an operand held in registers: A (and, for ``mma.sync``, B), or either operand of an FMA
dot over a blocked accumulator.  Both are built as Triton does
(``nvidiaMmaTile`` in ``LinearLayoutConversions.cpp``), so their linear layouts match
Triton's basis for basis, and agree with the fragment figures of the PTX ISA:

* one warp's tile has ``k_width`` consecutive registers along the fastest ("inner")
  dimension, then 4 lanes along it, then 8 lanes along the other ("outer") dimension, then
  registers repeating the 8-row block along the outer dimension and, last, along the inner
  one;
* warps tile the instruction shape (column-major for wgmma, so the 4 warps of a warpgroup
  stack along M; row-major for mma.sync); operands broadcast over the warps along N;
* larger tensors repeat the tile in registers, the inner (``repOrder[0]``) dimension first.
"""

from __future__ import annotations

from typing import Sequence

from .distributed import (
    BlockedLayout,
    DistributedLayout,
    _int_list,
    _is_int,
    _product,
    check_shape,
    cluster_bases,
    fit_to_shape,
    identity_nd,
    out_dim_names,
    shape_per_cta,
    with_cta_bases,
)
from .linear import LinearLayout, is_power_of_two

#: The accumulator always holds 2 consecutive elements per thread along N (32-bit pairs).
_ACC_K_WIDTH = 2


def _mma_tile(rows: int, cols: int, k_width: int, inner: int, rep_order: Sequence[int]) -> LinearLayout:
    """One warp's fragment of a ``rows x cols`` tile (rows along the outer dimension).

    ``inner`` is the dimension along which a thread's ``k_width`` registers are consecutive;
    ``rep_order`` fixes the output-dimension order and so which dimension repeats first when
    the tensor is larger than the tile.  With ``k_width = 2`` this is the PTX ISA fragment of
    mma.m16n8k16 / wgmma.m64nNk16 for one warp: lane ``l`` holds row ``l // 4 (+ 8)`` and
    columns ``2 * (l % 4) + {0, 1} (+ 8 j)``.
    """
    outer = 1 - inner
    dims = out_dim_names(2)
    tile = identity_nd("register", [1, 1], rep_order)
    return (
        tile
        * LinearLayout.identity_1d(k_width, "register", dims[inner])
        * LinearLayout.identity_1d(4, "lane", dims[inner])
        * LinearLayout.identity_1d(8, "lane", dims[outer])
        * LinearLayout.identity_1d(rows // 8, "register", dims[outer])
        * LinearLayout.identity_1d(cols // (k_width * 4), "register", dims[inner])
    )


def _warp_tiling(warps_per_cta: Sequence[int], hopper: bool, broadcast_dim: int | None = None) -> LinearLayout:
    """Warps over the tiles: column-major for wgmma (a warpgroup spans M), row-major for
    mma.sync; warps along ``broadcast_dim`` (an operand's K) hold the same data."""
    order = [0, 1] if hopper else [1, 0]
    layout = LinearLayout.empty()
    for d in order:
        if d == broadcast_dim:
            layout = layout * LinearLayout.zeros_1d(warps_per_cta[d], "warp", f"dim{d}")
        else:
            layout = layout * LinearLayout.identity_1d(warps_per_cta[d], "warp", f"dim{d}")
    return layout


class NVMMADistributedLayout(DistributedLayout):
    """The accumulator layout of an NVIDIA MMA instruction (Gluon's name and parameters).

    ``version`` is ``[3, 0]`` for Hopper ``wgmma`` (``instr_shape = [16, N, K]``: each warp
    computes 16 rows of an ``m64nNkK`` instruction; N a power of two from 8 to 256, K 8, 16
    or 32 by element type; ``warps_per_cta[0]`` a multiple of 4 so warpgroups stack along
    M) or ``[2, 0]`` for Ampere ``mma.sync`` (``instr_shape = [16, 8]``).  Rank 2 only.
    A Hopper accumulator may be split between the CTAs of a cluster (``cga_layout``, e.g.
    ``[[1, 0]]``: CTA 1 holds the lower half of the rows), each CTA computing its share with
    its own wgmma (a multicast GEMM, ``docs/clusters.rst``).
    """

    def __init__(self, version, warps_per_cta, instr_shape, cga_layout=None):
        owner = "NVMMADistributedLayout"
        self.version = _int_list(owner, "version", version)
        self.warps_per_cta = _int_list(owner, "warps_per_cta", warps_per_cta)
        self.instr_shape = _int_list(owner, "instr_shape", instr_shape)
        if self.version not in ((3, 0), (2, 0)):
            raise ValueError(
                f"{owner}: version must be [3, 0] (Hopper wgmma) or [2, 0] (Ampere mma.sync), "
                f"got {list(self.version)}"
            )
        if len(self.warps_per_cta) != 2 or not all(is_power_of_two(w) for w in self.warps_per_cta):
            raise ValueError(
                f"{owner}: warps_per_cta must be 2 powers of two (rank-2 layouts only), got {list(self.warps_per_cta)}"
            )
        if self.is_hopper:
            m, n, k = self.instr_shape if len(self.instr_shape) == 3 else (0, 0, 0)
            if m != 16 or not (is_power_of_two(n) and 8 <= n <= 256) or k not in (8, 16, 32):
                raise ValueError(
                    f"{owner}: instr_shape for version [3, 0] must be [16, N, K] with N a power of "
                    f"two in [8, 256] and K in (8, 16, 32), got {list(self.instr_shape)}"
                )
            if self.warps_per_cta[0] % 4:
                raise ValueError(
                    f"{owner}: warps_per_cta[0] must be a multiple of 4 for version [3, 0] (a "
                    f"warpgroup's 4 warps stack along M), got {list(self.warps_per_cta)}"
                )
        elif self.instr_shape != (16, 8):
            raise ValueError(f"{owner}: instr_shape for version [2, 0] must be [16, 8], got {list(self.instr_shape)}")
        self.cga_layout = cluster_bases(owner, cga_layout, 2)
        if self.cga_layout and not self.is_hopper:
            raise ValueError(f"{owner}: cga_layout {[list(v) for v in self.cga_layout]} splits the accumulator "
                             "between CTAs, which only version [3, 0] (Hopper wgmma) supports; use zero bases")

    @property
    def is_hopper(self) -> bool:
        return self.version[0] == 3

    @property
    def rank(self) -> int:
        return 2

    @property
    def num_warps(self) -> int:
        return _product(self.warps_per_cta)

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape("NVMMADistributedLayout", shape, 2)
        m, n = self.instr_shape[:2]
        # Rows are the outer dimension, columns (N) the inner one, and N repeats first:
        # Triton's repOrder for NVIDIA MMA is row-major [1, 0].
        tile = _mma_tile(m, n, _ACC_K_WIDTH, inner=1, rep_order=[1, 0])
        tile = tile * _warp_tiling(self.warps_per_cta, self.is_hopper)
        if not self.cga_layout:
            return fit_to_shape(tile, shape)
        # Split between the CTAs of a cluster (a Hopper multicast GEMM): each CTA holds the
        # one-CTA layout of its share, and the CTA bits move by whole shares.
        per_cta = shape_per_cta("NVMMADistributedLayout", shape, self.cga_layout)
        return with_cta_bases(fit_to_shape(tile, per_cta), self.cga_layout)

    def _key(self) -> tuple:
        return (self.version, self.warps_per_cta, self.instr_shape, self.cga_layout)

    def __repr__(self) -> str:
        return (
            f"NVMMADistributedLayout(version={list(self.version)}, warps_per_cta={list(self.warps_per_cta)}, "
            f"instr_shape={list(self.instr_shape)}, cga_layout={[list(v) for v in self.cga_layout]})"
        )


class DotOperandLayout(DistributedLayout):
    """A tensor-core operand held in registers (Gluon's name and parameters).

    Supported: ``operand_index=0`` (A, ``[M, K]``) with an :class:`NVMMADistributedLayout`
    parent of version ``[3, 0]`` (wgmma's register A) or ``[2, 0]``, and ``operand_index=1``
    (B, ``[K, N]``) with a version ``[2, 0]`` parent (wgmma reads B from shared memory).
    ``k_width`` is the number of consecutive K elements per thread and register group:
    32 // element bits for wgmma (2 for 16-bit types).  A thread's fragment covers a
    16 x (8 * k_width) tile of A (or (8 * k_width) x 8 of B); warps along N hold copies of A.

    With a :class:`~gluonkit.layouts.distributed.BlockedLayout` parent (the operands of
    ``dot_fma``; ``k_width`` must be 0) each thread holds the whole K extent of the rows
    (A) or columns (B) its outputs need; lanes and warps along K hold copies.
    """

    def __init__(self, operand_index: int, parent: DistributedLayout, k_width: int):
        owner = "DotOperandLayout"
        if not isinstance(parent, (NVMMADistributedLayout, BlockedLayout)):
            raise ValueError(
                f"{owner}: parent must be an NVMMADistributedLayout (wgmma [3, 0] or mma.sync "
                f"[2, 0]) or a BlockedLayout (dot_fma); other parents are not supported, got {parent!r}"
            )
        if not _is_int(operand_index) or operand_index not in (0, 1):
            raise ValueError(f"{owner}: operand_index must be 0 (A) or 1 (B), got {operand_index!r}")
        if isinstance(parent, BlockedLayout):
            if k_width != 0 or not _is_int(k_width):
                raise ValueError(f"{owner}: k_width must be 0 with a BlockedLayout parent (dot_fma), got {k_width!r}")
            if parent.rank < 2:
                raise ValueError(f"{owner}: a BlockedLayout parent needs rank >= 2, got {parent!r}")
        elif operand_index == 1 and parent.is_hopper:
            raise ValueError(
                f"{owner}: operand_index 1 (B) is not supported with a version [3, 0] parent: wgmma "
                f"reads B from shared memory; only A (operand_index 0) can be in registers"
            )
        elif not _is_int(k_width) or not is_power_of_two(int(k_width)):
            raise ValueError(f"{owner}: k_width must be a power of two (32 // element bits), got {k_width!r}")
        self.operand_index = int(operand_index)
        self.parent = parent
        self.k_width = int(k_width)

    @property
    def rank(self) -> int:
        return self.parent.rank

    @property
    def num_warps(self) -> int:
        return self.parent.num_warps

    @property
    def cga_layout(self):
        """The parent's CTA bases (empty: one CTA; multi-CTA parents are rejected)."""
        return self.parent.cga_layout

    def to_linear_layout(self, shape: Sequence[int]) -> LinearLayout:
        if isinstance(self.parent, BlockedLayout):
            return self._fma_operand(check_shape("DotOperandLayout", shape, self.rank))
        shape = check_shape("DotOperandLayout", shape, 2)
        # K is the inner (register-contiguous) dimension and repeats first: dim1 for A,
        # dim0 for B (Triton's getOrderForDotOperand with kContig, also its repOrder).
        k_dim = 1 if self.operand_index == 0 else 0
        if self.operand_index == 0:
            tile = _mma_tile(16, 8 * self.k_width, self.k_width, inner=k_dim, rep_order=[1, 0])
        else:
            tile = _mma_tile(8, 8 * self.k_width, self.k_width, inner=k_dim, rep_order=[0, 1])
        warps = _warp_tiling(self.parent.warps_per_cta, self.parent.is_hopper, broadcast_dim=k_dim)
        return fit_to_shape(tile * warps, shape)

    def _fma_operand(self, shape: Sequence[int]) -> LinearLayout:
        """An operand of ``dot_fma``: the parent's blocked layout, with each thread holding
        the whole K extent in registers and lanes and warps along K broadcast (they share
        the row of A / column of B that their outputs need)."""
        parent, rank = self.parent, self.rank
        k_dim = rank - 1 if self.operand_index == 0 else rank - 2
        per_thread = list(parent.size_per_thread)
        per_thread[k_dim] = shape[k_dim]

        def over(in_dim: str, sizes: Sequence[int]) -> LinearLayout:
            layout = LinearLayout.empty()
            for d in parent.order:
                if d == k_dim:
                    layout = layout * LinearLayout.zeros_1d(sizes[d], in_dim, f"dim{d}")
                else:
                    layout = layout * LinearLayout.identity_1d(sizes[d], in_dim, f"dim{d}")
            return layout

        tile = (
            identity_nd("register", per_thread, parent.order)
            * over("lane", parent.threads_per_warp)
            * over("warp", parent.warps_per_cta)
        )
        return fit_to_shape(tile, shape)

    def _key(self) -> tuple:
        return (self.operand_index, self.parent, self.k_width)

    def __repr__(self) -> str:
        return f"DotOperandLayout(operand_index={self.operand_index}, parent={self.parent!r}, k_width={self.k_width})"
