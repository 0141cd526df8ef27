"""Rules for global-memory ``load`` and ``store``.

Every (thread, register) accesses its own element, as on the GPU; elements whose mask is
false never touch memory.  A masked-off load element takes ``other`` (0 without one: the
GPU leaves it undefined).  Faults name the op's line, the address, the allocation and the
element of the pointer tensor (and the thread/register holding it).  A store first checks
that the layout's replicated copies of each stored element agree; distinct elements
writing different values to one address are a race (:meth:`Memory.write`).
"""

from __future__ import annotations

import numpy as np

from ..ir.types import TensorType, element_type
from .dtypes import numpy_dtype
from .engine import rule
from .values import Tensor, element_text, raw, to_logical, wrap


def _describer(program, op, ty, active):
    """Text for the i-th active (unmasked) access: the element and where it is held."""
    pid = f"program {tuple(program.pid)}"
    if not isinstance(ty, TensorType):
        return lambda i: f"the scalar pointer in {pid}"
    p = program.placement(ty, op)
    positions = np.flatnonzero(active.ravel())

    def describe(i: int) -> str:
        k = int(positions[i])
        return (f"pointer {element_text(p.shape, int(p.index.ravel()[k]))} in {pid} (thread "
                f"{k // p.num_regs}, register {k % p.num_regs})")

    return describe


@rule("load")
def _load(program, op, operands):
    ptr_ty = op.operands[0].type
    addresses = np.asarray(raw(operands[0]), dtype=np.int64)
    rest = list(operands[1:])
    active = np.asarray(raw(rest.pop(0)), bool) if op.attrs.get("has_mask") else np.ones(addresses.shape, bool)
    active = np.broadcast_to(active, addresses.shape)
    dtype = numpy_dtype(element_type(op.results[0].type))
    result = np.zeros(addresses.shape, dtype=dtype)
    if op.attrs.get("has_other"):
        result[...] = np.broadcast_to(np.asarray(raw(rest.pop(0))), addresses.shape)
    values = program.memory.read(addresses[active], dtype, op.loc, _describer(program, op, ptr_ty, active))
    result[active] = values
    return [wrap(op.results[0].type, result)]


def writes_here(program, ty, op) -> bool:
    """This CTA writes the elements of a ``ty`` value it holds: without a cluster always; in
    one, the CTAs that hold the same elements (zero ``block`` bases) leave it to the lowest
    rank, and a layout split between CTAs lets each write its own share (the lowering's
    ``cluster_leader``)."""
    if not program.cta_rank:
        return True
    if not isinstance(ty, TensorType):
        return False
    bases = program.placement(ty, op).linear.bases.get("block", [])
    split = sum(1 << i for i, v in enumerate(bases) if any(v))
    return not program.cta_rank & ~split


@rule("store")
def _store(program, op, operands):
    if not writes_here(program, op.operands[1].type, op):
        return []
    ptr_ty = op.operands[0].type
    if isinstance(operands[1], Tensor):
        to_logical(operands[1], program.threads, op.loc, "the stored value")  # copies agree
    addresses = np.asarray(raw(operands[0]), dtype=np.int64)
    values = np.broadcast_to(np.asarray(raw(operands[1])), addresses.shape)
    active = (np.asarray(raw(operands[2]), bool) if op.attrs.get("has_mask")
              else np.ones(addresses.shape, bool))
    active = np.broadcast_to(active, addresses.shape)
    program.memory.write(addresses[active], values[active], op.loc, _describer(program, op, ptr_ty, active))
    return []
