"""Verifier rules of the cluster-launch-control ops (``clc_try_cancel``, ``clc_load_result``)."""

from __future__ import annotations

from .types import SharedMemoryDescType, int1, int32, int64
from .verifier import rule
from .verify_checks import count_parts, fail

__all__ = []


def _response(op, value) -> None:
    ty = value.type
    if not isinstance(ty, SharedMemoryDescType) or ty.element != int64 or tuple(ty.shape) != (2,):
        fail(op, f"the response buffer must be int64 shared memory of shape [2] (16 bytes), got {ty}")


@rule("clc_try_cancel")
def _try_cancel(op):
    count_parts(op, 2, 0)
    _response(op, op.operands[0])


@rule("clc_load_result")
def _load_result(op):
    count_parts(op, 1, 4)
    _response(op, op.operands[0])
    if [r.type for r in op.results] != [int1, int32, int32, int32]:
        fail(op, "results must be int1, int32, int32, int32")
