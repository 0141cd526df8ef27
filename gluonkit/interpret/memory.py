"""Simulated global memory: numpy arrays placed in one flat address space.

Every registered array becomes an *allocation* whose address keeps the array's real
address modulo 256 (so a view starting 4 bytes into a buffer is 4 bytes off 16-byte
alignment here too, and divisibility specialization sees what the GPU would), with an
unmapped gap after it at least as large as the array (and 4 KiB), so an access just past
the end — the usual off-by-one-tile bug — lands in no allocation and is reported instead of
silently reading a neighbour, as the GPU would.  Reads and writes go straight to the
registered array's bytes, so kernels write their outputs in place.

Accesses are vectors of byte addresses (one per unmasked element).  A fault raises
:class:`~.errors.InterpreterError` at the op's source line naming the address, the
allocation it is outside of (or the nearest one), and — through ``describe`` — which
element of the kernel's pointer tensor made it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Callable, List, Optional

import numpy as np

from ..ir.diagnostics import Location, UNKNOWN_LOCATION
from .errors import InterpreterError

__all__ = ["Memory", "Allocation"]

_ALIGN = 256
_MIN_GAP = 4096
_FIRST_ADDRESS = 0x10000  # small addresses (null + offset) are never valid


@dataclass
class Allocation:
    """One registered array: ``nbytes`` bytes at ``base``; ``origin`` is element 0's address.

    ``base`` is the address of the array's lowest byte (element 0 unless strides are negative).
    """

    name: str
    base: int
    nbytes: int
    origin: int
    data: np.ndarray  # uint8 view of the array's bytes (aliases the array)
    array: np.ndarray  # kept alive: ``data`` points into its buffer

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def describe(self) -> str:
        a = self.array
        return (f"{self.name} ({a.dtype}{list(a.shape)}, {self.nbytes} bytes at "
                f"{self.base:#x}..{self.end:#x})")


def _byte_extent(array: np.ndarray) -> tuple:
    """(lowest, highest + 1) byte offsets of ``array``'s elements relative to element 0."""
    low = high = 0
    for n, stride in zip(array.shape, array.strides):
        if n == 0:
            return 0, 0
        reach = (n - 1) * stride
        low, high = low + min(reach, 0), high + max(reach, 0)
    return low, high + array.itemsize


