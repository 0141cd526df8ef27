"""Lowering rules of the target-independent op families: element-wise math, loads and
stores, layout conversions, reductions, control flow, shared memory, debug printing."""
