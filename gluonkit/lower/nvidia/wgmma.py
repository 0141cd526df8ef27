"""Lowering of ``warpgroup_mma`` and ``warpgroup_mma_wait`` to Hopper ``wgmma`` (inline PTX).

One ``warpgroup_mma`` of ``[M, K] x [K, N]`` becomes, per warpgroup, ``wgmma.fence``, then
one ``wgmma.mma_async.sync.aligned.m64nNkK`` per 64-row block of M, per ``instr_shape`` N
block of N and per K step (32 bytes: 8 elements for tf32, 16 for 16-bit inputs, 32 for fp8), then
``wgmma.commit_group``, and — unless ``is_async`` — ``wgmma.wait_group 0``.

* Which accumulator registers an instruction updates comes from the accumulator's linear
  layout: the PTX fragment of ``m64nN`` (thread ``t`` of warp ``w`` holds row
  ``16 w + t / 4 (+ 8)``, columns ``2 (t % 4) + {0, 1} (+ 8 j)``) is looked up, element by
  element, among the layout's registers, so the registers go to the instruction in NVMMA
  order; they are tied outputs/inputs of the asm (``=f`` + ``0``…), PTX's ``+f``.  Warps
  beyond the first four (warp bits 2…) offset their warpgroup's tile, so each warpgroup
  computes its own rows (or columns).
* An A operand in registers (``DotOperandLayout``) is packed ``32 // bits`` elements per
  ``.b32`` register in the fragment order of the PTX ISA, found the same way (one float32
  per register for tf32, whose low 13 mantissa bits the tensor cores ignore).  The packed
  registers and the accumulator are then tied through the ``wgmma.fence`` asm (outputs
  that the MMAs read), as CUTLASS's ``warpgroup_fence_operand`` does: otherwise LLVM sinks
  the conversions that produce them (attention's fp32 → bf16 P) between the MMAs, and
  ptxas injects a ``warpgroup.arrive`` before every MMA that reads a register written
  after the fence (7 more per ``P V`` product at ``K = 128``).
* float32 inputs are ``.tf32`` operands and, like fp8, K-major only: those instructions take
  no transpose immediates (the verifier has refused MN-major views).
* Shared operands are read through descriptors (:mod:`.wgmma_descriptor`): fixed fields from
  the layout and the view's start address (plus the warpgroup's part of it, from the warp
  id) form one descriptor per operand and call; each instruction adds its tile's constant
  unswizzled offset (``>> 4``) to it (:class:`_SharedOperand` says why that is exact).
* ``use_acc`` is the ``scale-d`` predicate of the first K step; later steps accumulate.
* ``warpgroup_mma_wait`` is ``wgmma.wait_group N`` with every float32 register of its deps
  tied through it, so no later read of an accumulator can be scheduled before the wait.

``wgmma`` exists only on sm_90a; other targets stop with an error at the user's line.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import llvmlite.ir as lir

from ...ir import CompilationError, Operation, SharedMemoryDescType, TensorType
from ...ir.memdesc import cta_share_type
from ...ir.verify_wgmma import is_k_major, needs_k_major, wgmma_k_step
from ...layouts.linear import LinearLayout
from ..context import KernelLowering
from ..llvm_types import F32, I32, I64, struct_type
from ..registry import lowering
from ..ops.shared_memory import SharedPointer, order_access
from .wgmma_descriptor import OperandDescriptor, describe_operand

__all__: List[str] = []

_PTX_TYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32", "float8e4nv": "e4m3", "float8e5": "e5m2"}
_WARPGROUP_ROWS = 64


def _asm(ctx: KernelLowering, text: str, outputs: int, constraints: Sequence[str], inputs: Sequence[lir.Value]):
    """Inline asm with ``outputs`` float32 results tied to the first ``outputs`` inputs."""
    b = ctx.builder
    if outputs:
        ret = struct_type(ctx.module, F32, outputs)
        tied = [str(i) for i in range(outputs)]
        all_constraints = ["=f"] * outputs + tied + list(constraints) + ["~{memory}"]
    else:
        ret = lir.VoidType()
        all_constraints = list(constraints) + ["~{memory}"]
    fn_type = lir.FunctionType(ret, [v.type for v in inputs])
    result = b.asm(fn_type, text, ",".join(all_constraints), list(inputs), side_effect=True)
    return [b.extract_value(result, i) for i in range(outputs)]


def _fence_with(ctx: KernelLowering, values: List[lir.Value]) -> List[lir.Value]:
    """``wgmma.fence`` with ``values`` (``.b32`` and float32 registers) tied through it: each comes
    back as an output, so whatever computes them is ordered before the fence."""
    b = ctx.builder
    ret = lir.LiteralStructType([v.type for v in values])
    constraints = ["=r" if v.type == I32 else "=f" for v in values] + [str(i) for i in range(len(values))]
    fn_type = lir.FunctionType(ret, [v.type for v in values])
    result = b.asm(fn_type, "wgmma.fence.sync.aligned;", ",".join(constraints + ["~{memory}"]), values,
                   side_effect=True)
    return [b.extract_value(result, i) for i in range(len(values))]


def _register_map(ll: LinearLayout) -> Dict[Tuple[int, int], int]:
    """This thread's register holding each (row, col) offset of the warp-0, lane-0 frame."""
    coords: Dict[Tuple[int, int], int] = {}
    for r in range(ll.in_dim_size("register")):
        image = ll.apply({"register": r})
        coords.setdefault((image["dim0"], image["dim1"]), r)
    return coords


