"""Verifier rules of the shared-memory and synchronization ops.

Registered with :func:`gluonkit.ir.verifier.rule` on import (``gluonkit.ir`` imports this
module).  Views must keep the element type and layout they come from; every view op's
result type is the one :mod:`.memdesc` computes, so later stages can trust it.
"""

from __future__ import annotations

from .core import Operation
from .memdesc import alloc_elements, layout_problem
from .types import SharedMemoryDescType, TensorType, int1
from .verifier import rule
from .verify_checks import count_parts, fail, one_mbarrier, scalar_of

__all__ = []


def _desc(op: Operation, value, what: str) -> SharedMemoryDescType:
    if not isinstance(value.type, SharedMemoryDescType):
        fail(op, f"{what} must be a shared memory descriptor, got {value.type}")
    return value.type


def _same_buffer(op: Operation, src: SharedMemoryDescType, dst: SharedMemoryDescType) -> None:
    if dst.element != src.element:
        fail(op, f"result element type {dst.element} should be {src.element}")


# ---------------------------------------------------------------------- allocation
@rule("local_alloc")
def _local_alloc(op):
    if len(op.operands) > 1:
        fail(op, f"takes at most one operand (the initial value), got {len(op.operands)}")
    count_parts(op, None, 1)
    ty = _desc(op, op.results[0], "the result")
    problem = layout_problem(ty.layout, ty.shape)
    if problem:
        fail(op, problem)
    if ty.alloc_shape != ty.shape:
        fail(op, f"an allocation's alloc_shape {list(ty.alloc_shape)} must be its shape {list(ty.shape)}")
    if ty.element == int1:
        fail(op, "int1 cannot live in shared memory; store int8 (x.to(gl.int8))")
    if op.operands:
        _tensor_of(op, op.operands[0].type, ty, "the initial value")


# ------------------------------------------------------------------- loads, stores
def _tensor_of(op, ty, desc, what: str) -> None:
    """``ty`` must be a distributed tensor with the shape and element type of ``desc``."""
    if not isinstance(ty, TensorType) or ty.shape != desc.shape or ty.element != desc.element:
        fail(op, f"{what} must be a tensor of shape {list(desc.shape)} and type {desc.element}, got {ty}")


@rule("local_load")
def _local_load(op):
    count_parts(op, 1, 1)
    src = _desc(op, op.operands[0], "the operand")
    _tensor_of(op, op.results[0].type, src, "the result")


@rule("local_store")
def _local_store(op):
    count_parts(op, 2, 0)
    dst = _desc(op, op.operands[0], "the first operand")
    _tensor_of(op, op.operands[1].type, dst, "the stored value")


