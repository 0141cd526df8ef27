"""Lowering of shape and layout ops: broadcast, expand_dims, permute, reshape, split,
join, convert_layout and set_auto_layout.

Each of these says which source element every result element is: a linear map ``F`` from
result coordinates to source coordinates (plus a constant for ``split``).  When the
source layout and ``F``∘result layout agree on the lane and warp bases, every thread
already holds what it needs and the op is a *register gather*: result register ``r`` is
source register ``s`` with ``S(s) = F(R(r))``, solved over GF(2).  Otherwise data moves
between threads, which only ``convert_layout`` may do, by the plan of
:func:`~gluonkit.layouts.conversion.plan_conversion`: warp shuffles when only lanes of a
warp exchange data, otherwise a round trip through (swizzled) scratch shared memory.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

from ...ir import CompilationError, Operation, TensorType
from ...layouts.linear import LinearLayout
from ..memplan import scratch as scratch
from ..context import KernelLowering
from ..llvm_types import I1, I8, llvm_type
from ..registry import lowering
from ..memplan.scratch_size import conversion_plan
from ..memplan.scratch_use import converts_through_scratch
from .convert_across_ctas import convert_across_ctas
from .shuffle import shuffle

__all__ = ["gather_registers", "coordinate_map"]

_THREAD_DIMS = ("lane", "warp", "block")


def _dims(n: int) -> List[str]:
    return [f"dim{i}" for i in range(n)]


def coordinate_map(result_shape: Sequence[int], source_shape: Sequence[int],
                   source_dim_of: Sequence[Optional[int]]) -> LinearLayout:
    """The linear map sending result dim ``i`` to source dim ``source_dim_of[i]`` (None: dropped)."""
    bases = {}
    for i, size in enumerate(result_shape):
        vectors = []
        for bit in range(size.bit_length() - 1):
            v = [0] * len(source_shape)
            target = source_dim_of[i]
            if target is not None:
                v[target] = 1 << bit
            vectors.append(v)
        bases[f"dim{i}"] = vectors
    return LinearLayout(bases, dict(zip(_dims(len(source_shape)), source_shape)))


def _reshape_map(result_shape: Sequence[int], source_shape: Sequence[int]) -> LinearLayout:
    """Row-major reshape as a linear map (last dimension fastest, like numpy)."""
    rank = len(result_shape)
    identity = coordinate_map(result_shape, result_shape, list(range(rank)))
    flat = identity.transpose_outs(list(reversed(_dims(rank)))).reshape_outs([("flat", identity.total_out_size())])
    reversed_src = [(f"dim{i}", source_shape[i]) for i in reversed(range(len(source_shape)))]
    return flat.reshape_outs(reversed_src).transpose_outs(_dims(len(source_shape)))


def gather_registers(ctx: KernelLowering, source_ty: TensorType, source: list, result_ty: TensorType,
                     coordinates: LinearLayout, constant: Sequence[int] = ()) -> Optional[list]:
    """Result registers picked from this thread's source registers, or None if impossible.

    ``coordinates`` maps result coordinates to source coordinates; ``constant`` (one int per
    source dim) is XOR-ed onto the image.
    """
    src_ll = ctx.linear_layout(source_ty)
    wanted = ctx.linear_layout(result_ty).compose(coordinates)
    for dim in _THREAD_DIMS:
        if wanted.bases.get(dim, []) != src_ll.bases.get(dim, []):
            return None
    find = _register_finder(src_ll.sublayout(["register"], src_ll.out_dims))
    constant = list(constant) or [0] * len(src_ll.out_dims)
    picked = []
    for r in range(wanted.in_dim_size("register")):
        target = wanted.apply({"register": r})
        index = find([target[d] ^ c for d, c in zip(src_ll.out_dims, constant)])
        if index is None:
            return None
        picked.append(source[index])
    return picked


def _register_finder(src_regs: LinearLayout):
    """A function of a coordinate list returning the first register index ``s`` with
    ``src_regs(s) == coordinates``, or None; the layout's table is built once, not per register."""
    first: dict = {}
    for index, row in enumerate(map(tuple, src_regs.table().tolist())):
        first.setdefault(row, index)
    return lambda coordinates: first.get(tuple(coordinates))


def _gather_or_fail(ctx: KernelLowering, op: Operation, coordinates: LinearLayout, source_index: int = 0,
                    constant: Sequence[int] = ()) -> list:
    source = op.operands[source_index]
    result = op.results[0] if len(op.results) == 1 else None
    picked = gather_registers(ctx, source.type, ctx.get(source), (result or op.results[0]).type, coordinates, constant)
    if picked is None:
        raise CompilationError(
            f"{op.name} from {source.type.layout!r} to {op.results[0].type.layout!r} would move data between "
            "threads; convert_layout the operand to a layout that keeps each element in its thread", op.loc)
    return picked


@lowering("broadcast")
def _broadcast(ctx: KernelLowering, op: Operation) -> None:
    src_shape, res_shape = op.operands[0].type.shape, op.results[0].type.shape
    kept = [i if s == r else None for i, (s, r) in enumerate(zip(src_shape, res_shape))]
    ctx.set(op.results[0], _gather_or_fail(ctx, op, coordinate_map(res_shape, src_shape, kept)))


