"""Planning ``convert_layout`` between two distributed layouts of one tensor.

A conversion moves every element from where the source layout keeps it (register, lane,
warp, block) to where the destination layout wants it.  The cheapest mechanism that can do
it is chosen from the linear layouts ``S`` (source) and ``D`` (destination), split into
their register part and their thread parts (``S = S_reg ⊕ S_lane ⊕ S_warp ⊕ S_block``):

``identical``
    ``S == D``: nothing moves.
``register_permutation``
    Each thread already holds what it needs, in registers whose indices do not depend on
    the thread: ``S`` and ``D`` agree on lane, warp and block, and the image of ``D_reg``
    lies in the image of ``S_reg``.
``warp_shuffle``
    Data moves only between lanes of one warp, with one shuffle per destination register
    reading the same source register in every lane: ``D_lane ⊆ im S_lane``,
    ``D_reg ⊆ im S_reg + im S_lane`` and ``D_warp ⊕ S_warp``, ``D_block ⊕ S_block`` lie in
    ``im S_lane`` (a source lane may then depend on the warp).
``shared_memory``
    A round trip through a scratch buffer whose layout ``offset → dims`` is chosen to
    vectorize and to keep the stores and the loads free of bank conflicts where possible.

Each condition is necessary as well as sufficient for its mechanism (with registers named
at compile time), so the first kind that applies is the cheapest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .banks import WAVEFRONT_BYTES, SharedAccess, analyze_offsets
from .linear import LinearLayout
from .vectorize import MAX_VECTOR_BYTES, as_linear_layout, check_bitwidth

KINDS = ("identical", "register_permutation", "warp_shuffle", "shared_memory")
HW_DIMS = ("register", "lane", "warp", "block")
THREAD_DIMS = ("lane", "warp", "block")


@dataclass(frozen=True)
class ConversionPlan:
    """What lowering needs to convert a tensor from layout ``src`` to layout ``dst``.

    - ``register_permutation``: ``src_registers[r]`` is the source register that becomes
      destination register ``r``.
    - ``warp_shuffle``: destination register ``r`` of lane ``l`` (warp ``w``, block ``b``)
      is source register ``src_registers[r]`` of lane ``lane_source(register=r, lane=l,
      warp=w, block=b)["lane"]`` of the same warp.
    - ``shared_memory``: every thread stores its registers at ``store_offsets`` of a
      ``scratch`` buffer (``offset → dims``, ``scratch_elements`` long), then loads its
      destination registers from ``load_offsets``; ``store`` and ``load`` give the vector
      widths, wavefronts and bank conflicts of the two accesses.
    - ``cluster_exchange``: the layouts place elements on the CTAs of a cluster differently
      (``block`` bases): each CTA's share goes through its shared memory and the CTAs read
      one another's (distributed shared memory, between cluster barriers).
    """

    kind: str
    src: LinearLayout
    dst: LinearLayout
    element_bitwidth: int
    src_registers: Optional[Tuple[int, ...]] = None
    lane_source: Optional[LinearLayout] = None
    scratch: Optional[LinearLayout] = None
    store: Optional[SharedAccess] = None
    load: Optional[SharedAccess] = None

    @property
    def scratch_elements(self) -> int:
        return self.scratch.in_dim_size("offset") if self.scratch is not None else 0

    @property
    def store_offsets(self) -> LinearLayout:
        """Source (register, lane, warp, block) → scratch offset."""
        return self.src.invert_and_compose(self.scratch).sublayout(HW_DIMS, ["offset"])

    @property
    def load_offsets(self) -> LinearLayout:
        """Destination (register, lane, warp, block) → scratch offset."""
        return self.dst.invert_and_compose(self.scratch).sublayout(HW_DIMS, ["offset"])

    @property
    def num_threads(self) -> int:
        return self.src.in_dim_size("lane") * self.src.in_dim_size("warp") * self.src.in_dim_size("block")

    def simulate(self, values: np.ndarray) -> np.ndarray:
        """Run the plan on register files: ``values[t, r]`` is source register ``r`` of thread
        ``t`` (``t = lane + 32 * (warp + num_warps * block)``); returns the destination
        register file of shape ``(threads, destination registers)``."""
        values = np.asarray(values)
        want = (self.num_threads, self.src.in_dim_size("register"))
        if values.shape != want:
            raise ValueError(f"simulate: values must have shape {want} (threads, source registers), got {values.shape}")
        if self.kind == "identical":
            return values.copy()
        if self.kind == "register_permutation":
            return values[:, list(self.src_registers)]
        if self.kind == "warp_shuffle":
            return self._simulate_shuffles(values)
        return self._simulate_shared(values)

    def _simulate_shuffles(self, values: np.ndarray) -> np.ndarray:
        lanes = _per_thread(self.lane_source, self.dst)  # (threads, dst registers)
        thread = np.arange(self.num_threads)
        out = np.empty((self.num_threads, self.dst.in_dim_size("register")), dtype=values.dtype)
        for r, src_reg in enumerate(self.src_registers):
            # One shfl.idx: every lane offers src_reg and reads it from lanes[:, r] of its warp.
            source_thread = thread - thread % 32 + lanes[:, r]
            out[:, r] = values[source_thread, src_reg]
        return out

    def _simulate_shared(self, values: np.ndarray) -> np.ndarray:
        buffer = np.zeros(self.scratch_elements, dtype=values.dtype)
        written = np.zeros(self.scratch_elements, dtype=bool)
        store = _per_thread(self.store_offsets, self.src)
        for group in self.store.vector.register_groups():  # one st.shared per vector
            buffer[store[:, group]] = values[:, group]
            written[store[:, group]] = True
        load = _per_thread(self.load_offsets, self.dst)
        if not written[load].all():
            raise AssertionError("simulate: the plan loads scratch elements that were never stored")
        return buffer[load]


def _per_thread(layout: LinearLayout, like: LinearLayout) -> np.ndarray:
    """A one-output layout over (register, lane, warp, block) as an array (threads, registers)."""
    regs = like.in_dim_size("register")
    return layout.table()[:, 0].reshape(-1, regs)


# ----------------------------------------------------------------------------- planning
def plan_conversion(src, dst, shape: Sequence[int] | None = None, element_bitwidth=32,
                    max_vector_bytes: int = MAX_VECTOR_BYTES) -> ConversionPlan:
    """Plan the cheapest conversion from distributed layout ``src`` to ``dst``.

    ``src`` and ``dst`` are layout objects (``shape`` required) or linear layouts over
    ``register, lane, warp, block``; both must cover every element of the tensor and use
    the same numbers of lanes, warps and blocks.  ``element_bitwidth`` (an int or a dtype
    with ``primitive_bitwidth``/``itemsize``) only matters for the shared-memory scratch.
    """
    s = _distributed(as_linear_layout(src, shape, "src"), "src")
    d = _distributed(as_linear_layout(dst, shape, "dst"), "dst")
    bits = check_bitwidth(element_bitwidth)
    if s.out_dim_sizes != d.out_dim_sizes:
        raise ValueError(f"src and dst must lay out the same shape, got {s.out_dim_sizes} and {d.out_dim_sizes}")
    d = d.transpose_outs(s.out_dims)
    s, d = _same_block_count(s, d)
    for dim in THREAD_DIMS:
        if s.in_dim_size(dim) != d.in_dim_size(dim):
            raise ValueError(f"src and dst must have the same number of {dim}s, got {s.in_dim_size(dim)} and {d.in_dim_size(dim)}")
    for name, ll in (("src", s), ("dst", d)):
        if not ll.is_surjective():
            raise ValueError(f"{name} must hold every element of the tensor (a surjective layout), got {ll}")
    if s == d:
        return ConversionPlan("identical", s, d, bits)
    dims = s.out_dims
    sub = lambda ll, ins: ll.sublayout(ins, dims)  # noqa: E731
    if _moves_between_ctas(s, d):
        return ConversionPlan("cluster_exchange", s, d, bits)
    if sub(s, THREAD_DIMS) == sub(d, THREAD_DIMS):
        regs = _solve(sub(d, ["register"]), sub(s, ["register"]))
        if regs is not None:
            return ConversionPlan("register_permutation", s, d, bits, src_registers=_indices(regs, "register"))
    shuffle = _plan_shuffles(s, d)
    if shuffle is not None:
        src_registers, lane_source = shuffle
        return ConversionPlan("warp_shuffle", s, d, bits, src_registers=src_registers, lane_source=lane_source)
    scratch, store, load = _choose_scratch(s, d, bits, max_vector_bytes)
    return ConversionPlan("shared_memory", s, d, bits, scratch=scratch, store=store, load=load)


def _distributed(ll: LinearLayout, what: str) -> LinearLayout:
    """``ll`` with exactly the input dimensions register, lane, warp, block, in that order."""
    extra = [d for d in ll.in_dims if d not in HW_DIMS]
    if extra:
        raise ValueError(f"{what} must be a distributed layout over {list(HW_DIMS)}, got input dimensions {ll.in_dims}")
    bases = ll.bases
    return LinearLayout({d: bases.get(d, []) for d in HW_DIMS}, ll.out_dim_sizes)


def moves_between_ctas(src, dst, shape: Sequence[int]) -> bool:
    """Whether converting from layout ``src`` to ``dst`` moves elements between the CTAs of a
    cluster: their ``block`` bases (``cga_layout``) place the elements differently (the
    ``cluster_exchange`` plan of :func:`plan_conversion`)."""
    s = _distributed(as_linear_layout(src, shape, "src"), "src")
    d = _distributed(as_linear_layout(dst, shape, "dst"), "dst").transpose_outs(s.out_dims)
    return _moves_between_ctas(*_same_block_count(s, d))


def _moves_between_ctas(s: LinearLayout, d: LinearLayout) -> bool:
    return s.sublayout(["block"], s.out_dims) != d.sublayout(["block"], s.out_dims)


def _same_block_count(s: LinearLayout, d: LinearLayout) -> Tuple[LinearLayout, LinearLayout]:
    """``s`` and ``d`` with zero ``block`` bases appended to the one with fewer: a layout
    replicated on the CTAs of a cluster may list no bases for them (``[[0]]`` equals ``[]``)."""
    blocks = max(len(s.bases["block"]), len(d.bases["block"]))

    def pad(ll: LinearLayout) -> LinearLayout:
        missing = blocks - len(ll.bases["block"])
        if not missing:
            return ll
        bases = dict(ll.bases)
        bases["block"] = list(ll.bases["block"]) + [[0] * len(ll.out_dims)] * missing
        return LinearLayout(bases, ll.out_dim_sizes)

    return pad(s), pad(d)


def _solve(target: LinearLayout, source: LinearLayout) -> Optional[LinearLayout]:
    """``C`` with ``source(C(x)) == target(x)`` for all ``x``, or None if ``target`` leaves ``im source``."""
    try:
        return target.invert_and_compose(source)
    except ValueError:
        return None


def _indices(layout: LinearLayout, out_dim: str) -> Tuple[int, ...]:
    """The ``out_dim`` coordinate of every input index (first input dimension minor)."""
    col = layout.out_dims.index(out_dim)
    return tuple(int(x) for x in layout.table()[:, col])


def _plan_shuffles(s: LinearLayout, d: LinearLayout):
    """(source register per destination register, source-lane layout), or None."""
    dims = s.out_dims
    s_lane = s.sublayout(["lane"], dims)
    lanes = _solve(d.sublayout(["lane"], dims), s_lane)
    # Warp and block bits may differ only by something another lane of the warp holds.
    diff = {
        dim: [[a ^ b for a, b in zip(u, v)] for u, v in zip(s.bases[dim], d.bases[dim])]
        for dim in ("warp", "block")
    }
    across = _solve(LinearLayout(diff, s.out_dim_sizes), s_lane)
    regs = _solve(d.sublayout(["register"], dims), s.sublayout(["register", "lane"], dims))
    if lanes is None or across is None or regs is None:
        return None
    lane_source = LinearLayout(
        {
            "register": [[v[1]] for v in regs.bases["register"]],
            "lane": lanes.bases["lane"],
            "warp": across.bases["warp"],
            "block": across.bases["block"],
        },
        {"lane": s.in_dim_size("lane")},
    )
    return _indices(regs, "register"), lane_source


# ------------------------------------------------------------------ the scratch layout
def _choose_scratch(s: LinearLayout, d: LinearLayout, bits: int, max_vector_bytes: int):
    """The cheapest of a few scratch layouts built from the two layouts' bases.

    Each candidate orders the tensor's bits (as offset bits, lowest first): a vector part
    both sides can use, the lanes one side serves per wavefront, then the rest.  The
    swizzled candidates XOR the other side's lanes, above the banks, with bank bits the
    other side does not use, so neither the stores nor the loads meet in a bank.  The
    winner has the fewest store + load wavefronts, then the widest vectors.
    """
    space = _TensorSpace(s.out_dim_sizes)
    n = space.bits
    bank_region = min(n, (8 * WAVEFRONT_BYTES // bits).bit_length() - 1)
    max_vec = max(1, 8 * max_vector_bytes // bits).bit_length() - 1
    s_regs = space.flat_bases(s, "register")
    d_regs = space.flat_bases(d, "register")
    common = [v for v in s_regs if v in d_regs]
    vectors = {tuple(_independent(regs[:max_vec])[:k]) for regs in (common, s_regs, d_regs) for k in range(max_vec + 1)}
    best = None
    for vec in sorted(vectors):
        vec = list(vec)
        for first, second in ((s, d), (d, s)):
            for swizzle in (False, True):
                order = _candidate(space, list(vec), first, second, bits, bank_region, swizzle)
                scratch = LinearLayout({"offset": [space.unflat(v) for v in order]}, s.out_dim_sizes)
                store = analyze_offsets(s.invert_and_compose(scratch), bits, max_vector_bytes)
                load = analyze_offsets(d.invert_and_compose(scratch), bits, max_vector_bytes)
                key = (store.wavefronts + load.wavefronts, -store.vector.elements - load.vector.elements)
                if best is None or key < best[0]:
                    best = (key, scratch, store, load)
    return best[1:]


def _candidate(space, vec: List[int], first: LinearLayout, second: LinearLayout, bits: int,
               bank_region: int, swizzle: bool) -> List[int]:
    """Offset bases: ``vec``, ``first``'s wavefront lanes and bases up to the bank region,
    then ``second``'s lanes (XOR-ed with unused bank bits when ``swizzle``), then the rest."""
    words = max(1, (1 << len(vec)) * bits // 32)
    wave_lanes = (32 // words).bit_length() - 1
    low = _independent(vec + space.flat_bases(first, "lane")[:wave_lanes] + space.all_bases(first))
    low = low[: max(bank_region, len(vec))]
    second_lanes = space.flat_bases(second, "lane")[:wave_lanes]
    high = [v for v in _independent(low + second_lanes + space.units()) if v not in low]
    if swizzle:
        # Partners: bank bases outside the span of vec + second's lanes, one per lane base.
        taken = len(_independent(vec + second_lanes))
        partners = _independent(vec + second_lanes + low[len(vec):])[taken:]
        high = [v ^ partners.pop(0) if v in second_lanes and partners else v for v in high]
    return low + high


def _independent(vectors: Sequence[int]) -> List[int]:
    """The vectors (flat ints) that are not combinations of earlier ones, in order."""
    chosen: List[int] = []
    reduced: List[int] = []
    for v in vectors:
        r = v
        for b in reduced:
            r = min(r, r ^ b)
        if r:
            chosen.append(v)
            reduced.append(r)
    return chosen


class _TensorSpace:
    """Tensor coordinates as flat bit-vectors (``dim0`` minor), for building scratch layouts."""

    def __init__(self, sizes):
        self.sizes = dict(sizes)
        self.widths = [s.bit_length() - 1 for s in self.sizes.values()]
        self.bits = sum(self.widths)

    def flat(self, coords: Sequence[int]) -> int:
        out, shift = 0, 0
        for c, w in zip(coords, self.widths):
            out |= c << shift
            shift += w
        return out

    def unflat(self, x: int) -> List[int]:
        out = []
        for w in self.widths:
            out.append(x & ((1 << w) - 1))
            x >>= w
        return out

    def flat_bases(self, ll: LinearLayout, dim: str) -> List[int]:
        return [f for f in (self.flat(v) for v in ll.bases[dim]) if f]

    def all_bases(self, ll: LinearLayout) -> List[int]:
        return [f for dim in HW_DIMS for f in self.flat_bases(ll, dim)]

    def units(self) -> List[int]:
        return [1 << i for i in range(self.bits)]
