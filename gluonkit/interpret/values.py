"""Runtime values: distributed tensors as per-thread register files, and their placements.

A distributed tensor is held the way the GPU holds it: a :class:`Tensor` with a numpy
array ``regs`` of shape ``(num_threads, num_registers)`` where ``thread = lane + 32 * warp``
and registers are in the layout's register order.  Which element each (thread, register)
holds comes from the layout's linear layout (:class:`Placement`).  Elements a layout
replicates live in several registers; converting to a plain (logical) array checks that
every copy agrees, which is how layout bugs surface on the CPU.

Scalars (uniform across the program) are numpy scalars; inside a reduce's combine
function they are numpy arrays, one entry per (thread, partial result).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Tuple

import numpy as np

from ..ir.diagnostics import Location
from ..ir.types import TensorType
from .dtypes import numpy_dtype
from .errors import InterpreterError

__all__ = ["Tensor", "Placement", "placement", "to_logical", "from_logical", "gather_local",
           "raw", "wrap", "element_text"]

_LANES = 32


@dataclass
class Tensor:
    """A distributed tensor: ``regs[thread, register]`` in the layout of ``type``."""

    type: TensorType
    regs: np.ndarray


@dataclass(frozen=True)
class Placement:
    """Where a layout puts a tensor of ``shape``.

    ``coords[t, r]`` is the coordinate held by register ``r`` of thread ``t``, ``index[t, r]``
    the same as a row-major flat index; ``owner[i]`` is the first (thread * num_regs + reg)
    holding flat element ``i``.
    """

    shape: Tuple[int, ...]
    layout: object
    linear: object
    coords: np.ndarray
    index: np.ndarray
    owner: np.ndarray

    @property
    def num_threads(self) -> int:
        return self.index.shape[0]

    @property
    def num_regs(self) -> int:
        return self.index.shape[1]


def _threads(threads) -> Tuple[int, int]:
    """``(num_warps, cta_rank)`` from a program's ``threads`` (a bare ``num_warps`` is CTA 0)."""
    return (threads, 0) if isinstance(threads, (int, np.integer)) else tuple(threads)


@lru_cache(maxsize=512)
def _placement(layout, shape: Tuple[int, ...], num_warps: int, cta: int) -> Placement:
    ll = layout.to_linear_layout(list(shape))
    lanes, warps, blocks = (ll.in_dim_size(d) if ll.has_in_dim(d) else 1 for d in ("lane", "warp", "block"))
    if (lanes, warps) != (_LANES, num_warps):
        raise ValueError(
            f"layout {layout!r} spreads a tensor of shape {list(shape)} over {lanes} lanes and "
            f"{warps} warps, but the kernel runs with 32 lanes and {num_warps} warps")
    regs = ll.in_dim_size("register") if ll.has_in_dim("register") else 1
    # A layout split between the CTAs of a cluster (block bases): this CTA's share only.
    own = ll.apply({"block": cta % blocks}) if blocks > 1 else {d: 0 for d in ll.out_dims}
    table = ll.sublayout([d for d in ("register", "lane", "warp") if ll.has_in_dim(d)], ll.out_dims).table() \
        if blocks > 1 else ll.table()
    coords = table.reshape(lanes * warps, regs, len(shape)) ^ np.array([own[d] for d in ll.out_dims], dtype=table.dtype)
    index = np.ravel_multi_index(tuple(np.moveaxis(coords, -1, 0)), shape) if shape else \
        np.zeros((lanes * warps, regs), dtype=np.int64)
    flat = index.ravel()
    numel = int(np.prod(shape, dtype=np.int64))
    owner = np.full(numel, -1, dtype=np.int64)
    held, first = np.unique(flat, return_index=True)
    owner[held] = first
    if blocks == 1 and (owner < 0).any():
        missing = np.unravel_index(int(np.flatnonzero(owner < 0)[0]), shape)
        raise ValueError(f"layout {layout!r} holds no copy of element {tuple(int(c) for c in missing)} "
                         f"of a tensor of shape {list(shape)}")
    for a in (coords, index, owner):
        a.setflags(write=False)
    return Placement(tuple(shape), layout, ll, coords, index, owner)


