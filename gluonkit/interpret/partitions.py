"""The ``warp_specialize`` rule: partitions run as cooperating tasks of one program.

Each partition runs its region in a Python thread, but only one runs at a time: a baton
passes between them at explicit points, so every run is deterministic for its schedule
(:mod:`.schedules`).  A partition hands the baton over when its ``mbarrier.wait`` cannot
return yet (the program's ``blocker``), when it ends, and — under a random schedule —
before any op.  The next partition is one that can run: not finished, and not waiting, or
waiting on a phase that has completed since.

When every unfinished partition waits on a phase that cannot complete, that is a
deadlock: the error lists what each partition waits on (barrier, parity, line, what the
barrier still expects, who has arrived on it).  Shared-memory accesses of different
partitions that no mbarrier phase orders are races (:mod:`.happens_before`).  Partitions
share the program's values and memory; each has its own asynchronous state (TMA store
groups, wgmma groups: per-thread state on the GPU), checked when the partitions have all
ended, and its own ``num_warps`` for layouts.
"""

from __future__ import annotations

import copy
import random
import threading
from typing import Callable, List, Optional

from ..ir.core import Operation
from .engine import rule
from .errors import InterpreterError
from .happens_before import Clocks, enter
from .schedules import Schedule

__all__ = ["Task", "Scheduler", "before_op"]

_SWITCH_PROBABILITY = 0.25
_STACK_BYTES = 64 << 20  # partitions interpret nested regions recursively


class _Abort(BaseException):
    """Unwinds a partition's thread when another one failed."""


class Task:
    """One cooperating task (a partition, or a CTA of a cluster): its program view, the code
    it runs (``body()`` returns its results), and what it waits on."""

    def __init__(self, index: int, name: str, program, body: Callable[[], List[object]],
                 on_end: Optional[Callable[[], None]] = None):
        self.index, self.name, self.program, self.body, self.on_end = index, name, program, body, on_end
        self.ready: Optional[Callable[[], bool]] = None  # set while blocked
        self.describe: Optional[Callable[[], str]] = None
        self.wait_loc = None
        self.current_op: Optional[Operation] = None  # the op it is about to execute
        self.done = False
        self.result: List[object] = []


