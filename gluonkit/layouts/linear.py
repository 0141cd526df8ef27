"""Linear layouts: maps over GF(2) from hardware indices to tensor coordinates.

A :class:`LinearLayout` maps named *input* dimensions (``register``, ``lane``, ``warp``,
``block`` for distributed tensors; ``offset``/``block`` for shared memory; ``row``/``col``
for tensor memory) to named *output* dimensions (``dim0 … dimN-1``).  Every input and
output dimension has a power-of-two size.  The map is linear over GF(2): the image of an
index is the XOR of the basis vectors of its set bits::

    L(x) = XOR over (in_dim d, bit i set in x[d]) of bases[d][i]

The conventions are Triton's, so results compare basis for basis with Triton's
``to_linear_layout``: bases are listed from the lowest input bit up, each basis vector is
a list with one entry per output dimension (``dim0`` first), and a zero basis vector means
that input bit is broadcast (replicated data).

When input or output dimensions are *flattened* into a single index, the first dimension
is the most minor (fastest varying), as in Triton.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

__all__ = ["LinearLayout", "is_power_of_two", "log2_exact", "gf2_rank"]


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, 8, …"""
    return isinstance(n, int) and n > 0 and (n & (n - 1)) == 0


def log2_exact(n: int, what: str = "size") -> int:
    """log2 of a power of two; a ``ValueError`` naming ``what`` otherwise."""
    if not is_power_of_two(n):
        raise ValueError(f"{what} must be a power of two, got {n!r}")
    return n.bit_length() - 1


