"""Gluon's Blackwell ``clc`` namespace: cluster launch control (``try_cancel``, ``load_result``).

A persistent kernel launched over the full grid of tiles asks, with ``try_cancel``, to take
over a program (cluster) that has not started yet; the 16-byte response lands in shared
memory and completes 16 transaction bytes on an mbarrier.  ``load_result`` reads it into
registers as a :class:`clc_result` (``is_canceled()``, ``program_id(dim)``).  sm_100a only
(``docs/clusters.rst``).
"""

from __future__ import annotations

from ...ir.types import int1, int32, int64
from ...sync.builtin import barrier_type, descriptor_handle
from ..tensor import builtin, tensor

__all__ = ["try_cancel", "load_result", "clc_result", "clc_result_type"]


def _response(sem, result, what: str):
    """The IR value of ``result``: a 16-byte response buffer (two int64 elements)."""
    handle = descriptor_handle(sem, result, what)
    ty = handle.type
    if ty.element != int64 or tuple(ty.shape) != (2,):
        sem.error(f"{what} must be a 16-byte buffer: gl.allocate_shared_memory(gl.int64, [2], layout), got {ty}")
    return handle


@builtin
def try_cancel(result, barrier, _semantic=None):
    """Ask to cancel a program (cluster) that has not started yet and take over its work.

    The response (which program, or that none was left) is written to ``result`` (int64 x 2
    shared memory) asynchronously and completes 16 transaction bytes on ``barrier``: expect
    them (``mbarrier.expect(bar, 16)``) and wait before ``load_result``."""
    sem = _semantic
    sem.create("clc_try_cancel", [_response(sem, result, "try_cancel's result"),
                                  barrier_type(sem, barrier, "try_cancel's barrier")], [])


class clc_result_type:
    """The type of a :class:`clc_result` (the 128-bit response in registers)."""

    def __str__(self) -> str:
        return "clc_result"

    def __eq__(self, other) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def mangle(self) -> str:
        return "CLC"


class clc_result:
    """A try_cancel response read into registers: query it without reading memory again.

    gluonkit decodes the response when it is loaded (``load_result``), so the object holds
    the decoded scalars; it cannot be carried through a loop (load it where it is used)."""

    def __init__(self, handle):
        self.handle = handle  # the decoded scalars: (is_canceled, program id x, y, z)
        self._canceled, self._pids = handle[0], handle[1:]
        self.type = clc_result_type()

    @builtin
    def is_canceled(self, _semantic=None):
        """True where the request cancelled a program (its work is now this program's)."""
        return self._canceled

    @builtin
    def program_id(self, dim, _semantic=None):
        """The cancelled program's id along grid axis ``dim`` (0, 1 or 2); meaningless unless is_canceled()."""
        dim = _semantic.require_int(dim, "clc_result.program_id's dim")
        if dim not in (0, 1, 2):
            _semantic.error(f"clc_result.program_id's dim must be 0, 1 or 2, got {dim}")
        return self._pids[dim]


@builtin
def load_result(src, _semantic=None):
    """Read the response that ``try_cancel`` wrote to ``src`` (wait on its barrier first)."""
    sem = _semantic
    op = sem.create("clc_load_result", [_response(sem, src, "load_result's src")], [int1, int32, int32, int32])
    return clc_result(tuple(tensor(r) for r in op.results))
