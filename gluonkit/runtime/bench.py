"""Timing GPU work with CUDA events, with the semantics of ``triton.testing.do_bench``.

``do_bench(fn)`` runs ``fn`` once, estimates its time from five runs, then runs it for
about ``warmup`` milliseconds and times about ``rep`` milliseconds of runs one by one.
Before every timed run the L2 cache is flushed by clearing a 256 MB buffer
(``cuMemsetD32Async``), so each run reads its inputs from DRAM, as in Triton.  Events are
recorded on ``stream`` (default: the legacy default stream, where gluonkit, torch and
CuPy launch unless told otherwise).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from .driver import DeviceBuffer, bindings, call, ensure_context

__all__ = ["do_bench", "summarize"]

L2_FLUSH_BYTES = 256 * 1024 * 1024
_RETURN_MODES = ("min", "max", "mean", "median", "all")
_flush_buffer: Optional[DeviceBuffer] = None


def _flush_l2(stream) -> None:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = DeviceBuffer(L2_FLUSH_BYTES)
    call("cuMemsetD32Async", _flush_buffer.handle, 0, L2_FLUSH_BYTES // 4, stream)


class _Event:
    def __init__(self):
        self.handle = call("cuEventCreate", bindings().CUevent_flags.CU_EVENT_DEFAULT)

    def record(self, stream) -> None:
        call("cuEventRecord", self.handle, stream)

    def elapsed_ms(self, end: "_Event") -> float:
        return float(call("cuEventElapsedTime", self.handle, end.handle))

    def __del__(self):
        try:
            call("cuEventDestroy", self.handle)
        except Exception:  # interpreter shutdown / context gone
            pass


def summarize(times_ms: Sequence[float], quantiles: Optional[Sequence[float]] = None,
              return_mode: str = "median"):
    """Reduce per-run times like Triton: the ``quantiles`` (a float if only one) if given,
    otherwise the ``return_mode`` statistic (``"all"``: the list of times).

    The median of an even count is the lower middle value (``torch.median``'s choice, which
    Triton's numbers use); quantiles interpolate linearly (``torch.quantile``'s default).
    """
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode must be one of {_RETURN_MODES}, got {return_mode!r}")
    times = np.asarray(times_ms, dtype=np.float64)
    if quantiles is not None:
        result = np.quantile(times, list(quantiles)).tolist()
        return result[0] if len(result) == 1 else result
    if return_mode == "all":
        return times.tolist()
    if return_mode == "median":
        return float(np.sort(times)[(len(times) - 1) // 2])
    return float(getattr(np, return_mode)(times))


def do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100,
             quantiles: Optional[Sequence[float]] = None, return_mode: str = "median",
             stream=0):
    """Milliseconds per call of ``fn`` (see the module docstring and :func:`summarize`).

    ``warmup`` and ``rep`` are durations in milliseconds, as in ``triton.testing.do_bench``.
    """
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode must be one of {_RETURN_MODES}, got {return_mode!r}")
    ensure_context()
    fn()
    call("cuCtxSynchronize")

    start, end = _Event(), _Event()
    start.record(stream)
    for _ in range(5):
        _flush_l2(stream)
        fn()
    end.record(stream)
    call("cuEventSynchronize", end.handle)
    estimate_ms = max(start.elapsed_ms(end) / 5, 1e-6)

    n_warmup = max(1, int(warmup / estimate_ms))
    n_repeat = max(1, int(rep / estimate_ms))
    starts = [_Event() for _ in range(n_repeat)]
    ends = [_Event() for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for s, e in zip(starts, ends):
        _flush_l2(stream)
        s.record(stream)
        fn()
        e.record(stream)
    call("cuCtxSynchronize")
    return summarize([s.elapsed_ms(e) for s, e in zip(starts, ends)], quantiles, return_mode)
