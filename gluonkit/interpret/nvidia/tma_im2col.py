"""Which global elements a TMA im2col load gathers, and where each lands in its block.

An im2col descriptor reads an N(D)HWC tensor (rank 3 to 5).  A load of block
``[pixels, channels]`` at coordinates ``[n, (d,) (h,) w, c]`` with im2col offsets
``[(d,) (h,) w]`` (one per spatial dimension) fills row ``k`` of the block with channels
``c .. c + channels - 1`` of the ``k``-th pixel of a walk through the *bounding box*:

* spatial dimension ``i`` (extent ``S``) has filter positions ``lower[i] .. S - 1 +
  upper[i]`` (inclusive), the descriptor's pixel box corners, stepped by its element stride
  (the convolution's traversal stride);
* the walk starts at the filter position given by the coordinates (which must lie in
  the box) and advances the last spatial dimension (W) by its stride; past the box's end
  it goes back to the box's start and advances the previous dimension (H, then D), and
  past all of them to the next image, stepping the batch by its element stride too
  (``n + element_strides[0]``);
* the pixel read at filter position ``p`` is ``p + offsets`` (the filter tap);
* elements outside the tensor (a pixel outside ``[0, S)`` in some spatial dimension, an
  image past ``N``, a channel past ``C``) read as the descriptor's fill: zero, or NaN
  with ``padding="nan"``.

This is the PTX ISA's im2col mode (bounding box, traversal stride, out-of-bounds access)
as the Gluon 3.9 tutorial on im2col exercises it on the hardware.  Measured on an H100
(``tests/test_tma_im2col.py`` has the cases): the batch steps by its element stride, a walk
that starts off the stride's lattice keeps its phase until it wraps to the box's start, and
a filter position outside the box is an illegal instruction (here an
:class:`~gluonkit.interpret.InterpreterError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from ..errors import InterpreterError

__all__ = ["Im2ColMap", "im2col_box"]

@dataclass(frozen=True)
class Im2ColMap:
    """The im2col part of a descriptor: pixel box corners (spatial dimensions, Python order)
    and the element strides of every dimension (Python order; the spatial ones are the
    traversal strides)."""

    lower: Tuple[int, ...]
    upper: Tuple[int, ...]
    element_strides: Tuple[int, ...]


def _pixels(tmap, im2col: Im2ColMap, count: int, coords: Sequence[int], loc) -> np.ndarray:
    """``[count, rank - 1]``: the image and filter position of each pixel of the walk."""
    spatial = tmap.shape[1:-1]
    lo = im2col.lower
    hi = [s - 1 + u for s, u in zip(spatial, im2col.upper)]
    steps = im2col.element_strides[1:-1]
    image_step = im2col.element_strides[0]
    n, pos = int(coords[0]), [int(c) for c in coords[1:-1]]
    for d, (p, a, b) in enumerate(zip(pos, lo, hi)):
        if not a <= p <= b:
            raise InterpreterError(f"im2col load: coordinate {d + 1} (filter position {p} of spatial dimension {d}) "
                                   f"lies outside the bounding box [{a}, {b}] (pixel box corners {list(lo)} / "
                                   f"{list(im2col.upper)} of extents {list(spatial)}); the hardware requires the "
                                   "filter position inside it", loc)
    out = np.empty((count, len(pos) + 1), np.int64)
    for k in range(count):
        out[k, 0] = n
        out[k, 1:] = pos
        for d in reversed(range(len(pos))):
            pos[d] += steps[d]
            if pos[d] <= hi[d]:
                break
            pos[d] = lo[d]
        else:
            n += image_step
    return out


def im2col_box(tmap, im2col: Im2ColMap, block: Tuple[int, int], coords: Sequence[int], offsets: Sequence[int],
               limit: int, loc):
    """(byte address per in-bounds element, in-bounds mask of the ``block``) of one im2col load.

    ``tmap`` is the descriptor's :class:`~.tma.TensorMap`; ``offsets`` are the instruction's
    16-bit im2col offsets (as signed int16 values: their bits are what counts), each at
    most ``limit`` (the descriptor type's ``max_offset``).
    """
    rank = len(tmap.shape)
    taps = [int(o) & 0xFFFF for o in offsets]
    for d, t in enumerate(taps):
        if t > limit:
            raise InterpreterError(f"im2col load: offset {d} is {t}; for a rank-{rank} tensor the im2col offsets "
                                   f"are at most {limit}", loc)
    pixels, channels = block
    walk = _pixels(tmap, im2col, pixels, coords, loc)
    image = walk[:, 0]
    at = walk[:, 1:] + np.asarray(taps, np.int64)
    spatial = np.asarray(tmap.shape[1:-1], np.int64)
    row_inside = (image >= 0) & (image < tmap.shape[0]) & np.all((at >= 0) & (at < spatial), axis=1)
    channel = int(coords[-1]) + np.arange(channels, dtype=np.int64)
    inside = row_inside[:, None] & ((channel >= 0) & (channel < tmap.shape[-1]))[None, :]
    strides = np.asarray(tmap.strides, np.int64)
    row_offset = image * strides[0] + at @ strides[1:-1]
    offset = row_offset[:, None] + channel[None, :] * strides[-1]
    return tmap.origin + offset[inside] * tmap.element.itemsize, inside
