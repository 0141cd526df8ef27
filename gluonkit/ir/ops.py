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

__all__ = ["OpDef", "OPS", "BINARY_FNS", "UNARY_FNS", "COMPARE_PREDICATES", "PACKED_FNS", "ATOMIC_FNS",
           "MEMORY_SEMANTICS", "MEMORY_SCOPES", "op_def"]


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
              "maximum", "minimum", "pow", "umulhi", "div_rn", "div_approx")
UNARY_FNS = ("neg", "not", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin",
             "cos", "floor", "ceil", "erf", "sqrt_rn")
COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
PACKED_FNS = ("add", "sub", "mul", "fma", "min", "max")
ATOMIC_FNS = ("add", "and", "or", "xor", "max", "min", "xchg")
MEMORY_SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
MEMORY_SCOPES = ("cta", "gpu", "sys")

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
          "``minimum`` take attr ``propagate_nan`` (``'none'`` or ``'all'``); float ``div`` may be off by 2 ulp "
          "on the GPU, ``div_rn`` is IEEE round-to-nearest and ``div_approx`` the fast approximation."),
    OpDef("unary", "x", ("fn",), "", "like x",
          f"Element-wise unary math; fn is one of {', '.join(UNARY_FNS)}; ``not`` is bitwise; "
          "``sqrt`` may be approximate on the GPU, ``sqrt_rn`` is IEEE round-to-nearest."),
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
    # -- scans, histograms, gathers and mapped functions (Gluon 3.9 builtins) --------------
    OpDef("scan", "x0 … xn-1", ("axis", "reverse"), "combine(2n args) -> yield n", "n tensors like x",
          "Inclusive associative scan of n tensors of one shape and layout along axis with the "
          "combine region (from the last element towards the first when reverse); results keep "
          "the operands' shape and layout."),
    OpDef("histogram", "x [, mask]", ("num_bins", "has_mask"), "", "tensor<int32>[num_bins]",
          "Counts of the values 0 … num_bins-1 in the 1-D integer tensor x (where mask holds); "
          "other values are not counted. The result has the result type's layout."),
    OpDef("gather", "src, index", ("axis",), "", "tensor of index's shape and layout, src's element",
          "result[i…] = src[i… with coordinate axis replaced by index[i…]]; index has src's rank "
          "and src's size in every dimension but axis."),
    OpDef("map_elementwise", "x0 … xn-1", ("pack",), "fn(n*pack scalars) -> yield m*pack", "m tensors",
          "Applies the region to every group of pack consecutive elements (in each thread's register "
          "order) of n tensors of one shape and layout; results have that shape and layout."),
    OpDef("dot_fma", "a, b, acc", (), "", "tensor like acc",
          "acc + a @ b with one fma per product, k ascending, in acc's element type: a is (batch…, M, K), "
          "b (batch…, K, N), acc (batch…, M, N); each thread holds the whole K extent of the rows and "
          "columns of its acc elements (Gluon's dot-operand layouts over a blocked acc layout)."),
    # -- memory ----------------------------------------------------------------------------
    OpDef("load", "ptr [, mask [, other]]", ("cache_modifier", "eviction_policy", "volatile", "has_mask", "has_other"),
          "", "tensor or scalar of ptr's element type",
          "Global memory load; masked-off elements take ``other`` (undefined without it)."),
    OpDef("store", "ptr, value [, mask]", ("cache_modifier", "eviction_policy", "has_mask"), "", "none",
          "Global memory store of the elements where mask is true."),
    # -- atomics and inline assembly -------------------------------------------------------
    OpDef("atomic_rmw", "ptr, val [, mask]", ("fn", "sem", "scope", "has_mask"), "", "like val",
          f"Atomic read-modify-write of global memory, once per element where mask is true; fn is one of "
          f"{', '.join(ATOMIC_FNS)} (max/min signed or unsigned by type); returns the old values. sem is one of "
          f"{', '.join(MEMORY_SEMANTICS)}, scope one of {', '.join(MEMORY_SCOPES)}."),
    OpDef("atomic_cas", "ptr, cmp, val", ("sem", "scope"), "", "like val",
          "Atomic compare-and-swap: where memory holds cmp it becomes val; returns the old values."),
    OpDef("atomic_load", "ptr [, mask]", ("sem", "scope", "has_mask"), "", "tensor or scalar of ptr's element type",
          "Atomic (untorn) load of the elements where mask is true, with sem acquire or relaxed."),
    OpDef("atomic_store", "ptr, val [, mask]", ("sem", "scope", "has_mask"), "", "none",
          "Atomic (untorn) store of the elements where mask is true, with sem release or relaxed."),
    OpDef("inline_asm_elementwise", "args…", ("asm", "constraints", "is_pure", "pack"), "", "n tensors or scalars",
          "Runs the PTX text asm on pack elements of every argument at a time (LLVM inline-asm constraints); "
          "the results have the arguments' shape and layout."),
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
    # -- Blackwell tensor memory (see gluonkit.ir.tmem) ------------------------------------
    OpDef("tmem_alloc", "[value]", (), "", "!tmem",
          "A tensor-memory buffer of the result type (its columns come from the kernel's column plan), "
          "initialized from the optional tensor."),
    OpDef("tmem_load", "tmem", ("red", "abs", "propagate_nan"), "", "tensor[, tensor]",
          "tcgen05.ld of a 2-D view into the result's register layout; with red 'min'/'max' also the "
          "row-wise reduction along dim 1 (of |x| when abs) as a second, 1-D result."),
    OpDef("tmem_store", "tmem, value, pred", (), "", "none",
          "tcgen05.st of a distributed tensor of the view's shape and type, skipped when pred is false."),
    OpDef("tmem_index", "tmem, index", (), "", "!tmem",
          "The index-th tile along the leading stage dimension (a runtime int32 scalar)."),
    OpDef("tmem_slice", "tmem", ("start", "length", "dim"), "", "!tmem",
          "The elements start … start+length-1 along tile dimension dim."),
    OpDef("tmem_reinterpret", "tmem", (), "", "!tmem",
          "The same columns seen with the result type's element type, shape and layout."),
    OpDef("tcgen05_mma", "a, b, acc, use_acc, pred, bar…, bar_pred…", ("num_barriers", "is_async"), "", "none",
          "Where pred holds, starts acc = a @ b (+ acc where use_acc) on the tensor cores: a (M x K) in "
          "shared memory, b (K x N) in shared memory, acc (M x N) in tensor memory, mutated.  With "
          "is_async it runs in the background and commits once to each of its num_barriers barriers whose "
          "bar_pred holds (a later tcgen05_commit covers it too); without, it is complete when the op returns."),
    OpDef("tcgen05_commit", "bar, pred", (), "", "none",
          "Where pred holds, arrives once on the mbarrier when every tcgen05 MMA this thread issued before "
          "it has completed (tcgen05.commit)."),
    OpDef("tcgen05_copy", "src, dst", (), "", "none",
          "Starts tcgen05.cp of a shared-memory view into a tensor-memory view of the same shape and type "
          "(block-scale factors in a TensorMemoryScalesLayout); it runs in the background, ordered before "
          "the tcgen05 MMAs the same thread issues after it, and a tcgen05_commit covers it."),
    OpDef("packed_arith", "a, b[, c]", ("fn",), "", "like a",
          f"Element-wise arithmetic on two lanes per instruction (Blackwell's packed add.f32x2 …, add.f16x2 …); "
          f"fn is one of {', '.join(PACKED_FNS)}, ``fma`` takes c (a*b+c, one rounding).  Every operand and the "
          "result have one element type (float32: add/sub/mul/fma; float16, bfloat16: all six) and each thread "
          "must hold at least two distinct elements; rounding is to nearest even, min/max return the other "
          "operand where one is NaN."),
    OpDef("tcgen05_mma_scaled", "a, b, acc, a_scale, b_scale, use_acc, pred, bar…, bar_pred…",
          ("a_type", "b_type", "num_barriers", "is_async"), "", "none",
          "Where pred holds, starts acc = (a * a_scale) @ (b * b_scale) (+ acc where use_acc): a (M x K) and "
          "b (K x N) in shared memory in the formats a_type/b_type ('e4m3', 'e5m2', or 'e2m1' packed two per "
          "uint8 along K), a_scale (M x K/V) and b_scale (N x K/V) in tensor memory, one scale per V elements "
          "of K; barriers as for tcgen05_mma."),
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
          "(TMA, wgmma, tcgen05); with the attribute cluster=True, of the whole cluster's shared memory."),
    OpDef("thread_barrier", "", (), "", "none",
          "Every thread of the program reaches it before any continues (``bar.sync 0``)."),
    OpDef("cluster_barrier", "", ("relaxed",), "", "none",
          "Every thread of every CTA of the cluster arrives, then waits for all the others; without "
          "relaxed the arrival releases and the wait acquires memory at cluster scope."),
    OpDef("clc_try_cancel", "result, bar", (), "", "none",
          "Cluster launch control: asks to cancel a program (cluster) not started yet; its 16-byte response "
          "lands in result (int64 x 2 shared memory) and completes 16 transaction bytes on bar."),
    OpDef("clc_load_result", "result", (), "", "int1, int32, int32, int32",
          "Reads a try_cancel response: whether a program was cancelled, and its program id along axes 0, 1, 2."),
    OpDef("warp_specialize", "", ("num_warps", "num_regs"),
          "default() -> yield v…; worker_i() -> yield", "v…",
          "Runs its regions at the same time on disjoint warps: region 0 (the default partition) on the "
          "kernel's warps, region i on num_warps[i] more warps with a register budget of num_regs[i - 1] "
          "(None: no budgets); workers see only shared memory, barriers, descriptors and scalars from outside. "
          "The results are what the default partition yields."),
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
    OpDef("async_tma_copy_global_to_shared", "desc, result, bar, pred, coord… [, offset…]", (), "", "none",
          "Where pred holds, starts copying the block of desc at element coordinates coord (int32, one per "
          "dimension) into the shared view result; out-of-bounds elements read as zero (NaN with padding "
          "'nan'); on arrival its bytes complete transactions on the mbarrier bar.  With an im2col desc, "
          "coord is the first filter position and the int16 offsets (one per spatial dimension) the filter "
          "tap: the block gathers pixels, one per row."),
    OpDef("async_tma_copy_shared_to_global", "desc, src, coord…", (), "", "none",
          "Starts copying the shared view src to the block of desc at coord (one bulk group); elements "
          "outside the tensor are not written. src must not change until a store_wait retires the group."),
    OpDef("async_tma_gather", "desc, result, bar, pred, x_offsets, y_offset", (), "", "none",
          "Blackwell: where pred holds, starts copying rows x_offsets (an int32 1-D tensor) of desc, columns "
          "y_offset … y_offset + block_shape[1] - 1, into the shared view result (one row per offset); rows "
          "or columns outside the tensor read as zero; on arrival the bytes complete transactions on bar."),
    OpDef("async_tma_scatter", "desc, src, x_offsets, y_offset", (), "", "none",
          "Blackwell: starts copying row i of the shared view src to row x_offsets[i] of desc, columns "
          "y_offset …; elements outside the tensor are not written.  One bulk group, as a TMA store."),
    OpDef("async_tma_store_wait", "", ("pendings", "read_only"), "", "none",
          "Waits until at most pendings shared-to-global copies still read their shared memory (read_only) "
          "or are still incomplete, their global writes included (not read_only)."),
    # -- cp.async (Ampere asynchronous copies) ------------------------------------------------
    OpDef("async_copy_global_to_shared", "smem, ptr [, mask]",
          ("cache_modifier", "eviction_policy", "volatile", "has_mask"), "", "none",
          "Each thread starts copying its elements of the pointer tensor into the shared view smem (same shape); "
          "masked-off elements are written as zero. The copy joins the thread's open group."),
    OpDef("async_commit_group", "", (), "", "none",
          "Closes the executing threads' open group of async_copy_global_to_shared copies."),
    OpDef("async_wait_group", "", ("num_outstanding",), "", "none",
          "Waits until at most num_outstanding committed copy groups of each thread are in flight."),
    OpDef("async_copy_mbarrier_arrive", "bar", ("increment_count",), "", "none",
          "Every thread arrives on the mbarrier once its earlier copies have landed; with increment_count the "
          "arrival is pre-counted (the phase's expected count is unchanged)."),
    # -- control flow ----------------------------------------------------------------------
    OpDef("for", "lower, upper, step, init…", (), "body(iv, carried…) -> yield carried…", "carried…",
          "Counted loop with loop-carried values (runtime or constant bounds)."),
    OpDef("if", "cond", (), "then() -> yield v…; else() -> yield v…", "v…",
          "Two-way branch on a scalar int1; both regions yield values of the same types."),
    OpDef("while", "init…", (), "before(args…) -> condition; after(args…) -> yield args…", "args…",
          "Loop: the before region computes a condition and forwards values; while true, the after region runs."),
    OpDef("yield", "v…", (), "", "none", "Terminates for/if/while-after regions and the regions of reduce, scan and map_elementwise."),
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