@lowering("expand_dims")
def _expand_dims(ctx: KernelLowering, op: Operation) -> None:
    axis = op.attrs["axis"]
    res_shape = op.results[0].type.shape
    source_dim_of = [None if i == axis else (i if i < axis else i - 1) for i in range(len(res_shape))]
    ctx.set(op.results[0], _gather_or_fail(ctx, op, coordinate_map(res_shape, op.operands[0].type.shape, source_dim_of)))


@lowering("permute")
def _permute(ctx: KernelLowering, op: Operation) -> None:
    order = op.attrs["order"]
    ctx.set(op.results[0], _gather_or_fail(ctx, op, coordinate_map(op.results[0].type.shape, op.operands[0].type.shape, order)))


@lowering("reshape")
def _reshape(ctx: KernelLowering, op: Operation) -> None:
    ctx.set(op.results[0], _gather_or_fail(ctx, op, _reshape_map(op.results[0].type.shape, op.operands[0].type.shape)))


@lowering("split")
def _split(ctx: KernelLowering, op: Operation) -> None:
    src_shape = op.operands[0].type.shape
    res_shape = op.results[0].type.shape
    mapping = coordinate_map(res_shape, src_shape, list(range(len(res_shape))))
    for half, result in enumerate(op.results):
        constant = [0] * (len(src_shape) - 1) + [half]
        picked = gather_registers(ctx, op.operands[0].type, ctx.get(op.operands[0]), result.type, mapping, constant)
        if picked is None:
            raise CompilationError("split needs its last dimension held in registers; convert_layout first", op.loc)
        ctx.set(result, picked)


@lowering("join")
def _join(ctx: KernelLowering, op: Operation) -> None:
    result_ty = op.results[0].type
    ll = ctx.linear_layout(result_ty)
    last = len(result_ty.shape) - 1
    if any(v[last] for dim in _THREAD_DIMS for v in ll.bases.get(dim, [])):
        raise CompilationError("join needs the new last dimension held in registers of the result layout", op.loc)
    # Per half, pick the result registers whose last coordinate is that half.
    values = [None] * ll.in_dim_size("register")
    mapping = coordinate_map(result_ty.shape, op.operands[0].type.shape, list(range(last)) + [None])
    wanted = ll.compose(mapping)
    for half, operand in enumerate(op.operands):
        src_ll = ctx.linear_layout(operand.type)
        if any(wanted.bases.get(d, []) != src_ll.bases.get(d, []) for d in _THREAD_DIMS):
            raise CompilationError("join operands' layout must be the result layout's slice of the last dim", op.loc)
        find = _register_finder(src_ll.sublayout(["register"], src_ll.out_dims))
        for r in range(len(values)):
            if ll.apply({"register": r})[f"dim{last}"] == half:
                target = wanted.apply({"register": r})
                values[r] = ctx.get(operand)[find([target[d] for d in src_ll.out_dims])]
    ctx.set(op.results[0], values)


@lowering("set_auto_layout")
def _set_auto_layout(ctx: KernelLowering, op: Operation) -> None:
    ctx.set(op.results[0], _gather_or_fail(ctx, op, coordinate_map(op.results[0].type.shape, op.operands[0].type.shape, list(range(len(op.results[0].type.shape))))))


@lowering("convert_layout")
def _convert_layout(ctx: KernelLowering, op: Operation) -> None:
    """Convert by the plan of :func:`~gluonkit.layouts.conversion.plan_conversion`."""
    source, result = op.operands[0], op.results[0]
    element = llvm_type(result.type)
    plan = conversion_plan(op)  # the plan the shared-memory planner sized its scratch by
    values = ctx.get(source)
    if plan.kind == "cluster_exchange":
        converted = convert_across_ctas(ctx, op, plan, values, element)
    elif converts_through_scratch(plan):
        converted = _through_shared_memory(ctx, op, plan, values, element)
    elif plan.kind == "identical":
        converted = list(values)
    elif plan.kind == "register_permutation":
        converted = [values[i] for i in plan.src_registers]
    else:  # warp_shuffle
        lanes = ctx.register_images(plan.lane_source)
        converted = [shuffle(ctx, "idx", values[i], lane[0]) for i, lane in zip(plan.src_registers, lanes)]
    ctx.set(result, converted)


def _through_shared_memory(ctx: KernelLowering, op: Operation, plan, values: list, element) -> list:
    """Store the source registers into the plan's scratch layout, then load the result's."""
    memory_type = I8 if element == I1 else element
    scratch.begin_use(ctx, op)
    store_offsets = ctx.register_images(plan.store_offsets)
    for group in plan.store.vector.register_groups():
        group_values = [values[r] for r in group]
        if element == I1:
            group_values = [ctx.builder.zext(v, I8) for v in group_values]
        scratch.store_vector(ctx, group_values, store_offsets[group[0]][0])
    scratch.barrier(ctx)
    load_offsets = ctx.register_images(plan.load_offsets)
    loaded = {}
    for group in plan.load.vector.register_groups():
        for r, v in zip(group, scratch.load_vector(ctx, memory_type, len(group), load_offsets[group[0]][0])):
            loaded[int(r)] = ctx.builder.trunc(v, I1) if element == I1 else v
    # Registers whose bits only repeat data (broadcast) take the value of their representative.
    distinct = 0
    for bit in plan.load.vector.register_bits + plan.load.vector.other_bits:
        distinct |= 1 << bit
    return [loaded[r & distinct] for r in range(plan.dst.in_dim_size("register"))]