def _fragment(coords: Dict[Tuple[int, int], int], origin: Tuple[int, int], count: int, k_width: int,
              what: str, op: Operation) -> List[int]:
    """The registers of one instruction's fragment, in PTX order.

    Element ``i``: column ``i % k_width`` plus ``4 k_width`` per pair of row halves, rows
    ``+8`` every ``k_width`` elements (PTX: ``a0, a1`` / ``d0, d1`` row g, ``a2, a3`` row g+8, …).
    """
    regs = []
    for i in range(count):
        row = origin[0] + 8 * ((i // k_width) & 1)
        col = origin[1] + i % k_width + 4 * k_width * (i // (2 * k_width))
        if (row, col) not in coords:
            raise CompilationError(f"warpgroup_mma: {what}'s layout does not hold element ({row}, {col}) of the "
                                   "wgmma fragment in this thread's registers", op.loc)
        regs.append(coords[(row, col)])
    return regs


def _warp_part(ctx: KernelLowering, pairs: Sequence[Tuple[int, int]]) -> lir.Value:
    """XOR of ``value`` over the (warp bit, value) pairs whose bit is set in this thread's warp id."""
    b = ctx.builder
    part = I32(0)
    for bit, value in pairs:
        if value:
            is_set = b.and_(b.lshr(ctx.warp, I32(bit)), I32(1))
            part = b.xor(part, b.mul(is_set, I32(value)))
    return part


class _SharedOperand:
    """A shared operand's descriptor, built once per ``warpgroup_mma``, and each instruction's.

    The descriptor of the view's start (this warpgroup's part included) is formed once:
    ``base | (address >> 4)``.  An instruction's tile starts ``offset_of(mn, k)`` bytes
    later, a compile-time multiple of 16 (a canonical tile starts on a 16-byte core-matrix
    row, which :func:`.describe_operand` checked), so its descriptor is that one plus the
    constant ``offset >> 4``: one 64-bit add instead of a shift, mask, widen and or.  The
    add is exact because it cannot carry out of the 14-bit address field (bits 0–13):
    ``address + offset`` is a byte of the CTA's shared memory, below 228 KiB < 2**18, so
    ``(address + offset) >> 4 = (address >> 4) + (offset >> 4) < 2**14`` (the first
    equality because ``offset`` is a multiple of 16).
    """

    def __init__(self, ctx: KernelLowering, pointer: SharedPointer, plan: OperandDescriptor,
                 warp_offsets: Sequence[Tuple[int, int]]):
        self.plan = plan
        b = ctx.builder
        lin = [(bit, plan.offset_of(mn, 0) ^ plan.offset_of(0, 0)) for bit, mn in warp_offsets]
        address = b.add(b.ptrtoint(pointer.pointer, I32), _warp_part(ctx, lin))
        field = b.zext(b.and_(b.lshr(address, I32(4)), I32(0x3FFF)), I64)
        self.start = b.or_(field, I64(plan.base))

    def descriptor(self, ctx: KernelLowering, mn: int, k: int) -> lir.Value:
        offset = self.plan.offset_of(mn, k)
        assert offset % 16 == 0, f"wgmma tile offset {offset} is not a whole 16 bytes"  # describe_operand's check
        return ctx.builder.add(self.start, I64(offset >> 4)) if offset else self.start


def _pack(ctx: KernelLowering, values: List[lir.Value], k_width: int) -> List[lir.Value]:
    """``k_width`` elements per ``.b32`` register."""
    b = ctx.builder
    packed = []
    for j in range(0, len(values), k_width):
        group = values[j:j + k_width]
        vector = lir.Constant(lir.VectorType(group[0].type, k_width), None)
        for i, v in enumerate(group):
            vector = b.insert_element(vector, v, I32(i))
        packed.append(b.bitcast(vector, I32))
    return packed


@lowering("warpgroup_mma")
def _warpgroup_mma(ctx: KernelLowering, op: Operation) -> None:
    if ctx.target.arch != "sm_90a":
        raise CompilationError(f"warpgroup_mma: wgmma is a Hopper (sm_90a) instruction; {ctx.target.arch} has "
                               "no wgmma (Blackwell uses tcgen05.mma); compile for target='sm_90a'", op.loc)
    a, b_value, acc, use_acc = op.operands
    acc_ty: TensorType = acc.type
    element = a.type.element
    n_inst, k_inst = acc_ty.layout.instr_shape[1], wgmma_k_step(element)
    k_width = 32 // element.primitive_bitwidth
    acc_ll = ctx.linear_layout(acc_ty)
    acc_coords = _register_map(acc_ll)
    origins = sorted({(row - row % 16, col - col % n_inst) for row, col in acc_coords})
    warp_bases = acc_ll.bases.get("warp", [])[2:]  # warps 0-3 form the warpgroup; the rest offset it
    order_access(ctx, op)

    # In a cluster, a view split between CTAs is read as this CTA's share (the accumulator's
    # registers hold this CTA's share too: ``_register_map`` reads the block-0 frame).
    b_type = cta_share_type(b_value.type)
    b_plan = describe_operand(b_type, 1, ctx.get(b_value).xor, ctx.get(b_value).align, n_inst, k_inst, op.loc)
    b_smem = _SharedOperand(ctx, ctx.get(b_value), b_plan,
                            [(2 + j, basis[1]) for j, basis in enumerate(warp_bases)])
    trans_b = 0 if is_k_major(b_type, 1) else 1
    if isinstance(a.type, SharedMemoryDescType):
        a_type = cta_share_type(a.type)
        a_plan = describe_operand(a_type, 0, ctx.get(a).xor, ctx.get(a).align, _WARPGROUP_ROWS, k_inst, op.loc)
        a_smem = _SharedOperand(ctx, ctx.get(a), a_plan, [(2 + j, basis[0]) for j, basis in enumerate(warp_bases)])
        trans = f", {0 if is_k_major(a_type, 0) else 1}, {trans_b}"
    else:
        a_smem = None
        a_coords = _register_map(ctx.linear_layout(a.type))
        a_regs = ctx.get(a)
        trans = f", {trans_b}"
    if needs_k_major(element):
        trans = ""  # tf32/fp8 wgmma reads K-major operands only and takes no transpose immediates
    ptx_type = _PTX_TYPES[element.name]
    instruction = f"wgmma.mma_async.sync.aligned.m64n{n_inst}k{k_inst}.f32.{ptx_type}.{_PTX_TYPES[b_value.type.element.name]}"
    n_acc = n_inst // 2
    outs = "{" + ", ".join(f"${i}" for i in range(n_acc)) + "}"

    b = ctx.builder
    scale_first = b.zext(ctx.get(use_acc), I32)
    values = list(ctx.get(acc))
    steps = range(a.type.shape[1] // k_inst)
    if a_smem is None:  # pack every A fragment, then tie them and the accumulator through the fence
        rows = sorted({m0 for m0, _ in origins})
        packed = {(m0, step): _pack(ctx, [a_regs[r] for r in _fragment(a_coords, (m0, step * k_inst), k_inst // 2,
                                                                        k_width, "a", op)], k_width)
                  for m0 in rows for step in steps}
        keys = list(packed)
        fenced = iter(_fence_with(ctx, [r for key in keys for r in packed[key]] + values))
        packed = {key: [next(fenced) for _ in packed[key]] for key in keys}
        values = list(fenced)
    else:
        _asm(ctx, "wgmma.fence.sync.aligned;", 0, [], [])
    for m0, n0 in origins:
        regs = _fragment(acc_coords, (m0, n0), n_acc, 2, "acc", op)
        for step in steps:
            k0 = step * k_inst
            slot = 2 * n_acc
            if a_smem is not None:
                a_inputs, a_text, a_constraints = [a_smem.descriptor(ctx, m0, k0)], f"${slot}", ["l"]
            else:
                a_inputs = packed[(m0, step)]
                a_text = "{" + ", ".join(f"${slot + i}" for i in range(len(a_inputs))) + "}"
                a_constraints = ["r"] * len(a_inputs)
            slot += len(a_inputs)
            text = (f"{{ .reg .pred scale_d; setp.ne.b32 scale_d, ${slot + 1}, 0; "
                    f"{instruction} {outs}, {a_text}, ${slot}, scale_d, 1, 1{trans}; }}")
            inputs = [values[r] for r in regs] + a_inputs + [b_smem.descriptor(ctx, n0, k0),
                                                             scale_first if step == 0 else I32(1)]
            results = _asm(ctx, text, n_acc, a_constraints + ["l", "r"], inputs)
            for r, v in zip(regs, results):
                values[r] = v
    _asm(ctx, "wgmma.commit_group.sync.aligned;", 0, [], [])
    if not op.attrs["is_async"]:
        values = _wait(ctx, 0, [values])[0]
    ctx.set(op.results[0], values)


def _wait(ctx: KernelLowering, pending: int, register_lists: List[List[lir.Value]]) -> List[List[lir.Value]]:
    """``wgmma.wait_group pending`` with the float32 registers of ``register_lists`` tied through it."""
    flat = [(i, j) for i, regs in enumerate(register_lists) for j, v in enumerate(regs) if v.type == F32]
    results = _asm(ctx, f"wgmma.wait_group.sync.aligned {pending};", len(flat), [],
                   [register_lists[i][j] for i, j in flat])
    out = [list(regs) for regs in register_lists]
    for (i, j), v in zip(flat, results):
        out[i][j] = v
    return out


@lowering("warpgroup_mma_wait")
def _warpgroup_mma_wait(ctx: KernelLowering, op: Operation) -> None:
    tensors = [i for i, v in enumerate(op.operands) if isinstance(v.type, TensorType)]
    waited = _wait(ctx, op.attrs["num_outstanding"], [ctx.get(op.operands[i]) for i in tensors])
    lowered = {i: regs for i, regs in zip(tensors, waited)}
    for i, (dep, result) in enumerate(zip(op.operands, op.results)):
        ctx.set(result, lowered[i] if i in lowered else ctx.get(dep))

