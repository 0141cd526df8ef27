"""Which interleavings of warp-specialize partitions the interpreter tries.

A kernel without ``warp_specialize`` runs once.  One with partitions runs once per
schedule, from the same memory contents each time (the last run's results are kept), so a
deadlock or a race that only *some* interleaving hits is still found.  The schedules, in
the order they are tried:

1. ``forward``: run each partition as far as it can (until it waits on an mbarrier phase
   that has not completed, or ends), then the next one in partition order, the default first;
2. ``reverse``: the same, starting from the last worker and going backwards;
3. ``random`` with seeds 0, 1, …: before every op, with probability 1/4, switch to a
   partition picked at random among those that can run.

The budget is ``GLUONKIT_INTERPRET_SCHEDULES`` (default 3: forward, reverse, one random).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional

__all__ = ["Schedule", "schedules_for", "DEFAULT_BUDGET", "BUDGET_ENV"]

BUDGET_ENV = "GLUONKIT_INTERPRET_SCHEDULES"
DEFAULT_BUDGET = 3


@dataclass(frozen=True)
class Schedule:
    """One interleaving policy: ``"forward"``, ``"reverse"`` or ``"random"`` (with ``seed``)."""

    policy: str
    seed: int = 0

    def __str__(self) -> str:
        return f"random schedule (seed {self.seed})" if self.policy == "random" else f"{self.policy} schedule"


def _budget(budget: Optional[int]) -> int:
    if budget is None:
        text = os.environ.get(BUDGET_ENV, "")
        try:
            budget = int(text) if text else DEFAULT_BUDGET
        except ValueError:
            raise ValueError(f"{BUDGET_ENV} must be a positive integer, got {text!r}") from None
    if budget < 1:
        raise ValueError(f"the schedule budget must be at least 1, got {budget}")
    return budget


def schedules_for(func, budget: Optional[int] = None) -> List[Optional[Schedule]]:
    """The schedules to run ``func`` under: ``[None]`` without partitions (module docstring)."""
    if not any(op.name == "warp_specialize" for op in func.walk()):
        return [None]
    n = _budget(budget)
    plans = [Schedule("forward"), Schedule("reverse")]
    plans += [Schedule("random", seed) for seed in range(max(0, n - 2))]
    return plans[:n]
