"""Verifier rules of the cluster ops (``cluster_barrier``)."""

from __future__ import annotations

from .verifier import rule
from .verify_checks import count_parts, fail

__all__ = []


@rule("cluster_barrier")
def _cluster_barrier(op):
    count_parts(op, 0, 0)
    if not isinstance(op.attrs.get("relaxed"), bool):
        fail(op, f"relaxed must be a bool, got {op.attrs.get('relaxed')!r}")