def placement(ty: TensorType, threads, loc: Location) -> Placement:
    """The placement of tensor type ``ty`` for a program's ``threads`` (``(num_warps, cta_rank)``,
    or ``num_warps`` for CTA 0); a layout that does not fit raises at ``loc``."""
    try:
        return _placement(ty.layout, tuple(ty.shape), *_threads(threads))
    except ValueError as e:
        raise InterpreterError(str(e), loc) from None


def element_text(shape, flat_index: int) -> str:
    """``"element (i, j)"`` for a row-major flat index of a tensor of ``shape``."""
    if not shape:
        return "the scalar"
    coord = np.unravel_index(int(flat_index), shape)
    return f"element ({', '.join(str(int(c)) for c in coord)})"


def to_logical(t: Tensor, num_warps: int, loc: Location, what: str = "value") -> np.ndarray:
    """The tensor as a plain array of its shape; replicated copies must agree bit for bit."""
    p = placement(t.type, num_warps, loc)
    flat_regs = t.regs.ravel()
    logical = flat_regs[p.owner]
    if (p.owner < 0).any():  # split between CTAs: another CTA's elements are not this one's to see
        logical = logical.copy()
        logical[p.owner < 0] = np.zeros((), logical.dtype)
    bits = _bits(flat_regs)
    differ = bits != _bits(logical)[p.index.ravel()]
    if differ.any():
        k = int(np.flatnonzero(differ)[0])
        i = int(p.index.ravel()[k])
        first = int(p.owner[i])
        raise InterpreterError(
            f"replicated copies of {what} {element_text(p.shape, i)} disagree: thread "
            f"{first // p.num_regs} register {first % p.num_regs} holds {logical[i]!r} but thread "
            f"{k // p.num_regs} register {k % p.num_regs} holds {flat_regs[k]!r} "
            f"(layout {t.type.layout!r}); an op produced per-thread results that the layout "
            f"says must be equal", loc)
    return logical.reshape(p.shape)


def from_logical(array, ty: TensorType, num_warps: int, loc: Location) -> Tensor:
    """Distribute a plain array (broadcast to ``ty.shape``) into ``ty``'s layout."""
    p = placement(ty, num_warps, loc)
    flat = np.broadcast_to(np.asarray(array), p.shape).ravel()
    return Tensor(ty, flat[p.index].astype(numpy_dtype(ty.element), copy=False))


def gather_local(src_keys: np.ndarray, src_regs: np.ndarray, dst_keys: np.ndarray,
                 loc: Location, explain) -> np.ndarray:
    """Registers of the result of an op that moves no data between threads.

    ``src_keys[t, r]`` names the element held by register ``r`` of thread ``t`` of the source;
    ``dst_keys[t, r]`` the source element each result register must hold.  Each result
    register takes a matching register *of the same thread*; when the thread has none the
    result layout is not one this op can produce without moving data, and
    ``explain(thread, register, key)`` says so in the raised error.
    """
    threads = src_keys.shape[0]
    span = int(max(src_keys.max(initial=0), dst_keys.max(initial=0))) + 1
    tid = np.arange(threads, dtype=np.int64)[:, None] * span
    have = (tid + src_keys).ravel()
    order = np.argsort(have, kind="stable")
    have = have[order]
    want = (tid + dst_keys).ravel()
    pos = np.minimum(np.searchsorted(have, want), have.size - 1)
    found = have[pos] == want
    if not found.all():
        k = int(np.flatnonzero(~found)[0])
        regs = dst_keys.shape[1]
        raise InterpreterError(explain(k // regs, k % regs, int(dst_keys.ravel()[k])), loc)
    return src_regs.ravel()[order[pos]].reshape(dst_keys.shape)


def raw(value) -> np.ndarray:
    """The numpy data of a runtime value: a tensor's register file, or the scalar itself."""
    return value.regs if isinstance(value, Tensor) else value


def wrap(ty, data):
    """A runtime value of IR type ``ty`` from numpy data computed by an element-wise rule."""
    data = np.asarray(data).astype(numpy_dtype(ty.element if isinstance(ty, TensorType) else ty), copy=False)
    if isinstance(ty, TensorType):
        return Tensor(ty, data)
    return data[()] if data.ndim == 0 else data


def _bits(a: np.ndarray) -> np.ndarray:
    """A view of ``a``'s raw bits, so NaNs compare equal to themselves."""
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"uint{8 * a.itemsize}")) if a.itemsize in (1, 2, 4, 8) else a
