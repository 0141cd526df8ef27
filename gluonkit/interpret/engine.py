"""The interpreter's core: the rule registry, one program instance's state, and the grid loop.

Each catalogue op has exactly one rule, registered with :func:`rule`; a rule takes the
:class:`Program` (the running instance), the op and its operands' runtime values, and
returns the op's results (a terminator returns the values it passes on).  Op families
live in their own modules (:mod:`.elementwise`, :mod:`.memory_ops`, :mod:`.shapes`,
:mod:`.reduce`, :mod:`.control`, :mod:`.debug`), which register their rules on import.

Program instances run one after another in grid order (axis 0 fastest), each from a fresh
environment; they share only the :class:`~.memory.Memory`.  With ``num_ctas > 1`` a program
is a cluster whose CTAs run together (:mod:`.nvidia.cluster` registers that runner).  A program with warp-specialize
partitions runs once per schedule (:mod:`.schedules`), memory restored between the runs.
Given a :class:`~.trace.Trace`, each run is recorded as one process of it (:mod:`.trace`).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.core import Block, Function, Operation
from ..ir.ops import OPS
from ..ir.types import TensorDescType, TensorType
from .dtypes import from_python
from .errors import InterpreterError
from .memory import Memory
from .schedules import Schedule, schedules_for
from .values import Placement, placement

__all__ = ["rule", "RULES", "Program", "Pending", "run_grid", "run_program", "register_cluster_runner"]

Rule = Callable[["Program", Operation, List[object]], List[object]]
RULES: Dict[str, Rule] = {}


def rule(*names: str):
    """Register the interpreter rule of catalogue op(s) ``names``."""
    for name in names:
        if name not in OPS:
            raise KeyError(f"interpreter rule for unknown op {name!r}")

    def register(fn: Rule) -> Rule:
        for name in names:
            RULES[name] = fn
        return fn

    return register


#: How a cluster (``num_ctas > 1``) runs: set by :mod:`.nvidia.cluster` on import.
_CLUSTER_RUNNER: Optional[Callable] = None


def register_cluster_runner(fn: Callable) -> Callable:
    """Register ``fn(func, pid, grid, values, memory, trace)``, which runs one cluster's CTAs."""
    global _CLUSTER_RUNNER
    _CLUSTER_RUNNER = fn
    return fn


class Pending:
    """A value an asynchronous operation is still producing (an async ``warpgroup_mma``'s result).

    Its producer sets :attr:`value` when the operation is retired (by a wait); from then on
    every use sees that value.  Before, only the ops of :data:`PENDING_OK` may take it (they
    wait for it, chain it, or carry it through control flow); any other use is reported at
    the reading line together with ``loc``, where the operation was issued.
    """

    def __init__(self, what: str, loc, fix: str):
        self.what, self.loc, self.fix = what, loc, fix
        self.value = None

    def resolve(self, op: Operation):
        if self.value is not None:
            return self.value
        if op.name in PENDING_OK:
            return self
        raise InterpreterError(f"{op.name} reads the result of {self.what} issued at line {self.loc.line} "
                               f"while it is still in flight; {self.fix}", op.loc)


#: Ops that may take a :class:`Pending` value as an operand.
PENDING_OK = frozenset({"for", "while", "if", "yield", "condition", "warpgroup_mma", "warpgroup_mma_wait"})


class Program:
    """One running program instance: its id, the grid, memory and SSA environment.

    ``async_state`` holds, per asynchronous op family (``"wgmma"`` …), that family's
    in-flight operations.  A family with operations that complete on their own (TMA copies)
    puts a function in ``progress``, called before every op so that it may complete some
    of them (scheduler-chosen points), and one in ``at_exit``, called when the kernel
    returns (to report operations still in flight).
    """

    def __init__(self, func: Function, pid: Tuple[int, int, int], grid: Tuple[int, int, int], memory: Memory,
                 schedule: Optional[Schedule] = None, trace=None):
        self.func = func
        self.schedule = schedule  # how warp-specialize partitions interleave (None: no partitions)
        self.blocker: Optional[Callable] = None  # in a partition: blocker(ready, describe) hands over until ready()
        self.partition_name: Optional[str] = None  # in a partition: "the default partition", "worker partition 0" …
        self.pid = pid
        self.grid = grid
        self.cta_rank = 0  # this CTA's rank in its cluster
        self.cluster = None  # the running cluster's shared state (nvidia/cluster.py); None: num_ctas == 1
        self.memory = memory
        self.num_warps = func.num_warps
        self.env: Dict[int, object] = {}
        self.async_state: Dict[str, object] = {}
        self.progress: Dict[str, Callable[["Program", Operation], None]] = {}
        self.at_exit: Dict[str, Callable[["Program", Operation], None]] = {}
        self.trace = trace  # a trace.Lane where this program's (or partition's) events go; None: not recording
        if trace is not None:
            self.progress["trace"] = trace.advance

    @property
    def threads(self) -> Tuple[int, int]:
        """``(num_warps, cta_rank)``: what a tensor's placement depends on (values.placement)."""
        return (self.num_warps, self.cta_rank)

    def placement(self, ty: TensorType, op: Operation) -> Placement:
        return placement(ty, self.threads, op.loc)

    def run_block(self, block: Block, args: Sequence[object]) -> List[object]:
        """Bind ``args`` to ``block``'s arguments, run its ops; return its terminator's values."""
        if len(args) != len(block.args):
            raise RuntimeError(f"block takes {len(block.args)} arguments, got {len(args)}")
        for a, v in zip(block.args, args):
            self.env[a.uid] = v
        for op in block.ops:
            if self.progress:
                for advance in list(self.progress.values()):
                    advance(self, op)
            operands = [self.env[v.uid] for v in op.operands]
            operands = [v.resolve(op) if isinstance(v, Pending) else v for v in operands]
            try:
                fn = RULES[op.name]
            except KeyError:
                raise InterpreterError(f"{op.name}: the interpreter has no rule for this op", op.loc) from None
            with np.errstate(all="ignore"):
                results = fn(self, op, operands)
            if op is block.terminator and op.name in ("yield", "condition", "return"):
                return results
            for r, v in zip(op.results, results):
                self.env[r.uid] = v
        return []

    def run_kernel(self, args: Sequence[object]) -> None:
        """Run the kernel's body with ``args``, then its async families' ``at_exit`` checks."""
        self.run_block(self.func.body, args)
        for finish in list(self.at_exit.values()):
            finish(self, self.func.body.terminator)