class LinearLayout:
    """A linear map over GF(2) between named, power-of-two-sized index spaces.

    ``bases`` maps each input dimension name to its basis vectors (lowest bit first); each
    vector has one int per output dimension.  ``out_dims`` maps each output dimension name
    to its size (a power of two); when omitted, each output size is the smallest power of
    two that holds every basis vector's coordinate (Triton's behaviour).
    """

    __slots__ = ("_bases", "_out_dims")

    def __init__(
        self,
        bases: Mapping[str, Sequence[Sequence[int]]],
        out_dims: Mapping[str, int] | Sequence[str],
        require_surjective: bool = False,
    ):
        if isinstance(out_dims, Mapping):
            out_names = list(out_dims)
            sizes = dict(out_dims)
        else:
            out_names = list(out_dims)
            sizes = None
        if len(set(out_names)) != len(out_names):
            raise ValueError(f"output dimension names must be distinct, got {out_names}")
        norm: Dict[str, Tuple[Tuple[int, ...], ...]] = {}
        for name, vecs in bases.items():
            rows = []
            for i, v in enumerate(vecs):
                v = tuple(int(c) for c in v)
                if len(v) != len(out_names):
                    raise ValueError(
                        f"basis {i} of input dimension {name!r} has {len(v)} coordinates, "
                        f"but the layout has {len(out_names)} output dimensions {out_names}"
                    )
                if any(c < 0 for c in v):
                    raise ValueError(f"basis {i} of input dimension {name!r} is negative: {list(v)}")
                rows.append(v)
            norm[name] = tuple(rows)
        if sizes is None:
            sizes = {}
            for j, o in enumerate(out_names):
                largest = max((v[j] for vs in norm.values() for v in vs), default=0)
                sizes[o] = 1 << largest.bit_length() if largest else 1
        for o in out_names:
            log2_exact(sizes[o], f"size of output dimension {o!r}")
            for name, vs in norm.items():
                for i, v in enumerate(vs):
                    if v[out_names.index(o)] >= sizes[o]:
                        raise ValueError(
                            f"basis {i} of input dimension {name!r} is {list(v)}, outside "
                            f"output dimension {o!r} of size {sizes[o]}"
                        )
        self._bases = norm
        self._out_dims = {o: sizes[o] for o in out_names}
        if require_surjective and not self.is_surjective():
            raise ValueError(f"layout is not surjective onto {self._out_dims}: {self}")

    # ----------------------------------------------------------------- constructors
    @staticmethod
    def empty() -> "LinearLayout":
        """The layout with no input and no output dimensions (the unit of ``*``)."""
        return LinearLayout({}, {})

    @staticmethod
    def identity_1d(size: int, in_dim: str, out_dim: str) -> "LinearLayout":
        """``in_dim`` of ``size`` maps to ``out_dim`` as the identity."""
        n = log2_exact(size, "identity size")
        return LinearLayout({in_dim: [[1 << i] for i in range(n)]}, {out_dim: size})

    @staticmethod
    def zeros_1d(size: int, in_dim: str, out_dim: str, out_dim_size: int = 1) -> "LinearLayout":
        """``in_dim`` of ``size`` is broadcast: every index maps to 0 of ``out_dim``."""
        n = log2_exact(size, "zeros size")
        return LinearLayout({in_dim: [[0] for _ in range(n)]}, {out_dim: out_dim_size})

    @staticmethod
    def strided_1d(size: int, stride: int, in_dim: str, out_dim: str) -> "LinearLayout":
        """``in_dim`` of ``size`` maps to ``out_dim`` with a power-of-two ``stride``."""
        n = log2_exact(size, "strided size")
        log2_exact(stride, "stride")
        return LinearLayout({in_dim: [[stride << i] for i in range(n)]}, {out_dim: size * stride})

    # ------------------------------------------------------------------ inspection
    @property
    def bases(self) -> Dict[str, List[List[int]]]:
        """Input dimension → list of basis vectors (lowest bit first, ``dim0`` first)."""
        return {d: [list(v) for v in vs] for d, vs in self._bases.items()}

    @property
    def in_dims(self) -> List[str]:
        return list(self._bases)

    @property
    def out_dims(self) -> List[str]:
        return list(self._out_dims)

    @property
    def out_dim_sizes(self) -> Dict[str, int]:
        return dict(self._out_dims)

    @property
    def in_dim_sizes(self) -> Dict[str, int]:
        return {d: 1 << len(vs) for d, vs in self._bases.items()}

    def in_dim_size(self, dim: str) -> int:
        return 1 << len(self._bases[dim])

    def in_dim_size_log2(self, dim: str) -> int:
        return len(self._bases[dim])

    def out_dim_size(self, dim: str) -> int:
        return self._out_dims[dim]

    def out_dim_size_log2(self, dim: str) -> int:
        return self._out_dims[dim].bit_length() - 1

    def total_in_size(self) -> int:
        return 1 << sum(len(v) for v in self._bases.values())

    def total_out_size(self) -> int:
        n = 1
        for s in self._out_dims.values():
            n *= s
        return n

    def basis(self, in_dim: str, bit: int) -> List[int]:
        return list(self._bases[in_dim][bit])

    def has_in_dim(self, dim: str) -> bool:
        return dim in self._bases

    def has_out_dim(self, dim: str) -> bool:
        return dim in self._out_dims

    # ------------------------------------------------------------- flat encodings
    def _out_shifts(self) -> Dict[str, int]:
        """Bit offset of each output dimension in the flattened output (first = minor)."""
        shifts, s = {}, 0
        for o, size in self._out_dims.items():
            shifts[o] = s
            s += size.bit_length() - 1
        return shifts

    def _flat_vector(self, v: Sequence[int]) -> int:
        shifts = self._out_shifts()
        flat = 0
        for (o, _), c in zip(self._out_dims.items(), v):
            flat |= c << shifts[o]
        return flat

    def _unflatten_out(self, flat: int) -> Tuple[int, ...]:
        out = []
        for o, size in self._out_dims.items():
            out.append(flat & (size - 1))
            flat >>= size.bit_length() - 1
        return tuple(out)

    def _flat_columns(self) -> List[int]:
        """Every basis vector, in input order (first in-dim's bit 0 first), flattened."""
        return [self._flat_vector(v) for vs in self._bases.values() for v in vs]

    def _flat_in_index(self, ins: Mapping[str, int]) -> int:
        flat, shift = 0, 0
        for d, vs in self._bases.items():
            flat |= (ins.get(d, 0) & ((1 << len(vs)) - 1)) << shift
            shift += len(vs)
        return flat

    def _unflatten_in(self, flat: int) -> Dict[str, int]:
        out = {}
        for d, vs in self._bases.items():
            out[d] = flat & ((1 << len(vs)) - 1)
            flat >>= len(vs)
        return out

    # ---------------------------------------------------------------- application
    def apply(self, ins: Mapping[str, int] | Sequence[Tuple[str, int]]) -> Dict[str, int]:
        """Image of one input index; missing input dimensions are 0.

        ``ins`` maps input dimension name → index. Indices must lie in their dimension.
        """
        ins = dict(ins)
        for d, x in ins.items():
            if d not in self._bases:
                raise ValueError(f"unknown input dimension {d!r}; the layout has {self.in_dims}")
            if not 0 <= x < self.in_dim_size(d):
                raise ValueError(f"index {x} is outside input dimension {d!r} of size {self.in_dim_size(d)}")
        flat = 0
        for d, x in ins.items():
            for i, v in enumerate(self._bases[d]):
                if (x >> i) & 1:
                    flat ^= self._flat_vector(v)
        return dict(zip(self._out_dims, self._unflatten_out(flat)))

    def __call__(self, **ins: int) -> Dict[str, int]:
        return self.apply(ins)

    def table(self):
        """Image of every input index as an int array of shape (total_in_size, n_out).

        Row ``k`` is the image of the flattened input index ``k`` (first in-dim minor).
        """
        import numpy as np

        cols = self._flat_columns()
        n = len(cols)
        flat = np.zeros(1 << n, dtype=np.int64)
        for i, c in enumerate(cols):
            size = 1 << i
            flat[size : 2 * size] = flat[:size] ^ c
        out = np.empty((1 << n, len(self._out_dims)), dtype=np.int64)
        for j, (o, size) in enumerate(self._out_dims.items()):
            out[:, j] = flat & (size - 1)
            flat = flat >> (size.bit_length() - 1)
        return out

    # ------------------------------------------------------------------- algebra
    def _rank(self) -> int:
        return gf2_rank(self._flat_columns())

    def is_surjective(self) -> bool:
        """Every output index is hit by some input index."""
        return self._rank() == sum(s.bit_length() - 1 for s in self._out_dims.values())

    def is_injective(self) -> bool:
        """No two input indices map to the same output index."""
        cols = self._flat_columns()
        return gf2_rank(cols) == len(cols)

    def is_invertible(self) -> bool:
        return self.is_injective() and self.is_surjective()

    def free_variable_masks(self) -> Dict[str, int]:
        """For each input dimension, a bitmask of its free (redundant) bits.

        A set bit ``i`` of ``masks[d]`` means the basis of bit ``i`` of input ``d`` is a linear
        combination of earlier bases (in input order), as in Triton.  The guarantee: every
        image is reached by exactly one input whose free bits are all 0.  A zero basis (a
        broadcast bit) is always free; a repeated nonzero basis is free in its later copies
        only, and flipping such a bit alone does change the image.
        """
        masks = {}
        pivots: List[int] = []
        for d, vs in self._bases.items():
            m = 0
            for i, v in enumerate(vs):
                flat = self._flat_vector(v)
                if _gf2_in_span(pivots, flat):
                    m |= 1 << i
                else:
                    pivots.append(flat)
            masks[d] = m
        return masks

    def compose(self, outer: "LinearLayout") -> "LinearLayout":
        """``outer ∘ self``: apply ``self`` then ``outer``.

        ``self``'s output dimensions must be ``outer``'s input dimensions (same names; each
        output size at most the input size it feeds).
        """
        for o, size in self._out_dims.items():
            if not outer.has_in_dim(o):
                raise ValueError(f"compose: output dimension {o!r} is not an input dimension of the outer layout {outer.in_dims}")
            if size > outer.in_dim_size(o):
                raise ValueError(f"compose: output dimension {o!r} has size {size}, larger than the outer layout's input size {outer.in_dim_size(o)}")
        new = {}
        for d, vs in self._bases.items():
            new[d] = [list(outer.apply(dict(zip(self._out_dims, v))).values()) for v in vs]
        return LinearLayout(new, outer.out_dim_sizes)

    def invert(self) -> "LinearLayout":
        """The inverse of a bijective layout (outputs become inputs and vice versa)."""
        if not self.is_invertible():
            raise ValueError(f"invert: layout is not bijective: {self}")
        return self.pseudoinvert()

    def pseudoinvert(self) -> "LinearLayout":
        """A right inverse of a surjective layout: ``self ∘ P`` is the identity on outputs.

        Among the preimages of each output index, the one chosen uses only the earliest
        linearly independent input bits (free bits are 0).
        """
        if not self.is_surjective():
            raise ValueError(f"pseudoinvert: layout is not surjective: {self}")
        cols = self._flat_columns()
        n_out = sum(s.bit_length() - 1 for s in self._out_dims.values())
        new: Dict[str, List[List[int]]] = {}
        shift = 0
        for o, size in self._out_dims.items():
            rows = []
            for i in range(size.bit_length() - 1):
                target = 1 << (shift + i)
                sol = _gf2_solve(cols, target)
                assert sol is not None, "surjective layouts reach every unit vector"
                rows.append(list(self._unflatten_in(sol).values()))
            new[o] = rows
            shift += size.bit_length() - 1
        assert shift == n_out
        return LinearLayout(new, self.in_dim_sizes)

    def invert_and_compose(self, outer: "LinearLayout") -> "LinearLayout":
        """A layout ``C`` with ``outer(C(x)) == self(x)`` for every input ``x`` of ``self``.

        Used for conversions: with ``self`` the source layout and ``outer`` the destination
        layout (same output dimensions), ``C`` maps each source hardware index to a
        destination hardware index holding the same element.  ``outer`` must be surjective
        onto ``self``'s image; where ``outer`` replicates, the earliest preimage is chosen.
        """
        if set(self._out_dims) != set(outer._out_dims):
            raise ValueError(f"invert_and_compose: output dimensions differ: {self.out_dims} vs {outer.out_dims}")
        aligned = outer.transpose_outs(self.out_dims)
        for o in self._out_dims:
            if self._out_dims[o] > aligned._out_dims[o]:
                raise ValueError(f"invert_and_compose: output {o!r} of size {self._out_dims[o]} exceeds the outer layout's {aligned._out_dims[o]}")
        outer_cols = aligned._flat_columns()
        new: Dict[str, List[List[int]]] = {}
        for d, vs in self._bases.items():
            rows = []
            for v in vs:
                sol = _gf2_solve(outer_cols, aligned._flat_vector(v))
                if sol is None:
                    raise ValueError(f"invert_and_compose: the outer layout does not reach {list(v)} (basis of {d!r})")
                rows.append(list(aligned._unflatten_in(sol).values()))
            new[d] = rows
        return LinearLayout(new, aligned.in_dim_sizes)

    def __mul__(self, other: "LinearLayout") -> "LinearLayout":
        """Product: ``other`` occupies the higher bits of every shared dimension.

        Input dimensions present in both get ``self``'s bases then ``other``'s; output
        dimensions present in both have ``other``'s coordinates scaled by ``self``'s size.
        Dimension order: ``self``'s, then ``other``'s new ones.
        """
        out_sizes = dict(self._out_dims)
        for o, s in other._out_dims.items():
            out_sizes[o] = out_sizes.get(o, 1) * s
        out_names = list(out_sizes)

        def widen(layout: "LinearLayout", scale: Dict[str, int]) -> Dict[str, List[List[int]]]:
            res = {}
            for d, vs in layout._bases.items():
                rows = []
                for v in vs:
                    coords = dict(zip(layout._out_dims, v))
                    rows.append([coords.get(o, 0) * scale.get(o, 1) for o in out_names])
                res[d] = rows
            return res

        a = widen(self, {})
        b = widen(other, self._out_dims)
        bases = {d: a.get(d, []) + b.get(d, []) for d in list(a) + [d for d in b if d not in a]}
        return LinearLayout(bases, out_sizes)

    def concat_ins(self, other: "LinearLayout") -> "LinearLayout":
        """Direct sum on inputs: both must have the same output dimensions; input names disjoint."""
        if set(self._out_dims) != set(other._out_dims) or any(
            other._out_dims[o] != s for o, s in self._out_dims.items()
        ):
            raise ValueError(f"concat_ins: output dimensions differ: {self._out_dims} vs {other._out_dims}")
        clash = set(self._bases) & set(other._bases)
        if clash:
            raise ValueError(f"concat_ins: input dimensions {sorted(clash)} appear in both layouts")
        o = other.transpose_outs(self.out_dims)
        return LinearLayout({**self.bases, **o.bases}, self._out_dims)

    def concat_outs(self, other: "LinearLayout") -> "LinearLayout":
        """Direct sum on outputs: both must have the same input dimensions and sizes; output names disjoint."""
        if self.in_dim_sizes != other.in_dim_sizes:
            raise ValueError(f"concat_outs: input dimensions differ: {self.in_dim_sizes} vs {other.in_dim_sizes}")
        clash = set(self._out_dims) & set(other._out_dims)
        if clash:
            raise ValueError(f"concat_outs: output dimensions {sorted(clash)} appear in both layouts")
        bases = {d: [list(a) + list(b) for a, b in zip(self._bases[d], other._bases[d])] for d in self._bases}
        return LinearLayout(bases, {**self._out_dims, **other._out_dims})

    # -------------------------------------------------------- reshape / transpose
    def transpose_ins(self, order: Sequence[str]) -> "LinearLayout":
        """Reorder the input dimensions (a permutation of their names)."""
        if sorted(order) != sorted(self._bases):
            raise ValueError(f"transpose_ins: {list(order)} is not a permutation of {self.in_dims}")
        return LinearLayout({d: self._bases[d] for d in order}, self._out_dims)

    def transpose_outs(self, order: Sequence[str]) -> "LinearLayout":
        """Reorder the output dimensions (a permutation of their names)."""
        if sorted(order) != sorted(self._out_dims):
            raise ValueError(f"transpose_outs: {list(order)} is not a permutation of {self.out_dims}")
        idx = [self.out_dims.index(o) for o in order]
        bases = {d: [[v[j] for j in idx] for v in vs] for d, vs in self._bases.items()}
        return LinearLayout(bases, {o: self._out_dims[o] for o in order})

    def reshape_ins(self, new_dims: Sequence[Tuple[str, int]]) -> "LinearLayout":
        """Flatten the inputs (first minor) and split them into ``new_dims`` (name, size)."""
        cols = [v for vs in self._bases.values() for v in vs]
        total = sum(log2_exact(s, f"size of input dimension {n!r}") for n, s in new_dims)
        if total != len(cols):
            raise ValueError(f"reshape_ins: total input size {self.total_in_size()} != {_prod(s for _, s in new_dims)}")
        bases, k = {}, 0
        for n, s in new_dims:
            b = s.bit_length() - 1
            bases[n] = [list(v) for v in cols[k : k + b]]
            k += b
        return LinearLayout(bases, self._out_dims)

    def reshape_outs(self, new_dims: Sequence[Tuple[str, int]]) -> "LinearLayout":
        """Flatten the outputs (first minor) and split them into ``new_dims`` (name, size)."""
        total = _prod(s for _, s in new_dims)
        for n, s in new_dims:
            log2_exact(s, f"size of output dimension {n!r}")
        if total != self.total_out_size():
            raise ValueError(f"reshape_outs: total output size {self.total_out_size()} != {total}")
        bases = {}
        for d, vs in self._bases.items():
            rows = []
            for v in vs:
                flat = self._flat_vector(v)
                row = []
                for _, s in new_dims:
                    row.append(flat & (s - 1))
                    flat >>= s.bit_length() - 1
                rows.append(row)
            bases[d] = rows
        return LinearLayout(bases, dict(new_dims))

    def flatten_ins(self, name: str | None = None) -> "LinearLayout":
        name = name or (self.in_dims[0] if self.in_dims else "in")
        return self.reshape_ins([(name, self.total_in_size())])

    def flatten_outs(self, name: str | None = None) -> "LinearLayout":
        name = name or (self.out_dims[0] if self.out_dims else "out")
        return self.reshape_outs([(name, self.total_out_size())])

    def sublayout(self, in_dims: Iterable[str], out_dims: Iterable[str]) -> "LinearLayout":
        """Restrict to some input dimensions and project onto some output dimensions."""
        in_dims, out_dims = list(in_dims), list(out_dims)
        for d in in_dims:
            if d not in self._bases:
                raise ValueError(f"sublayout: unknown input dimension {d!r}; the layout has {self.in_dims}")
        for o in out_dims:
            if o not in self._out_dims:
                raise ValueError(f"sublayout: unknown output dimension {o!r}; the layout has {self.out_dims}")
        idx = [self.out_dims.index(o) for o in out_dims]
        bases = {d: [[v[j] for j in idx] for v in self._bases[d]] for d in self._bases if d in in_dims}
        bases = {d: bases[d] for d in in_dims}
        return LinearLayout(bases, {o: self._out_dims[o] for o in out_dims})

    def resize_in_dim(self, dim: str, size: int) -> "LinearLayout":
        """Keep the low bits of ``dim`` (shrink) or add broadcast bits (grow)."""
        n = log2_exact(size, f"new size of {dim!r}")
        vs = [list(v) for v in self._bases[dim]]
        vs = vs[:n] + [[0] * len(self._out_dims)] * max(0, n - len(vs))
        bases = {d: (vs if d == dim else self.bases[d]) for d in self._bases}
        return LinearLayout(bases, self._out_dims)

    def with_out_dim_sizes(self, sizes: Mapping[str, int]) -> "LinearLayout":
        """Same bases with larger (or exactly fitting) output dimension sizes."""
        new = dict(self._out_dims)
        new.update(sizes)
        return LinearLayout(self._bases, new)

    # ------------------------------------------------------------ memory helpers
    def num_consecutive(self, in_dim: str = "register") -> int:
        """How many consecutive indices of ``in_dim``, from 0, map to consecutive flat outputs.

        The largest ``2**k`` such that bit ``i < k`` of ``in_dim`` maps to flat output
        ``2**i`` (first output dimension minor).  For a distributed layout whose outputs
        were transposed so the contiguous tensor dimension comes first, this is the vector
        width of a memory access.
        """
        if in_dim not in self._bases:
            return 1
        k = 0
        for i, v in enumerate(self._bases[in_dim]):
            if self._flat_vector(v) != (1 << i):
                break
            k += 1
        return 1 << k

    # ------------------------------------------------------------------ dunders
    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LinearLayout)
            and self._bases == other._bases
            and list(self._out_dims.items()) == list(other._out_dims.items())
        )

    def equivalent(self, other: "LinearLayout") -> bool:
        """Same map, ignoring the order of input and output dimensions."""
        if set(self._bases) != set(other._bases) or set(self._out_dims) != set(other._out_dims):
            return False
        o = other.transpose_outs(self.out_dims).transpose_ins(self.in_dims)
        return self == o

    def __hash__(self) -> int:
        return hash((tuple(self._bases.items()), tuple(self._out_dims.items())))

    def __repr__(self) -> str:
        ins = ", ".join(f"{d}: {[list(v) for v in vs]}" for d, vs in self._bases.items())
        outs = ", ".join(f"{o}: {s}" for o, s in self._out_dims.items())
        return f"LinearLayout({{{ins}}}, outs={{{outs}}})"

    def __str__(self) -> str:
        lines = []
        for d, vs in self._bases.items():
            for i, v in enumerate(vs):
                lines.append(f"  {d}={1 << i:<5} -> ({', '.join(map(str, v))})")
        head = " x ".join(f"{o}:{s}" for o, s in self._out_dims.items())
        return "LinearLayout -> " + head + ("\n" + "\n".join(lines) if lines else "")


