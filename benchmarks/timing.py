"""Timing kernels against each other on a GPU whose clocks drift.

Under its power limit the H100's clocks move by up to ±10% over tenths of a second.
Timing one kernel for 100 ms, then the next (``do_bench`` per kernel, even in interleaved
rounds), let that drift decide ratios of a few percent.  :func:`alternating` instead runs
the kernels call by call, each call after an L2 flush and between CUDA events, so the
drift hits every kernel alike; medians over many calls are then stable from run to run.
"""

import statistics

import torch

SAMPLES = 100  # timed calls per kernel
_FLUSH_BYTES = 256 << 20  # larger than the L2 (50 MB): every call starts cold


def alternating(fns: dict, samples: int = SAMPLES):
    """``({name: median ms}, {name: [ms per call]})`` for the callables ``fns``.

    Each function is called twice first (compilation, autotuning, loading).  The flush
    keeps the GPU busy while the host enqueues the next call, so host launch overhead is
    not timed unless it exceeds the flush (~0.1 ms).
    """
    flush = torch.empty(_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for fn in fns.values():
        fn()
        fn()
    torch.cuda.synchronize()
    events = {name: [] for name in fns}
    for _ in range(samples):
        for name, fn in fns.items():
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    times = {name: [start.elapsed_time(end) for start, end in pairs] for name, pairs in events.items()}
    return {name: statistics.median(t) for name, t in times.items()}, times


def percentile(values, q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
