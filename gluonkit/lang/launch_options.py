"""Launch options (``num_warps``, ``num_ctas``, ``maxnreg``) and how they meet kernel parameters.

``kernel[grid](*args, num_warps=8)`` and ``kernel.compile(..., num_warps=8)`` take launch
options as keyword arguments beside the kernel's own arguments.  As in Gluon, a kernel may
also *declare* a parameter named like an option, ``def k(x_ptr, num_warps: gl.constexpr)``:
a keyword argument of that name then sets the option **and** binds the parameter.  A
positional argument (or the parameter's default) binds only the parameter and leaves the
option at its default — Triton's binder behaves the same way, which
``docs/decisions.rst`` records.

``num_ctas`` (a power of two up to :data:`MAX_NUM_CTAS`, as in Gluon) launches each program as a
cluster of that many CTAs (``docs/clusters.rst``); above :data:`PORTABLE_NUM_CTAS` the runtime
opts the kernel in to non-portable cluster sizes (Hopper and Blackwell allow 16).

``maxnreg`` (default ``None``: no cap) caps the registers per thread: the kernel is compiled
with PTX's ``.maxnreg``, so ptxas spills rather than exceed it.  Like Triton, any positive
int is accepted; ptxas raises a cap below 24 to 24 and ignores one above 255 (with a
warning).  The interpreter ignores it.  With ``warp_specialize`` register budgets
(``worker_num_regs``) it is also the count every thread starts with: the default partition
gets what the workers' budgets leave of ``maxnreg × threads``, as in Gluon (see
:mod:`gluonkit.ir.warp_specialize`).
"""

from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

from ..ir.diagnostics import Location
from ..ir.warp_specialize import MAX_WARPS
from .constexpr import unwrap
from .errors import ArgumentError

__all__ = ["LAUNCH_OPTIONS", "MAX_NUM_CTAS", "PORTABLE_NUM_CTAS", "split_launch_options", "check_launch_options"]

#: The largest ``num_ctas`` (Gluon's limit; what Hopper and Blackwell allow with the opt-in below).
MAX_NUM_CTAS = 16
#: The largest portable cluster: above it a kernel needs ``CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED``.
PORTABLE_NUM_CTAS = 8

#: Every launch option and its default.
LAUNCH_OPTIONS: Dict[str, Any] = {"num_warps": 4, "num_ctas": 1, "maxnreg": None}


def split_launch_options(arg_names: Sequence[str], kwargs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``(options, kwargs for the parameters)`` of one launch's keyword arguments.

    Options missing from ``kwargs`` take their defaults; an option that is also a parameter
    name stays in the returned keyword arguments, so the parameter receives it too.
    """
    options = dict(LAUNCH_OPTIONS)
    rest = dict(kwargs)
    for name in LAUNCH_OPTIONS:
        if name in kwargs:
            options[name] = unwrap(kwargs[name])
            if name not in arg_names:
                del rest[name]
    return options, rest


def check_launch_options(options: Dict[str, Any], loc: Location) -> None:
    """Raise :class:`ArgumentError` at ``loc`` for an option value gluonkit cannot honour."""
    num_warps = options.get("num_warps", LAUNCH_OPTIONS["num_warps"])
    if not _is_power_of_two(num_warps):
        raise ArgumentError(f"num_warps must be a positive power of two, got {num_warps!r}", loc)
    if num_warps > MAX_WARPS:
        raise ArgumentError(f"num_warps={num_warps}: a CTA has at most {MAX_WARPS} warps (1024 threads); use "
                            "fewer warps, or more programs (a larger grid)", loc)
    num_ctas = options.get("num_ctas", LAUNCH_OPTIONS["num_ctas"])
    if not _is_power_of_two(num_ctas):
        raise ArgumentError(f"num_ctas must be a positive power of two, got {num_ctas!r}", loc)
    if num_ctas > MAX_NUM_CTAS:
        raise ArgumentError(f"num_ctas={num_ctas}: a cluster has at most {MAX_NUM_CTAS} CTAs (Hopper's and "
                            f"Blackwell's largest cluster; {PORTABLE_NUM_CTAS} is the portable size)", loc)
    maxnreg = options.get("maxnreg")
    if maxnreg is not None and (not isinstance(maxnreg, int) or isinstance(maxnreg, bool) or maxnreg <= 0):
        raise ArgumentError(f"maxnreg (registers per thread) must be a positive int or None, got {maxnreg!r}", loc)


def _is_power_of_two(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n > 0 and n & (n - 1) == 0