# ---------------------------------------------------------------------- GF(2) helpers
def _prod(xs: Iterable[int]) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def gf2_rank(vectors: Sequence[int]) -> int:
    """Rank over GF(2) of bit-vectors given as ints."""
    basis: List[int] = []
    for v in vectors:
        for b in basis:
            v = min(v, v ^ b)
        if v:
            basis.append(v)
    return len(basis)


def _gf2_in_span(vectors: Sequence[int], target: int) -> bool:
    return _gf2_solve(vectors, target) is not None


def _gf2_solve(columns: Sequence[int], target: int) -> int | None:
    """A bitmask ``x`` over ``columns`` with XOR of selected columns == ``target``.

    Prefers the earliest columns: pivots are chosen in column order, and free (dependent)
    columns are left at 0.  Returns ``None`` when ``target`` is not in the span.
    """
    # Each pivot row: (reduced vector, combination mask of original columns).
    pivots: List[Tuple[int, int]] = []
    for i, col in enumerate(columns):
        v, combo = col, 1 << i
        for pv, pc in pivots:
            if v ^ pv < v:
                v, combo = v ^ pv, combo ^ pc
        if v:
            pivots.append((v, combo))
            pivots.sort(key=lambda p: -p[0])
    v, combo = target, 0
    for pv, pc in pivots:
        if v ^ pv < v:
            v, combo = v ^ pv, combo ^ pc
    return combo if v == 0 else None
