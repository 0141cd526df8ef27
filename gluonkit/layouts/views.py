"""Gluon's plain-text views of a layout: ``format_tensor_view`` and ``format_hardware_view``.

Both are computed from the layout's :class:`~gluonkit.layouts.linear.LinearLayout` alone
and print exactly what Gluon 3.9 prints, so a printout can be compared with one from
Triton.  (:mod:`gluonkit.layouts.show` draws richer pictures: HTML, SVG, banks.)

* Tensor view: nested brackets over the tensor's shape, one line per innermost row.  For
  a distributed layout each place is an element and lists every holder,
  ``T<thread>:<register>`` (``B<cta>:`` first when the layout spans several CTAs), joined
  by ``|``.  For a shared layout each place is a location of the buffer (CTA by CTA,
  offset by offset, laid over the shape row-major) and shows the element stored there.
* Hardware view: for a distributed layout, per warp, one line per register listing the
  element each lane holds; for a shared layout, one line per offset.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from .linear import LinearLayout

__all__ = ["tensor_view", "hardware_view"]


def tensor_view(ll: LinearLayout, shape: Sequence[int]) -> str:
    """Gluon's ``format_tensor_view`` of linear layout ``ll`` for a tensor of ``shape``."""
    shape = [int(s) for s in shape]
    holders: List[List[str]] = [[] for _ in range(_numel(shape))]
    images = _images(ll, shape)
    if ll.has_in_dim("offset"):
        # The buffer (CTA by CTA, offset by offset) laid over the tensor's shape: each
        # place shows the element stored there.
        cells = ["(" + ":".join(_pad(c, s) for c, s in zip(_unflatten(e, shape), shape)) + ")"
                 for e in _shared_images(ll, images, shape)]
        return _nested(cells, shape, ",")
    else:
        blocks, warps = _size(ll, "block"), _size(ll, "warp")
        lanes, regs = _size(ll, "lane"), _size(ll, "register")
        prefix = blocks > 1
        width = len(_holder(blocks - 1, warps * lanes - 1, regs - 1, prefix))
        for flat, element in enumerate(images):
            reg, thread = flat % regs, flat // regs
            text = _holder(thread // (warps * lanes), thread % (warps * lanes), reg, prefix)
            holders[element].append(text.rjust(width))
        separator = ", "
    return _nested(["|".join(h) for h in holders], shape, separator)


def hardware_view(ll: LinearLayout, shape: Sequence[int]) -> str:
    """Gluon's ``format_hardware_view`` of linear layout ``ll`` for a tensor of ``shape``."""
    shape = [int(s) for s in shape]

    def coords(element: Sequence[int], sep: str) -> str:
        return "(" + sep.join(_pad(c, s) for c, s in zip(element, shape)) + ")"

    lines: List[str] = []
    if ll.has_in_dim("offset"):
        blocks = _size(ll, "block")
        for block in range(blocks):
            lines.append(f"Block: {block}:")
            for offset in range(_numel(shape) // blocks):
                lines.append(f"Offset: {offset} -> " + coords(_apply(ll, {"offset": offset, "block": block}), ","))
        return "\n".join(lines) + "\n"
    blocks = _size(ll, "block")
    for block in range(blocks):
        if blocks > 1:
            lines.append(f"Block{block}:")
        for warp in range(_size(ll, "warp")):
            lines.append(f"Warp{warp}:")
            for reg in range(_size(ll, "register")):
                row = [coords(_apply(ll, {"register": reg, "lane": lane, "warp": warp, "block": block}), ",")
                       for lane in range(_size(ll, "lane"))]
                lines.append(", ".join(row))
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------- helpers
def _holder(block: int, thread: int, reg: int, prefix: bool) -> str:
    return (f"B{block}:" if prefix else "") + f"T{thread}:{reg}"


def _nested(cells: List[str], shape: Sequence[int], separator: str) -> str:
    """``cells`` (row-major over ``shape``) as nested brackets, one line per last-dim row.

    A line opens one bracket per dimension whose index just restarted at 0 and is indented
    by the brackets it does not open; it closes one per dimension that ends with it.
    """
    rank = len(shape)
    out: List[str] = []
    line: List[str] = []
    for i, cell in enumerate(cells):
        index = _unflatten(i, shape)
        if index[-1] == 0:
            opened = _trailing(index, lambda d, x: x == 0)
            start = "[" * opened + " " * (rank - opened)
            line = []
        line.append(cell)
        if index[-1] == shape[-1] - 1:
            closed = _trailing(index, lambda d, x: x == shape[d] - 1)
            out.append(start + separator.join(line) + "]" * closed)
    return "\n".join(out) + "\n"


def _trailing(index: Sequence[int], test) -> int:
    """How many dimensions, from the last, satisfy ``test(dim, index[dim])`` in a row."""
    n = 0
    for d in reversed(range(len(index))):
        if not test(d, index[d]):
            break
        n += 1
    return n


def _pad(value: int, size: int) -> str:
    return str(value).rjust(len(str(size - 1)))


def _size(ll: LinearLayout, dim: str) -> int:
    return ll.in_dim_size(dim) if ll.has_in_dim(dim) else 1


def _apply(ll: LinearLayout, ins: Dict[str, int]) -> List[int]:
    """The element (``dim0`` first) that the hardware index ``ins`` holds."""
    out = ll.apply({d: x for d, x in ins.items() if ll.has_in_dim(d)})
    return [out[f"dim{i}"] for i in range(len(out))]


def _images(ll: LinearLayout, shape: Sequence[int]) -> List[int]:
    """Row-major flat element of every hardware index, in flat input order (the distributed
    inputs ``register``, ``lane``, ``warp``, ``block`` or the shared ``offset``, ``block``,
    first one fastest)."""
    order = [d for d in ("register", "lane", "warp", "offset", "block") if ll.has_in_dim(d)]
    table = ll.transpose_ins(order).transpose_outs([f"dim{i}" for i in range(len(shape))]).table()
    flat = table[:, 0] * 0
    for j, s in enumerate(shape):
        flat = flat * s + table[:, j]
    return [int(x) for x in flat]


def _unflatten(flat: int, shape: Sequence[int]) -> List[int]:
    out = []
    for s in reversed(shape):
        out.append(flat % s)
        flat //= s
    return out[::-1]


def _shared_images(ll: LinearLayout, images: List[int], shape: Sequence[int]) -> List[int]:
    """The images of each CTA's first ``numel / ctas`` offsets, CTA by CTA: the places of
    the buffer that the tensor's elements fill (a padded layout has more offsets)."""
    offsets, blocks = ll.in_dim_size("offset"), _size(ll, "block")
    used = _numel(shape) // blocks
    return [images[b * offsets + o] for b in range(blocks) for o in range(used)]


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
