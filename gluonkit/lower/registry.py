"""The table of lowering rules: IR op name → function emitting its LLVM IR.

One op family is one module (:mod:`.elementwise`, :mod:`.memory`, :mod:`.control`, …);
each registers its rules here with :func:`lowering`.  A test checks that every op of the
catalogue has a rule.
"""

from __future__ import annotations

from typing import Callable, Dict

from ..ir import OPS

__all__ = ["LOWERINGS", "lowering"]

LOWERINGS: Dict[str, Callable] = {}


def lowering(*names: str):
    """Register the decorated function as the lowering of IR ops ``names``."""
    for name in names:
        if name not in OPS:
            raise KeyError(f"lowering rule for unknown op {name!r}")

    def register(fn):
        for name in names:
            LOWERINGS[name] = fn
        return fn

    return register