class Memory:
    """A flat address space of registered numpy arrays (see the module docstring)."""

    def __init__(self):
        self.allocations: List[Allocation] = []
        self._next = _FIRST_ADDRESS
        self.launch = None  # the running launch's engine.GridLaunch (None: none, or a single run_program)

    def register(self, array: np.ndarray, name: Optional[str] = None) -> int:
        """Place ``array`` in memory; return the address of its element 0.

        Any strided array works: the allocation covers the bytes between its lowest and
        highest element, and writes land in the array itself.
        """
        if not isinstance(array, np.ndarray):
            raise TypeError(f"Memory.register: expected a numpy array, got {type(array).__name__}")
        if not array.flags.writeable:
            raise ValueError(f"Memory.register: array {name or ''} is read-only; kernels write in place")
        low, high = _byte_extent(array)
        nbytes = high - low
        start = array.__array_interface__["data"][0] + low
        raw = (ctypes.c_uint8 * nbytes).from_address(start) if nbytes else bytearray()
        data = np.frombuffer(raw, dtype=np.uint8)
        base = -(-self._next // _ALIGN) * _ALIGN + start % _ALIGN
        gap = max(_MIN_GAP, -(-nbytes // _ALIGN) * _ALIGN)
        self._next = base + nbytes + gap
        alloc = Allocation(name or f"allocation {len(self.allocations)}", base, nbytes,
                           base - low, data, array)
        self.allocations.append(alloc)
        return alloc.origin

    # ------------------------------------------------------------------ access
    def read(self, addresses: np.ndarray, dtype: np.dtype, loc: Location = UNKNOWN_LOCATION,
             describe: Callable[[int], str] = str) -> np.ndarray:
        """Load one ``dtype`` element at each byte address (int1 is one byte, non-zero = true)."""
        dtype = np.dtype(dtype)
        stored = np.dtype(np.uint8) if dtype == np.bool_ else dtype
        addresses = np.asarray(addresses, dtype=np.int64).ravel()
        raw = np.empty((addresses.size, stored.itemsize), dtype=np.uint8)
        for alloc, which, offsets in self._locate(addresses, stored.itemsize, "load", loc, describe):
            raw[which] = alloc.data[offsets]
        values = raw.view(stored).reshape(addresses.shape)
        return values != 0 if dtype == np.bool_ else values

    def write(self, addresses: np.ndarray, values: np.ndarray, loc: Location = UNKNOWN_LOCATION,
              describe: Callable[[int], str] = str) -> None:
        """Store ``values[i]`` at ``addresses[i]``; two different values at one address is a race."""
        addresses = np.asarray(addresses, dtype=np.int64).ravel()
        values = np.ascontiguousarray(values).ravel()
        if values.dtype == np.bool_:
            values = values.astype(np.uint8)
        raw = values.view(np.uint8).reshape(values.size, values.itemsize)
        self._check_race(addresses, raw, loc, describe)
        for alloc, which, offsets in self._locate(addresses, values.itemsize, "store", loc, describe):
            alloc.data[offsets] = raw[which]

    # --------------------------------------------------------------- helpers
    def _locate(self, addresses, itemsize, what, loc, describe):
        """Yield (allocation, positions, byte-offset matrix) per allocation hit; raise on faults."""
        if addresses.size == 0:
            return
        bases = np.array([a.base for a in self.allocations], dtype=np.int64)
        owner = np.searchsorted(bases, addresses, side="right") - 1
        ends = np.array([a.end for a in self.allocations], dtype=np.int64)
        inside = (owner >= 0) & (addresses + itemsize <= ends[np.maximum(owner, 0)]) if len(bases) else \
            np.zeros(addresses.shape, bool)
        if not inside.all():
            i = int(np.flatnonzero(~inside)[0])
            raise InterpreterError(self._fault(int(addresses[i]), itemsize, what, describe(i)), loc)
        misaligned = addresses % itemsize != 0
        if misaligned.any():
            i = int(np.flatnonzero(misaligned)[0])
            raise InterpreterError(
                f"misaligned {what}: address {int(addresses[i]):#x} of {describe(i)} is not a "
                f"multiple of the element size {itemsize}", loc)
        for k in np.unique(owner):
            alloc = self.allocations[int(k)]
            which = np.flatnonzero(owner == k)
            offsets = (addresses[which] - alloc.base)[:, None] + np.arange(itemsize)
            yield alloc, which, offsets

    def _fault(self, address: int, itemsize: int, what: str, element: str) -> str:
        text = f"out-of-bounds {what}: address {address:#x} of {element} is outside every allocation"
        if not self.allocations:
            return text + " (no memory is registered)"
        nearest = min(self.allocations, key=lambda a: 0 if a.base <= address < a.end
                      else min(abs(address - a.base), abs(address - a.end)))
        index = (address - nearest.origin) / itemsize
        index_text = str(int(index)) if index == int(index) else f"{index:g}"
        if address < nearest.base:
            where = f"{nearest.base - address} bytes before the start of"
        elif address >= nearest.end:
            where = f"{address - nearest.end} bytes past the end of"
        else:
            where = "straddling the end of"
        return (f"{text}; it is {where} {nearest.describe()}, i.e. element index {index_text} "
                f"of an array of {nearest.array.size} elements")

    @staticmethod
    def _check_race(addresses, raw, loc, describe) -> None:
        if addresses.size < 2:
            return
        order = np.argsort(addresses, kind="stable")
        a = addresses[order]
        same = np.flatnonzero(a[1:] == a[:-1])
        if same.size == 0:
            return
        differ = (raw[order][same] != raw[order][same + 1]).any(axis=1)
        if differ.any():
            j = same[np.flatnonzero(differ)[0]]
            first, second = int(order[j]), int(order[j + 1])
            raise InterpreterError(
                f"racing store: {describe(first)} and {describe(second)} write different values "
                f"to address {int(a[j]):#x} (on the GPU the winner is unspecified)", loc)
