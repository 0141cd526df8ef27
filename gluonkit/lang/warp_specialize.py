"""``gl.warp_specialize``: run several ``@jit`` functions at once on disjoint sets of warps.

``warp_specialize(functions_and_args, worker_num_warps, worker_num_regs=None)`` takes a list
of ``(function, args_tuple)`` pairs, as Gluon 3.9 does.  The first is the *default
partition*: it runs on the kernel's warps, may take any values and returns what the call
returns.  The others are *workers* on ``worker_num_warps[i]`` more warps each; their
arguments may be shared memory descriptors (barriers included), TMA descriptors, scalars,
compile-time values and tuples or aggregates of these — never distributed tensors — and they return
nothing.  Inside a partition ``gl.num_warps()`` is that partition's warp count, so layouts
written with it fit.  ``worker_num_regs`` asks for per-thread register budgets
(``setmaxnreg``; see :mod:`gluonkit.ir.warp_specialize` for the warp and register plan).

Every function is inlined into its own region of one ``warp_specialize`` op.
"""

from __future__ import annotations

from ..ir import Block
from ..ir.types import TensorType
from ..ir.warp_specialize import plan_partitions
from .aggregate import fields_of, is_aggregate
from .callables import is_jit_function
from .constexpr import unwrap
from .errors import ArgumentError, TypeMismatchError, UnsupportedSyntaxError
from .shared_memory import shared_memory_descriptor
from .tensor import builtin, tensor

__all__ = ["warp_specialize"]


def _pairs(sem, functions_and_args):
    if not isinstance(functions_and_args, (list, tuple)) or not functions_and_args:
        sem.error("warp_specialize's first argument must be a non-empty list of (function, args) pairs, the "
                  f"first the default partition; got {functions_and_args!r}", ArgumentError)
    pairs = []
    for i, pair in enumerate(functions_and_args):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            sem.error(f"warp_specialize partition {i} must be a (function, args) pair, got {pair!r}", ArgumentError)
        fn, args = pair
        if not is_jit_function(fn):
            sem.error(f"warp_specialize partition {i}'s function must be a @gluonkit.jit function, got {fn!r}",
                      ArgumentError)
        if not isinstance(args, (list, tuple)):
            sem.error(f"warp_specialize partition {i}'s arguments must be a tuple, got {args!r} (write (x,) for "
                      "one argument)", ArgumentError)
        pairs.append((fn, tuple(args)))
    return pairs


def _int_list(sem, values, what: str):
    values = unwrap(values)
    if not isinstance(values, (list, tuple)):
        sem.error(f"warp_specialize's {what} must be a list of compile-time ints, got {values!r}", ArgumentError)
    out = [unwrap(v) for v in values]
    for v in out:
        sem.require_int(v, f"each of warp_specialize's {what}")
    return out


def _check_worker_arg(sem, fn, index: int, value, path: str) -> None:
    """Workers may take memory descriptors, TMA descriptors, scalars and compile-time values,
    also inside tuples, lists and aggregates."""
    if isinstance(value, (tuple, list)):
        for j, v in enumerate(value):
            _check_worker_arg(sem, fn, index, v, f"{path}[{j}]")
    elif is_aggregate(value):
        for name, v in fields_of(value).items():
            _check_worker_arg(sem, fn, index, v, f"{path}.{name}")
    elif isinstance(value, tensor) and isinstance(value.type, TensorType):
        sem.error(f"worker partition {index} ({fn.__name__}) gets a distributed tensor ({value.type}) as argument "
                  f"{path}; workers run on other warps and can only take shared memory descriptors, barriers, TMA "
                  "descriptors and scalars: pass the data through shared memory", TypeMismatchError)


def _results(sem, value):
    """The default partition's return value as (IR values to yield, a function rebuilding it from results)."""
    if value is None:
        return [], lambda results: None
    if isinstance(value, tensor):
        return [value.handle], lambda results: tensor(results[0])
    if isinstance(value, (tuple, list)):
        parts = [_results(sem, v) for v in value]
        handles = [h for hs, _ in parts for h in hs]

        def rebuild(results):
            out, at = [], 0
            for hs, build in parts:
                out.append(build(results[at:at + len(hs)]))
                at += len(hs)
            return type(value)(out)

        return handles, rebuild
    if isinstance(value, shared_memory_descriptor):
        sem.error("the default partition returns a shared memory descriptor; allocate it before warp_specialize "
                  "and pass it in instead", TypeMismatchError)
    if hasattr(value, "handle"):
        sem.error(f"the default partition returns {value!r}; it can return tensors, compile-time values and "
                  "tuples of these", TypeMismatchError)
    return [], lambda results: value  # a compile-time value passes through


@builtin
def warp_specialize(functions_and_args, worker_num_warps, worker_num_regs=None, _semantic=None):
    """Run the default partition on the kernel's warps and each worker on its own warps (module docstring)."""
    sem = _semantic
    if sem.partition_warps is not None:
        sem.error("warp_specialize cannot be nested: this call is inside a partition of another warp_specialize",
                  UnsupportedSyntaxError)
    pairs = _pairs(sem, functions_and_args)
    workers = pairs[1:]
    warps = _int_list(sem, worker_num_warps, "worker_num_warps")
    if len(warps) != len(workers):
        sem.error(f"warp_specialize got {len(workers)} worker partition(s) but {len(warps)} warp count(s) in "
                  "worker_num_warps; give one per worker", ArgumentError)
    regs = None
    if worker_num_regs is not None:
        regs = _int_list(sem, worker_num_regs, "worker_num_regs")
        if len(regs) != len(workers):
            sem.error(f"warp_specialize got {len(workers)} worker partition(s) but {len(regs)} register budget(s) "
                      "in worker_num_regs; give one per worker", ArgumentError)
    try:
        plan_partitions(sem.num_warps, warps, regs, sem.maxnreg)
    except ValueError as e:
        sem.error(str(e), ArgumentError)
    for i, (fn, args) in enumerate(workers):
        _check_worker_arg(sem, fn, i, args, "args")

    kernel_warps = sem.num_warps
    regions = []

    def generate(fn, args, num_warps):
        block = Block()
        sem.num_warps, sem.partition_warps = num_warps, num_warps
        try:
            with sem.builder.at_end_of(block):
                value = sem.call_jit(fn, list(args))
        finally:
            sem.num_warps, sem.partition_warps = kernel_warps, None
        regions.append(block)
        return block, value

    default_block, value = generate(*pairs[0], kernel_warps)
    handles, rebuild = _results(sem, value)
    with sem.builder.at_end_of(default_block):
        sem.create("yield", handles, [])
    for i, ((fn, args), w) in enumerate(zip(workers, warps)):
        block, returned = generate(fn, args, w)
        if returned is not None:
            sem.error(f"worker partition {i} ({fn.__name__}) returns {returned!r}; workers return nothing (only the "
                      "default partition's return value comes back)", TypeMismatchError)
        with sem.builder.at_end_of(block):
            sem.create("yield", [], [])
    op = sem.create("warp_specialize", [], [h.type for h in handles],
                    {"num_warps": (kernel_warps,) + tuple(warps), "num_regs": None if regs is None else tuple(regs)},
                    regions=regions)
    return rebuild(op.results)
