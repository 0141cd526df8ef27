"""Rules for ops that make values: constants, program ids, ``arange`` and ``splat``."""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType
from .dtypes import from_python
from .engine import rule
from .values import from_logical


@rule("constant")
def _constant(program, op, operands):
    ty = op.results[0].type
    element = ty.element if isinstance(ty, TensorType) else ty
    value = from_python(op.attrs["value"], element)
    if isinstance(ty, TensorType):
        return [from_logical(value, ty, program.threads, op.loc)]
    return [value[()]]


@rule("program_id")
def _program_id(program, op, operands):
    return [np.int32(program.pid[op.attrs["axis"]])]


@rule("num_programs")
def _num_programs(program, op, operands):
    return [np.int32(program.grid[op.attrs["axis"]])]


@rule("arange")
def _arange(program, op, operands):
    values = np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int32)
    return [from_logical(values, op.results[0].type, program.threads, op.loc)]


@rule("splat")
def _splat(program, op, operands):
    return [from_logical(operands[0], op.results[0].type, program.threads, op.loc)]