def _normalize_grid(grid) -> Tuple[int, int, int]:
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise ValueError(f"grid must be 1 to 3 non-negative ints, got {grid}")
    return grid + (1,) * (3 - len(grid))


def _bind_args(func: Function, args: Sequence[object]) -> List[object]:
    if len(args) != len(func.args):
        raise ValueError(f"kernel {func.name} takes {len(func.args)} arguments "
                         f"({', '.join(func.arg_names)}), got {len(args)}")
    values = []
    for name, arg, value in zip(func.arg_names, func.args, args):
        if isinstance(arg.type, TensorType):
            raise ValueError(f"kernel argument {name!r} has tensor type {arg.type}; "
                             "runtime arguments are scalars or pointers")
        values.append(value if isinstance(arg.type, TensorDescType) else from_python(value, arg.type)[()])
    return values


def run_program(func: Function, pid: Tuple[int, int, int], grid, args: Sequence[object], memory: Memory,
                trace=None, schedules: Optional[int] = None) -> None:
    """Run one program instance ``pid`` of ``func`` (arguments as for :func:`run_grid`);
    ``schedules``: how many schedules of its partitions to try (default: the budget of
    :mod:`.schedules`; 1 runs the forward schedule only)."""
    grid = _normalize_grid(grid)
    values = _bind_args(func, args)
    if trace is not None:
        trace.start_launch(func.name, grid)
    _run_schedules(func, tuple(pid), grid, values, memory, trace, schedules)


def _run_schedules(func: Function, pid, grid, values, memory: Memory, trace, budget: Optional[int] = None) -> None:
    """Run one program under each of its schedules, restoring memory between runs."""
    if func.num_ctas > 1:
        _CLUSTER_RUNNER(func, pid, grid, values, memory, trace)
        return
    plans = schedules_for(func) if budget is None else schedules_for(func, budget)
    for i, schedule in enumerate(plans):
        last = i == len(plans) - 1
        saved = None if last else [a.data.copy() for a in memory.allocations]
        started = memory.launch.next if memory.launch is not None else None
        try:
            lane = None if trace is None else trace.program_run(pid, None if schedule is None else str(schedule))
            Program(func, pid, grid, memory, schedule, lane).run_kernel(values)
        except InterpreterError as e:
            if schedule is not None:
                e.notes.append((f"found under the {schedule} of warp-specialize partitions (of {len(plans)} tried; "
                                "GLUONKIT_INTERPRET_SCHEDULES sets how many)", None))
                e.args = (e._format(),)
            raise
        if saved is not None:
            for allocation, data in zip(memory.allocations, saved):
                allocation.data[:] = data
            if started is not None:  # the next schedule cancels the same programs again
                memory.launch.next = started


def run_grid(func: Function, grid, args: Sequence[object], memory: Memory, trace=None) -> None:
    """Run every program instance of ``grid`` (1 to 3 ints), axis 0 fastest.

    ``func`` must be fully inferred (``verify(func, concrete=True)`` holds).  Pointer
    arguments are addresses from ``memory.register``; scalars are Python or numpy numbers,
    converted to their parameter's type; tensor descriptors are :class:`~.tma.TensorMap`
    values (followed by their shape and strides, see ``TensorDescType.flat_arg_types``).
    ``trace``: a :class:`~.trace.Trace` that records every program's events (None: no recording).
    """
    grid = _normalize_grid(grid)
    values = _bind_args(func, args)
    if trace is not None:
        trace.start_launch(func.name, grid)
    launch = memory.launch = GridLaunch([(x, y, z) for z in range(grid[2]) for y in range(grid[1])
                                         for x in range(grid[0])])
    try:
        while launch.next < len(launch.order):  # a cluster-launch-control try_cancel may take programs
            launch.next += 1
            _run_schedules(func, launch.order[launch.next - 1], grid, values, memory, trace)
    finally:
        memory.launch = None


class GridLaunch:
    """The programs of one launch, in the order the interpreter starts them (axis 0 fastest).

    Programs before ``next`` have started or were cancelled by a cluster-launch-control
    ``try_cancel`` (:mod:`.nvidia.clc`), which takes the program at ``next``."""

    def __init__(self, order: List[Tuple[int, int, int]]):
        self.order = order
        self.next = 0

