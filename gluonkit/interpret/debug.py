"""Rules for ``device_print``, ``device_assert``, ``assume`` and ``hint`` — where the
interpreter checks promises.

``device_print`` prints one line per element (in row-major order) and program:
``pid (x, y, z) idx (i, j) <prefix> <value>``, with ``(operand k)`` before the value when
several values are printed, and the value's bits in hex with ``hex``.  ``device_assert``
raises at the user's line naming the program and the first failing element, and ``assume``
raises when its condition is false.  ``hint`` passes its operand through and checks what can be
checked: a scalar's ``multiple_of`` divisibility (bytes for pointers) and, for tensors,
``max_contiguous`` (each aligned run of that many elements along a dimension increases by
one, pointers by one element) — a wrong hint makes the GPU vectorize wrongly.
"""

from __future__ import annotations

import numpy as np

from ..ir.types import PointerType, TensorType, element_type
from .engine import rule
from .errors import InterpreterError
from .values import Tensor, element_text, to_logical


def _text(value, hex_: bool) -> str:
    if hex_:
        a = np.asarray(value)
        return hex(int(a.view(np.dtype(f"uint{8 * a.itemsize}"))))
    if isinstance(value, (np.floating,)) or np.asarray(value).dtype.kind == "V":
        return repr(float(value))
    return str(value.item() if hasattr(value, "item") else value)


@rule("device_print")
def _device_print(program, op, operands):
    prefix = op.attrs.get("prefix") or ""
    if prefix and not prefix[-1].isspace():
        prefix += " "
    pid = ", ".join(str(i) for i in program.pid)
    lines = []
    for k, value in enumerate(operands):
        label = f"(operand {k}) " if len(operands) > 1 else ""
        if isinstance(value, Tensor):
            logical = to_logical(value, program.threads, op.loc, f"printed operand {k}")
            for idx in np.ndindex(logical.shape):
                lines.append(f"pid ({pid}) idx ({', '.join(map(str, idx))}) {prefix}{label}"
                             f"{_text(logical[idx], op.attrs.get('hex'))}")
        else:
            lines.append(f"pid ({pid}) idx () {prefix}{label}{_text(value, op.attrs.get('hex'))}")
    print("\n".join(lines), flush=True)
    return []


@rule("device_assert")
def _device_assert(program, op, operands):
    (value,) = operands
    where = ""
    if isinstance(value, Tensor):
        logical = to_logical(value, program.threads, op.loc, "the asserted condition")
        failed = np.argwhere(~logical.astype(bool))
        if not len(failed):
            return []
        where = f" at {element_text(logical.shape, np.ravel_multi_index(tuple(failed[0]), logical.shape))}"
    elif bool(value):
        return []
    message = op.attrs.get("message") or "device_assert"
    raise InterpreterError(f"device_assert failed in program {program.pid}{where}: {message}", op.loc)


@rule("assume")
def _assume(program, op, operands):
    if not bool(operands[0]):
        raise InterpreterError(f"assume: the assumed condition is false in program {program.pid}", op.loc)
    return []


def _per_dim(attr, rank: int):
    if attr is None:
        return None
    values = [int(attr)] * max(rank, 1) if np.ndim(attr) == 0 else [int(a) for a in attr]
    return values


@rule("hint")
def _hint(program, op, operands):
    (value,) = operands
    ty = op.operands[0].type
    scale = element_type(ty).element.itemsize if isinstance(element_type(ty), PointerType) else 1
    if isinstance(ty, TensorType):
        contiguous = _per_dim(op.attrs.get("max_contiguous"), ty.rank)
        if contiguous:
            _check_contiguous(program, op, value, contiguous, scale)
    else:
        multiple = _per_dim(op.attrs.get("multiple_of"), 0)
        if multiple and multiple[0] > 1 and int(value) % multiple[0]:
            unit = " bytes" if scale > 1 else ""
            raise InterpreterError(
                f"hint: value {int(value)} is not a multiple of {multiple[0]}{unit}, as the hint "
                f"(or the launch's divisibility specialization) promises", op.loc)
    return [value]


def _check_contiguous(program, op, value, contiguous, scale) -> None:
    logical = to_logical(value, program.threads, op.loc, "the hinted value").astype(np.int64)
    for dim, run in enumerate(contiguous):
        if run <= 1 or logical.shape[dim] % run:
            continue
        moved = np.moveaxis(logical, dim, -1)
        runs = moved.reshape(moved.shape[:-1] + (-1, run))
        expected = runs[..., :1] + scale * np.arange(run)
        bad = runs != expected
        if bad.any():
            where = np.argwhere(bad)[0]
            pos = list(where[:-2])
            pos.insert(dim, where[-2] * run + where[-1])
            raise InterpreterError(
                f"hint: max_contiguous={run} along dimension {dim} does not hold: "
                f"{element_text(logical.shape, np.ravel_multi_index(tuple(pos), logical.shape))} is "
                f"{int(logical[tuple(pos)])}, expected {int(expected[tuple(where)])}", op.loc)