# -------------------------------------------------------------------------- views
@rule("memdesc_index")
def _memdesc_index(op):
    count_parts(op, 2, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    scalar_of(op, op.operands[1], lambda t: t.is_int() and not t.is_bool(), "the index")
    if src.num_stage_dims < 1:
        fail(op, f"the operand {src} has no leading stage dimension to index (its layout covers all "
                 f"{src.rank} dimensions); allocate with a leading [stages, ...] dimension")
    if (res.shape, res.alloc_shape, res.layout) != (src.shape[1:], src.alloc_shape[1:], src.layout):
        fail(op, f"result type should drop the leading dimension of {src}, got {res}")
    _same_buffer(op, src, res)


@rule("memdesc_slice")
def _memdesc_slice(op):
    count_parts(op, 1, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    start, length, dim = (op.attrs.get(k) for k in ("start", "length", "dim"))
    if not isinstance(dim, int) or not src.num_stage_dims <= dim < src.rank:
        fail(op, f"dim must be a tile dimension ({src.num_stage_dims} … {src.rank - 1}) of {src}, got {dim!r}; "
                 "index() a stage dimension instead of slicing it")
    if not isinstance(length, int) or length <= 0 or length & (length - 1):
        fail(op, f"length must be a positive power of two, got {length!r}")
    if not isinstance(start, int) or start < 0 or start % length or start + length > src.shape[dim]:
        fail(op, f"start must be a multiple of length {length} with start + length <= {src.shape[dim]}, "
                 f"got {start!r}")
    shape = src.shape[:dim] + (length,) + src.shape[dim + 1:]
    if (res.shape, res.alloc_shape, res.layout) != (shape, src.alloc_shape, src.layout):
        fail(op, f"result type should be the operand {src} with shape {list(shape)}, got {res}")
    _same_buffer(op, src, res)


@rule("memdesc_permute")
def _memdesc_permute(op):
    count_parts(op, 1, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    order = tuple(op.attrs.get("order", ()))
    if sorted(order) != list(range(src.rank)):
        fail(op, f"order must be a permutation of {list(range(src.rank))}, got {list(order)}")
    if src.num_stage_dims:
        fail(op, f"cannot permute {src}, whose leading dimensions are stages; index() them first")
    if res.shape != tuple(src.shape[o] for o in order) or res.alloc_shape != tuple(src.alloc_shape[o] for o in order):
        fail(op, f"result shape should be the permuted operand shape, got {res}")
    if res.layout.rank != src.rank:
        fail(op, f"result layout {res.layout!r} must have rank {src.rank}")
    _same_buffer(op, src, res)


@rule("memdesc_reshape")
def _memdesc_reshape(op):
    count_parts(op, 1, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    if src.shape != src.alloc_shape:
        fail(op, f"cannot reshape the sliced view {src}; reshape the whole buffer, then slice")
    if res.numel != src.numel or res.shape != res.alloc_shape or res.num_stage_dims:
        fail(op, f"result {res} must be the whole {src.numel}-element buffer, its layout covering every dimension")
    _same_buffer(op, src, res)


@rule("memdesc_reinterpret")
def _memdesc_reinterpret(op):
    count_parts(op, 1, 1)
    src = _desc(op, op.operands[0], "the operand")
    res = _desc(op, op.results[0], "the result")
    if src.shape != src.alloc_shape or res.shape != res.alloc_shape:
        fail(op, f"reinterpret works on whole (unsliced) views, got {src} -> {res}")
    problem = layout_problem(res.layout, res.shape)
    if problem:
        fail(op, problem)
    have = alloc_elements(src) * src.element.itemsize
    need = alloc_elements(res) * res.element.itemsize
    if need > have:
        fail(op, f"the new view needs {need} bytes but the buffer has {have}")


# -------------------------------------------------------------------- mbarriers
def _pred(op: Operation, value) -> None:
    scalar_of(op, value, lambda t: t == int1, "the predicate")


def _positive(op: Operation, name: str, allow_zero: bool = False) -> None:
    v = op.attrs.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < (0 if allow_zero else 1):
        fail(op, f"{name} must be a {'non-negative' if allow_zero else 'positive'} int, got {v!r}")


@rule("mbarrier_init")
def _mbarrier_init(op):
    count_parts(op, 1, 0)
    one_mbarrier(op, op.operands[0])
    _positive(op, "count")


@rule("mbarrier_expect")
def _mbarrier_expect(op):
    count_parts(op, 2, 0)
    one_mbarrier(op, op.operands[0])
    _pred(op, op.operands[1])
    _positive(op, "bytes", allow_zero=True)
    _routing(op)


@rule("mbarrier_arrive")
def _mbarrier_arrive(op):
    count_parts(op, 2, 0)
    one_mbarrier(op, op.operands[0])
    _pred(op, op.operands[1])
    _positive(op, "count")
    _routing(op)


def _routing(op) -> None:
    """``from_cta``, when present, is a non-negative int mask of CTA-rank bits."""
    mask = op.attrs.get("from_cta", 0)
    if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
        fail(op, f"from_cta must be a non-negative int mask of CTA-rank bits, got {mask!r}")


@rule("mbarrier_wait")
def _mbarrier_wait(op):
    if len(op.operands) < 3:
        fail(op, f"expects the barrier, the phase and the predicate, got {len(op.operands)} operands")
    count_parts(op, None, 0)
    one_mbarrier(op, op.operands[0])
    scalar_of(op, op.operands[1], lambda t: t.is_int() and not t.is_bool(), "the phase")
    _pred(op, op.operands[2])
    for dep in op.operands[3:]:
        _desc(op, dep, "every dep")


@rule("mbarrier_invalidate")
def _mbarrier_invalidate(op):
    count_parts(op, 1, 0)
    one_mbarrier(op, op.operands[0])


@rule("fence_async_shared")
def _fence_async_shared(op):
    count_parts(op, 0, 0)
    if op.attrs.get("cluster", True) is not True:
        fail(op, f"cluster, when present, must be True, got {op.attrs['cluster']!r}")


def _no_operands(op):
    count_parts(op, 0, 0)


rule("thread_barrier")(_no_operands)