class Scheduler:
    """Passes the baton between the tasks according to ``schedule`` (module docstring).

    ``group`` names what the tasks are, for the deadlock report ("partition of the
    warp_specialize at line 12", "CTA of the cluster of program (0, 0, 0)")."""

    def __init__(self, schedule: Schedule, tasks: List[Task], group: str,
                 outer: Optional[Callable[[Callable[[], bool], Callable[[], str]], None]] = None):
        self.schedule, self.tasks, self.group = schedule, tasks, group
        self.clocks = Clocks([t.name for t in tasks])  # happens-before between the partitions
        self.rng = random.Random(f"partitions/{schedule.seed}")
        self.cond = threading.Condition()
        self.current: Optional[Task] = None
        self.error: Optional[BaseException] = None
        # Nested in a task of another scheduler (the partitions of one CTA of a cluster): when every
        # task here waits, ``outer(ready, describe)`` lets the enclosing scheduler's other tasks run.
        self.outer = outer
        self.parked = False

    # ------------------------------------------------------------ main thread
    def run(self) -> None:
        old = threading.stack_size(_STACK_BYTES)
        try:
            threads = [threading.Thread(target=self._body, args=(t,), daemon=True) for t in self.tasks]
        finally:
            threading.stack_size(old)
        with self.cond:
            self.current = self.tasks[-1] if self.schedule.policy == "reverse" else self.tasks[0]
            for thread in threads:
                thread.start()
        while True:
            with self.cond:
                while self.error is None and not all(t.done for t in self.tasks) and not self.parked:
                    self.cond.wait()
                if not self.parked:
                    break
            # Every task here waits: the enclosing scheduler runs its other tasks until one can go on.
            try:
                self.outer(lambda: bool(self._runnable()), self._waits)
            except BaseException as e:  # noqa: BLE001 - e.g. the enclosing scheduler's deadlock report
                with self.cond:
                    self.error, self.parked = e, False
                    self.cond.notify_all()
                break
            with self.cond:
                self.parked = False
                self._hand_over(self.tasks[-1])
        for thread in threads:
            thread.join()
        if self.error is not None:
            raise self.error

    # ----------------------------------------------------------- task threads
    def _body(self, task: Task) -> None:
        try:
            enter(self.clocks, task.index)
            self._await_turn(task)
            task.result = task.body()
            if task.on_end is not None:
                task.on_end()
            with self.cond:
                task.done = True
                self._hand_over(task)
        except _Abort:
            pass
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            with self.cond:
                if self.error is None:
                    self.error = e
                self.cond.notify_all()

    def _await_turn(self, task: Task) -> None:
        with self.cond:
            while self.current is not task and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise _Abort()

    def _runnable(self) -> List[Task]:
        return [t for t in self.tasks if not t.done and (t.ready is None or t.ready())]

    def _hand_over(self, task: Task, candidates: Optional[List[Task]] = None) -> None:
        """Give the baton to the next runnable task after ``task`` (holding the lock)."""
        runnable = self._runnable() if candidates is None else candidates
        if not runnable:
            if not all(t.done for t in self.tasks):
                if self.outer is not None:  # others outside may still arrive: park (see ``run``)
                    self.current, self.parked = None, True
                else:
                    self.error = self._deadlock()
            self.cond.notify_all()
            return
        n = len(self.tasks)
        if self.schedule.policy == "random":
            chosen = self.rng.choice(runnable)
        else:
            step = -1 if self.schedule.policy == "reverse" else 1
            order = [self.tasks[(task.index + step * k) % n] for k in range(1, n + 1)]
            chosen = next(t for t in order if t in runnable)
        self.current = chosen
        self.cond.notify_all()

    def block(self, task: Task, ready: Callable[[], bool], describe: Callable[[], str], loc) -> None:
        """``task`` cannot go on until ``ready()``: let others run meanwhile."""
        task.ready, task.describe, task.wait_loc = ready, describe, loc
        with self.cond:
            self._hand_over(task)
        self._await_turn(task)
        task.ready = task.describe = task.wait_loc = None

    def point(self, task: Task) -> None:
        """Before an op: under a random schedule, maybe let another partition run first."""
        if self.schedule.policy != "random" or self.rng.random() >= _SWITCH_PROBABILITY:
            return
        with self.cond:
            self._hand_over(task, [t for t in self._runnable() if t is not task] or [task])
        self._await_turn(task)

    def _waits(self) -> str:
        """What the waiting tasks wait on (for the enclosing scheduler's deadlock report)."""
        return "; ".join(f"its {t.name} waits at line {t.wait_loc.line if t.wait_loc else '?'}: {t.describe()}"
                         for t in self.tasks if not t.done and t.describe is not None)

    def _deadlock(self) -> InterpreterError:
        waiting = [t for t in self.tasks if not t.done]
        first = waiting[0]
        notes = [(f"{t.name} waits here: {t.describe()}", t.wait_loc) for t in waiting[1:]]
        ended = [t.name for t in self.tasks if t.done]
        if ended:
            notes.append((f"{', '.join(ended)} already ended, so they cannot arrive any more", None))
        return InterpreterError(
            f"deadlock: every {self.group} that has not ended waits on something that cannot happen (an mbarrier "
            f"phase, a cluster barrier); {first.name} waits here: {first.describe()}. Check the parities (they flip "
            "each time a phase completes), the arrival counts given to mbarrier.init, and that the partition or CTA "
            "meant to arrive does so", first.wait_loc, notes)


def _partition_name(index: int) -> str:
    return "the default partition" if index == 0 else f"worker partition {index - 1}"


@rule("warp_specialize")
def _warp_specialize(program, op, operands):
    schedule = program.schedule or Schedule("forward")
    tasks: List[Task] = []
    for index, (region, warps) in enumerate(zip(op.regions, op.attrs["num_warps"])):
        view = copy.copy(program)  # shares the values (env) and memory; own async state and warps
        view.num_warps = warps
        view.partition_name = _partition_name(index)
        view.async_state, view.progress, view.at_exit = {}, {}, {}
        if program.trace is not None:  # each partition records on its own lane of the trace
            view.trace = program.trace.partition(index, _partition_name(index), warps, op)
        on_end = None if view.trace is None else (lambda v=view: v.trace.partition_end(op))
        tasks.append(Task(index, _partition_name(index), view, lambda v=view, r=region: v.run_block(r, []), on_end))
    # In a cluster the CTA's partitions run nested in the CTA's task: when all of them wait, the
    # other CTAs run (program.blocker is the cluster's).
    scheduler = Scheduler(schedule, tasks, f"partition of the warp_specialize at line {op.loc.line}",
                          program.blocker if program.cluster is not None else None)
    for task in tasks:
        task.program.blocker = (lambda ready, describe, t=task:
                                scheduler.block(t, ready, describe, t.current_op.loc))
        task.program.progress["partitions"] = lambda prog, inner, t=task: before_op(scheduler, t, inner)
        if task.program.trace is not None:  # after the switch: the step counts the op about to run
            task.program.progress["trace"] = task.program.trace.advance
    scheduler.run()
    for task in tasks:
        for finish in list(task.program.at_exit.values()):
            finish(task.program, op)
    return tasks[0].result


def before_op(scheduler: Scheduler, task: Task, op: Operation) -> None:
    """``task``'s progress hook: remember the op it is at (for reports), maybe switch tasks."""
    task.current_op = op
    scheduler.point(task)

