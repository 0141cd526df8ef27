"""The state of lowering one kernel: its LLVM function, builders and lowered values.

A scalar IR value lowers to one LLVM value.  A distributed tensor lowers to a Python list
of LLVM values, one per register of its layout, in register order (register ``r`` holds
the element at ``L(register=r, lane, warp)`` of the layout's linear layout ``L``).  Thread
coordinates are computed from ``%tid.x`` once, in the kernel's prologue block.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import llvmlite.ir as lir
from llvmlite.ir.values import FunctionAttributes

from ..ir import Function, Operation, TensorDescType, TensorType, Value, int1
from ..ir.warp_specialize import kernel_warps
from ..layouts.linear import LinearLayout
from .axis_info import AxisInfo, analyze_axis_info
from .memplan.barriers import plan_barriers
from .debug_info import DebugInfo
from .llvm_types import I1, I8, I32, TensorMapParamAttributes, llvm_type
from .backend.nvptx import new_module
from .memplan.smem import plan_shared_memory
from .instrument import instrumentation_for
from .backend.targets import Target

__all__ = ["KernelLowering", "Lowered"]

Lowered = "lir.Value | List[lir.Value]"


class _KernelAttributes(FunctionAttributes):
    """Function attributes that also accept LLVM string attributes (``"nvvm.maxntid"="128"``)."""

    def add(self, name: str) -> None:
        if name.startswith('"'):
            set.add(self, name)
        else:
            super().add(name)


class KernelLowering:
    """Everything the lowering rules share while one :class:`~gluonkit.ir.Function` lowers."""

    def __init__(self, func: Function, target: Target, instrument=False):
        self.func = func
        self.target = target
        self.module = new_module(func.name)
        # int1 parameters travel as one byte (the runtime packs bools as u8).
        fn_type = lir.FunctionType(lir.VoidType(), [I8 if a.type == int1 else llvm_type(a.type) for a in func.args])
        self.fn = lir.Function(self.module, fn_type, name=func.name)
        self.fn.calling_convention = "ptx_kernel"
        self.fn.attributes = _KernelAttributes()
        self.fn.attributes.add(f'"nvvm.maxntid"="{self.num_threads}"')
        if func.maxnreg is not None:  # the launch's register cap: PTX .maxnreg on the entry
            self.fn.attributes.add(f'"nvvm.maxnreg"="{func.maxnreg}"')
        if func.num_ctas > 1:  # PTX .explicitcluster / .reqnctapercluster: the launch needs no cluster attribute
            self.fn.attributes.add(f'"nvvm.cluster_dim"="{func.num_ctas},1,1"')
        self.debug = DebugInfo(self.module, self.fn, func.loc)
        prologue_block = self.fn.append_basic_block("prologue")
        body_block = self.fn.append_basic_block("body")
        self.prologue = lir.IRBuilder(prologue_block)
        self.prologue.position_before(self.prologue.branch(body_block))
        self.builder = lir.IRBuilder(body_block)
        self.values: Dict[int, object] = {}
        for value, arg in zip(func.args, self.fn.args):
            arg.name = value.name_hint or ""
            if isinstance(value.type, TensorDescType):
                arg.attributes = TensorMapParamAttributes()
            self.values[value.uid] = self.prologue.trunc(arg, I1) if value.type == int1 else arg
        tid = self.prologue.call(self.intrinsic("llvm.nvvm.read.ptx.sreg.tid.x", I32, []), [], name="tid")
        self.lane = self.prologue.and_(tid, I32(31), name="lane")
        self.warp = self.prologue.lshr(tid, I32(5), name="warp")
        self._cluster_leader: Dict[int, lir.Value] = {}  # by the rank bits that must be zero
        self._cta_rank: Optional[lir.Value] = None
        self._thread_parts: Dict[LinearLayout, Tuple[lir.Value, ...]] = {}
        self._axis_info = None
        # The buffers' and scratch uses' regions of global_smem (memplan/smem.py), and all of it the kernel needs.
        self.shared_plan = plan_shared_memory(func)
        self.shared_bytes = self.shared_plan.size
        self.barrier_plan = plan_barriers(func, self.shared_plan)  # where shared-memory accesses need bar.sync
        # The op whose scratch region scratch accesses use, and that region's offset (memplan/scratch.py).
        self.scratch_op: Optional[Operation] = None
        self.scratch_start = 0
        # Other CTAs of the cluster may still read this CTA's scratch: the cluster barrier's wait is
        # still to come (memplan/scratch.py, release_scratch_to_peers).
        self.cluster_wait_pending = False
        # The named barrier ``bar.sync`` uses in the code being lowered: (id, threads), threads None for the whole
        # CTA.  Warp specialization (ops/warp_specialize.py) gives each partition its own.
        self.sync_group: Tuple[int, object] = (0, None)
        self.warp_specialization = None  # the dispatch state, in kernels with warp_specialize ops
        # Measured-timeline records around the pipeline's ops (lower/instrument.py), or None.
        self.instrumentation = instrumentation_for(instrument, self.module, self.prologue, self.lane)
        self.tmem = None  # the kernel's tensor-memory allocation, in kernels that use it (nvidia/tmem.py)
        self.before_return: List = []  # callables(ctx) that emit code before the kernel's ``ret``

    def axis_info(self, value: Value) -> AxisInfo:
        """Contiguity/divisibility/constancy facts of ``value`` (analysed on first use)."""
        if self._axis_info is None:
            self._axis_info = analyze_axis_info(self.func)
        return self._axis_info.get(value.uid) or AxisInfo.unknown(len(getattr(value.type, "shape", ())))

    @property
    def num_threads(self) -> int:
        """The CTA's threads: the kernel's warps and those of its warp-specialize partitions."""
        return 32 * kernel_warps(self.func)

    # -------------------------------------------------------------------- values
    def get(self, value: Value):
        """The lowered form of ``value`` (an LLVM value, or a list of them for tensors)."""
        return self.values[value.uid]

    def set(self, value: Value, lowered) -> None:
        if isinstance(value.type, TensorType):
            expected = self.num_registers(value.type)
            if not isinstance(lowered, list) or len(lowered) != expected:
                got = len(lowered) if isinstance(lowered, list) else "a scalar"
                raise AssertionError(f"{value} lowered to {got} registers, expected {expected}")
        self.values[value.uid] = lowered

    def linear_layout(self, ty: TensorType) -> LinearLayout:
        return ty.layout.to_linear_layout(list(ty.shape))

    def num_registers(self, ty: TensorType) -> int:
        return self.linear_layout(ty).in_dim_size("register")

    # ------------------------------------------------------------------- helpers
    def intrinsic(self, name: str, ret: lir.Type, args: Sequence[lir.Type]) -> lir.Function:
        """The declaration of LLVM function ``name`` (declared on first use)."""
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        return lir.Function(self.module, lir.FunctionType(ret, list(args)), name=name)

    def program_index(self, axis: str, count: bool = False) -> lir.Value:
        """The program id along ``axis`` ("x", "y", "z"), or with ``count`` the number of programs.

        A program is a cluster: along x the launch grid has ``num_ctas`` CTAs per program, so
        the CTA index is shifted down, as Triton 3.9 does."""
        register = "nctaid" if count else "ctaid"
        value = self.builder.call(self.intrinsic(f"llvm.nvvm.read.ptx.sreg.{register}.{axis}", I32, []), [])
        if axis == "x" and self.func.num_ctas > 1:
            value = self.builder.lshr(value, I32(self.func.num_ctas.bit_length() - 1))
        return value

    def cta_rank(self) -> lir.Value:
        """i32: this CTA's rank in its cluster (``%cluster_ctarank``), read once in the prologue."""
        if self._cta_rank is None:
            self._cta_rank = self.prologue.call(self.intrinsic("llvm.nvvm.read.ptx.sreg.cluster.ctarank", I32, []),
                                                [], name="cta_rank")
        return self._cta_rank

    def cluster_leader(self, ll: Optional[LinearLayout] = None) -> lir.Value:
        """i1: this CTA writes the elements it holds (always true without a cluster).

        A tensor replicated on the CTAs of a cluster is written by rank 0 only, as Triton does
        for CTA-replicated layouts; with ``ll`` (a layout whose ``block`` bases may split the
        tensor) the CTAs that differ only in split bits each write their own share, so the
        predicate is "the rank's replicated bits are zero"."""
        if self.func.num_ctas == 1:
            return I1(1)
        bases = ll.bases.get("block", []) if ll is not None and ll.has_in_dim("block") else []
        replicated = (self.func.num_ctas - 1) & ~sum(1 << i for i, v in enumerate(bases) if any(v))
        if replicated not in self._cluster_leader:
            bits = self.prologue.and_(self.cta_rank(), I32(replicated))
            self._cluster_leader[replicated] = self.prologue.icmp_unsigned("==", bits, I32(0), name="cluster_leader")
        return self._cluster_leader[replicated]

    def thread_part(self, ll: LinearLayout) -> Tuple[lir.Value, ...]:
        """Per output dim, the XOR of the lane and warp bases of this thread (i32).

        Computed once per linear layout in the prologue, so every use is dominated.
        """
        if ll not in self._thread_parts:
            b = self.prologue
            parts: List[lir.Value] = [I32(0)] * len(ll.out_dims)
            threads = [("lane", self.lane), ("warp", self.warp)]
            if ll.has_in_dim("block") and any(any(v) for v in ll.bases["block"]):
                threads.append(("block", self.cta_rank()))  # a layout split between the CTAs of a cluster
            for dim_name, index in threads:
                if not ll.has_in_dim(dim_name):
                    continue
                for bit, basis in enumerate(ll.bases[dim_name]):
                    if not any(basis):
                        continue
                    is_set = b.and_(b.lshr(index, I32(bit)), I32(1))
                    for d, coordinate in enumerate(basis):
                        if coordinate:
                            parts[d] = b.xor(parts[d], b.mul(is_set, I32(coordinate)))
            self._thread_parts[ll] = tuple(parts)
        return self._thread_parts[ll]

    def element_coordinates(self, ty: TensorType) -> List[List[lir.Value]]:
        """For each register of a tensor of type ``ty``, its element's coordinates (i32 per dim)."""
        return self.register_images(self.linear_layout(ty))

    def register_images(self, ll: LinearLayout) -> List[List[lir.Value]]:
        """For each register index of ``ll``, this thread's image under ``ll`` (i32 per output)."""
        parts = self.thread_part(ll)
        # Disjoint bit sets: XOR equals ADD, which LLVM folds into addressing.
        combine = self.builder.add if _register_and_thread_bits_disjoint(ll) else self.builder.xor
        images = []
        for r in range(ll.in_dim_size("register")):
            constant = ll.apply({"register": r})
            images.append([
                combine(part, I32(constant[d])) if constant[d] else part
                for d, part in zip(ll.out_dims, parts)
            ])
        return images

def _register_and_thread_bits_disjoint(ll: LinearLayout) -> bool:
    """True when, in every output dim, register bases and thread bases set different bits.

    Then XOR-ing the register part and the thread part of a coordinate equals adding them,
    and ``add`` lets LLVM fold constant register offsets into addressing modes.
    """
    for d in range(len(ll.out_dims)):
        register_bits = 0
        for basis in ll.bases.get("register", []):
            register_bits |= basis[d]
        thread_bits = 0
        for dim_name in ("lane", "warp", "block"):
            for basis in ll.bases.get(dim_name, []):
                thread_bits |= basis[d]
        if register_bits & thread_bits:
            return False
    return True
