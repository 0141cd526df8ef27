"""The op catalogue: every IR op's name, operands, attributes, regions and results.

This is the single list of ops.  Each op must also have a verifier rule
(:mod:`gluonkit.ir.verifier`), an interpreter rule (:mod:`gluonkit.interpret`) and — once
the lowering exists — a lowering rule; a test checks that the registries agree with this
catalogue, so no op is half-added.

Conventions shared by all ops:

* *Element-wise* ops take scalars or tensors; tensor operands all have the same shape and
  the same layout, and the result has that shape and layout.  The frontend inserts
  ``splat``/``broadcast``/``cast`` to make operands agree (Triton's promotion rules), so
  the IR itself never converts implicitly.
* Integer division and remainder follow C (truncate toward zero; remainder has the sign of
  the dividend), as in Triton; float ``rem`` is ``fmod``.
* Attributes hold Python values: ints, strings, tuples, dtypes and layout objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

__all__ = ["OpDef", "OPS", "BINARY_FNS", "UNARY_FNS", "COMPARE_PREDICATES", "op_def"]


@dataclass(frozen=True)
class OpDef:
    """What one op is: its name and a human description of its signature."""

    name: str
    operands: str
    attrs: Tuple[str, ...]
    regions: str
    results: str
    doc: str


BINARY_FNS = ("add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr",
              "maximum", "minimum", "pow", "umulhi")
UNARY_FNS = ("neg", "not", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin",
             "cos", "floor", "ceil", "erf")
COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")

_CATALOGUE = [
    # -- values ---------------------------------------------------------------------------
    OpDef("constant", "", ("value",), "", "scalar or tensor",
          "A compile-time constant; a tensor result holds the value in every element."),
    OpDef("program_id", "", ("axis",), "", "int32", "This program's index along grid axis 0, 1 or 2."),
    OpDef("num_programs", "", ("axis",), "", "int32", "The grid's size along axis 0, 1 or 2."),
    OpDef("arange", "", ("start", "end"), "", "tensor<int32>",
          "The 1-D tensor start, start+1, …, end-1 in the result's layout."),
    OpDef("splat", "scalar", (), "", "tensor", "A tensor whose every element is the scalar."),
    # -- element-wise ----------------------------------------------------------------------
    OpDef("binary", "lhs, rhs", ("fn",), "", "like lhs",
          f"Element-wise binary arithmetic; fn is one of {', '.join(BINARY_FNS)}. "
          "``shr`` is arithmetic for signed and logical for unsigned integers; ``maximum``/"
          "``minimum`` take attr ``propagate_nan`` (``'none'`` or ``'all'``)."),
    OpDef("unary", "x", ("fn",), "", "like x",
          f"Element-wise unary math; fn is one of {', '.join(UNARY_FNS)}; ``not`` is bitwise."),
    OpDef("compare", "lhs, rhs", ("predicate",), "", "int1, shaped like lhs",
          f"Element-wise comparison; predicate is one of {', '.join(COMPARE_PREDICATES)}; "
          "signedness follows the operand type; float comparisons are ordered (NaN compares false except ne)."),
    OpDef("fma", "a, b, c", (), "", "like a", "Fused multiply-add a*b+c (floating point)."),
    OpDef("select", "cond, true_value, false_value", (), "", "like true_value",
          "Element-wise choice: where cond is true the first value, else the second."),
    OpDef("cast", "x", ("to", "bitcast", "rounding"), "", "x's shape and layout, element `to`",
          "Element type conversion: value-preserving (with ``rounding`` 'rtne' or 'rtz' for "
          "float narrowing), or a reinterpretation of the bits when ``bitcast``."),
    OpDef("addptr", "ptr, offset", (), "", "like ptr",
          "Pointer arithmetic: ptr + offset elements (offset is an integer scalar/tensor)."),
    # -- shapes and layouts ----------------------------------------------------------------
    OpDef("broadcast", "x", (), "", "tensor, same layout",
          "Repeats size-1 dimensions of x to the result's shape; the layout is unchanged."),
    OpDef("expand_dims", "x", ("axis",), "", "tensor of rank+1",
          "Inserts a size-1 dimension; x's layout is SliceLayout(axis, result layout)."),
    OpDef("reshape", "x", ("can_reorder",), "", "tensor, same number of elements",
          "Row-major reshape; with can_reorder the element order may change (Triton's semantics)."),
    OpDef("permute", "x", ("order",), "", "tensor", "Transposes dimensions: result dim i is x dim order[i]."),
    OpDef("split", "x", (), "", "two tensors",
          "Splits a tensor whose last dimension is 2 into its two halves (last dim removed)."),
    OpDef("join", "a, b", (), "", "tensor",
          "Stacks two equal tensors along a new last dimension of size 2."),
    OpDef("convert_layout", "x", (), "", "x in another layout",
          "Moves data between threads so the result has the result type's layout."),
    OpDef("set_auto_layout", "x", (), "", "x with a concrete layout",
          "Pins an AutoLayout value to the result's concrete layout (no data movement)."),
    OpDef("reduce", "x0 … xn-1", ("axis",), "combine(2n args) -> yield n", "n values",
          "Reduces n tensors of one shape along axis with the combine region; results are "
          "tensors in SliceLayout(axis, x's layout), or scalars when x is 1-D."),
    # -- memory ----------------------------------------------------------------------------
    OpDef("load", "ptr [, mask [, other]]", ("cache_modifier", "eviction_policy", "volatile", "has_mask", "has_other"),
          "", "tensor or scalar of ptr's element type",
          "Global memory load; masked-off elements take ``other`` (undefined without it)."),
    OpDef("store", "ptr, value [, mask]", ("cache_modifier", "eviction_policy", "has_mask"), "", "none",
          "Global memory store of the elements where mask is true."),
    # -- shared memory ---------------------------------------------------------------------
    OpDef("local_alloc", "[value]", (), "", "!smem",
          "Allocates a shared-memory buffer of the result type (a static region of the kernel's "
          "shared memory); with a value operand, stores it there (the value's shape is the result's)."),
    OpDef("local_load", "smem", (), "", "tensor",
          "Reads the view into a distributed tensor in the result type's layout."),
    OpDef("local_store", "smem, value", (), "", "none",
          "Writes a distributed tensor of the view's shape and element type into the view."),
    OpDef("memdesc_index", "smem, index", (), "", "!smem",
          "The index-th tile along the leading stage dimension (a runtime int32 scalar)."),
    OpDef("memdesc_slice", "smem", ("start", "length", "dim"), "", "!smem",
          "The elements start … start+length-1 along dim; length is a power of two dividing start."),
    OpDef("memdesc_permute", "smem", ("order",), "", "!smem",
          "The same buffer with dimensions reordered: result dim i is operand dim order[i]."),
    OpDef("memdesc_reshape", "smem", (), "", "!smem",
          "The same buffer seen with another shape (row-major, same number of elements)."),
    OpDef("memdesc_reinterpret", "smem", (), "", "!smem",
          "The same bytes seen with the result type's element type, shape and layout."),
    # -- synchronization -------------------------------------------------------------------
    OpDef("mbarrier_init", "bar", ("count",), "", "none",
          "Initializes the mbarrier: phase 0, expecting ``count`` arrivals."),
    OpDef("mbarrier_expect", "bar, pred", ("bytes",), "", "none",
          "Where pred holds, arrives once and adds ``bytes`` to the transactions the phase waits for."),
    OpDef("mbarrier_arrive", "bar, pred", ("count",), "", "none",
          "Where pred holds, arrives ``count`` times on the mbarrier."),
    OpDef("mbarrier_wait", "bar, phase, pred, deps…", (), "", "none",
          "Where pred holds, waits until the phase of parity ``phase`` (0 or 1) has completed; "
          "deps are the buffers the wait makes safe to use."),
    OpDef("mbarrier_invalidate", "bar", (), "", "none",
          "Invalidates the mbarrier so its memory can be reused."),
    OpDef("fence_async_shared", "", (), "", "none",
          "Orders earlier shared-memory writes of the threads before later async-proxy accesses "
          "(TMA, wgmma, tcgen05)."),
    OpDef("thread_barrier", "", (), "", "none",
          "Every thread of the program reaches it before any continues (``bar.sync 0``)."),
    # -- tensor cores ----------------------------------------------------------------------
    OpDef("warpgroup_mma", "a, b, acc, use_acc", ("precision", "max_num_imprecise_acc", "is_async"), "",
          "tensor like acc",
          "Hopper wgmma: a (M x K, shared memory or a DotOperandLayout tensor) times b (K x N, shared "
          "memory) plus acc (M x N, NVMMADistributedLayout v3) where the int1 scalar use_acc holds; with "
          "is_async the result is usable only after a warpgroup_mma_wait retires it."),
    OpDef("warpgroup_mma_wait", "deps…", ("num_outstanding",), "", "deps…",
          "Waits until at most num_outstanding asynchronous warpgroup_mma groups are in flight; returns "
          "its deps (accumulators and the buffers they read) as values that are safe to use."),
    # -- TMA ---------------------------------------------------------------------------------
    OpDef("async_tma_copy_global_to_shared", "desc, result, bar, pred, coord…", (), "", "none",
          "Where pred holds, starts copying the block of desc at element coordinates coord (int32, one per "
          "dimension) into the shared view result; out-of-bounds elements read as zero (NaN with padding "
          "'nan'); on arrival its bytes complete transactions on the mbarrier bar."),
    OpDef("async_tma_copy_shared_to_global", "desc, src, coord…", (), "", "none",
          "Starts copying the shared view src to the block of desc at coord (one bulk group); elements "
          "outside the tensor are not written. src must not change until a store_wait retires the group."),
    OpDef("async_tma_store_wait", "", ("pendings",), "", "none",
          "Waits until at most pendings shared-to-global copies still read their shared memory."),
    # -- control flow ----------------------------------------------------------------------
    OpDef("for", "lower, upper, step, init…", (), "body(iv, carried…) -> yield carried…", "carried…",
          "Counted loop with loop-carried values (runtime or constant bounds)."),
    OpDef("if", "cond", (), "then() -> yield v…; else() -> yield v…", "v…",
          "Two-way branch on a scalar int1; both regions yield values of the same types."),
    OpDef("while", "init…", (), "before(args…) -> condition; after(args…) -> yield args…", "args…",
          "Loop: the before region computes a condition and forwards values; while true, the after region runs."),
    OpDef("yield", "v…", (), "", "none", "Terminates for/if/while-after regions and reduce combine regions."),
    OpDef("condition", "cond, v…", (), "", "none", "Terminates a while's before region."),
    OpDef("return", "", (), "", "none", "Terminates a kernel."),
    # -- debugging and hints ---------------------------------------------------------------
    OpDef("device_print", "v…", ("prefix", "hex"), "", "none",
          "Prints values with a prefix, once per element and program (interpreter) / thread (GPU)."),
    OpDef("device_assert", "cond", ("message", "file", "line", "function"), "", "none",
          "Stops the kernel with message (and the user's file, line and function) where an element of cond "
          "(int1, scalar or tensor) is false."),
    OpDef("assume", "cond", (), "", "none", "Promises the compiler that cond (a scalar int1) holds."),
    OpDef("hint", "x", ("multiple_of", "max_contiguous"), "", "like x",
          "Passes x through, recording divisibility / contiguity facts (tuples per dimension) for vectorization."),
]

OPS: Dict[str, OpDef] = {d.name: d for d in _CATALOGUE}


def op_def(name: str) -> OpDef:
    """The catalogue entry of op ``name``."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"{name!r} is not an IR op; the catalogue has {sorted(OPS)}") from None
