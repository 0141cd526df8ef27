"""Rules for ``scan``, ``histogram``, ``gather`` and ``map_elementwise``.

``scan`` runs the GPU lowering's combine tree (:mod:`gluonkit.lower.ops.scan`) on the
logical tensor, so floating-point results agree with the GPU bit for bit whatever the
layout: for each bit ``j`` of the position along the axis, from the lowest, the two
halves of every aligned block of ``2^(j+1)`` positions meet; each position keeps ``P``
(the scan so far inside its block) and ``T`` (its block's total), and with ``e`` the
earlier half (the lower one; the upper one when ``reverse``) and ``l`` the later one::

    T_new = f(T_e, T_l)          P_l = f(T_e, P_l)         (P_e unchanged)

``histogram`` and ``gather`` read the logical operands (replicated copies must agree);
an out-of-range gather index is an error here, where the GPU would read some element.
``map_elementwise`` applies its region to groups of ``pack`` consecutive registers of
each thread — on whole register files at once, or one group at a time when the region
branches (control flow runs only on uniform scalars).
"""

from __future__ import annotations

from typing import List

import numpy as np

from .engine import rule
from .errors import InterpreterError
from .values import Tensor, element_text, from_logical, to_logical

__all__: List[str] = []


def _run(program, block, args, shape):
    out = program.run_block(block, list(args))
    return [np.broadcast_to(np.asarray(o), shape).copy() for o in out]


def _check_scan_layout(program, op, axis: int) -> None:
    """Refuse the layouts the GPU lowering refuses: each basis moving along the axis must
    move along it alone, by a power of two (so that one hardware bit carries each position
    bit), and never across CTAs."""
    bases = program.placement(op.operands[0].type, op).linear.bases
    for dim, vectors in bases.items():
        for v in vectors:
            along = v[axis]
            if along and (dim == "block" or along & (along - 1) or any(c for d, c in enumerate(v) if d != axis)):
                raise InterpreterError(
                    f"scan along axis {axis}: the {dim} basis {list(v)} of the operand's layout "
                    f"{op.operands[0].type.layout!r} does not move along the axis alone by a power of two; "
                    "convert_layout the operand to a blocked layout first (a block basis: scans across the CTAs of a "
                    "cluster are not built; use a cga_layout that keeps the axis in each CTA)", op.loc)


@rule("scan")
def _scan(program, op, operands):
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    combine = op.regions[0]
    _check_scan_layout(program, op, axis)
    xs = [to_logical(t, program.threads, op.loc, "the scan operand") for t in operands]
    shape = xs[0].shape
    n = shape[axis]
    prefix = [x.copy() for x in xs]
    total = [x.copy() for x in xs]
    early, late = (1, 0) if reverse else (0, 1)
    for j in range(n.bit_length() - 1):
        split = shape[:axis] + (n >> (j + 1), 2, 1 << j) + shape[axis + 1:]
        p = [a.reshape(split) for a in prefix]
        t = [a.reshape(split) for a in total]
        half = lambda arrays, k: [np.take(a, k, axis=axis + 1) for a in arrays]  # noqa: E731
        t_e, t_l, p_l = half(t, early), half(t, late), half(p, late)
        half_shape = t_e[0].shape
        new_total = _run(program, combine, t_e + t_l, half_shape)
        new_late = _run(program, combine, t_e + p_l, half_shape)
        for a, tot in zip(t, new_total):
            a_index = [slice(None)] * a.ndim
            for k in (0, 1):
                a_index[axis + 1] = k
                a[tuple(a_index)] = tot
        for a, lat in zip(p, new_late):
            a_index = [slice(None)] * a.ndim
            a_index[axis + 1] = late
            a[tuple(a_index)] = lat
        prefix = [a.reshape(shape) for a in p]
        total = [a.reshape(shape) for a in t]
    return [from_logical(a, r.type, program.threads, op.loc) for a, r in zip(prefix, op.results)]


@rule("histogram")
def _histogram(program, op, operands):
    x = to_logical(operands[0], program.threads, op.loc, "the histogram input").astype(np.int64)
    if op.attrs["has_mask"]:
        x = x[to_logical(operands[1], program.threads, op.loc, "the histogram mask").astype(bool)]
    bins = op.attrs["num_bins"]
    counts = np.bincount(x[(x >= 0) & (x < bins)], minlength=bins).astype(np.int32)
    return [from_logical(counts, op.results[0].type, program.threads, op.loc)]


@rule("gather")
def _gather(program, op, operands):
    axis = op.attrs["axis"]
    src = to_logical(operands[0], program.threads, op.loc, "the gather source")
    index = to_logical(operands[1], program.threads, op.loc, "the gather index").astype(np.int64)
    bad = (index < 0) | (index >= src.shape[axis])
    if bad.any():
        k = int(np.flatnonzero(bad.ravel())[0])
        raise InterpreterError(
            f"gather: index {int(index.ravel()[k])} at {element_text(index.shape, k)} is outside the source's "
            f"{src.shape[axis]} elements along axis {axis}", op.loc)
    return [from_logical(np.take_along_axis(src, index, axis=axis), op.results[0].type, program.threads, op.loc)]


def _branches(block) -> bool:
    return any(o.regions for o in block.ops)


@rule("map_elementwise")
def _map_elementwise(program, op, operands):
    pack = op.attrs["pack"]
    fn = op.regions[0]
    threads, regs = operands[0].regs.shape
    if regs % pack:
        raise InterpreterError(
            f"map_elementwise: each thread holds {regs} register(s) of the operands' layout, not a multiple of "
            f"pack={pack}; choose a layout with a multiple of {pack} elements per thread", op.loc)
    groups = [t.regs.reshape(threads, regs // pack, pack) for t in operands]
    args = [g[..., k] for g in groups for k in range(pack)]
    shape = (threads, regs // pack)
    if not _branches(fn):
        out = _run(program, fn, args, shape)
    else:
        out = None
        for index in np.ndindex(*shape):
            values = program.run_block(fn, [a[index] for a in args])
            if out is None:
                out = [np.empty(shape, dtype=np.asarray(v).dtype) for v in values]
            for o, v in zip(out, values):
                o[index] = v
    results = []
    for i, r in enumerate(op.results):
        regs_out = np.stack(out[i * pack:(i + 1) * pack], axis=-1).reshape(threads, regs)
        results.append(Tensor(r.type, regs_out))
    return results
