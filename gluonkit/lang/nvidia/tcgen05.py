"""Blackwell's tensor-core MMA in kernels: ``tcgen05_mma``, ``tcgen05_commit``, ``tcgen05_mma_barrier_count``.

Gluon's names and signatures (``triton.experimental.gluon.language.nvidia.blackwell``)::

    tcgen05_mma(a_smem, b_smem, acc_tmem, use_acc=False, mbarriers=[done])   # starts acc = a @ b
    tcgen05_commit(bar)           # bar gets one arrival when every MMA issued so far has completed
    mbarrier.wait(done, phase)    # now acc (and the stages a, b) may be used again

``a`` is an ``[M, K]`` and ``b`` a ``[K, N]`` shared-memory descriptor (``NVMMASharedLayout``),
``acc`` an ``[M, N]`` tensor-memory descriptor that the MMA updates in place.  With
``mbarriers`` (a list, possibly empty) the MMA is asynchronous and each barrier (where its
``mbarrier_preds`` entry holds) gets one arrival when it completes, as a ``tcgen05_commit``
right after it would give; with ``mbarriers=None`` it is synchronous.  An accumulator with a
``two_ctas`` layout makes a ``cta_group::2`` MMA of a CTA pair (``num_ctas=2``, or a cluster
of pairs with ``num_ctas`` 4 or 8, one ``cga_layout`` basis per CTA-rank bit, bit 0 the pair):
A split by rows and B by columns between the two CTAs' shared memory, the accumulator's
halves in each CTA's tensor memory, issued by the even CTA, its commit arriving on both CTAs'
barriers (``docs/blackwell_2cta.rst``).  ``multicast=True`` (and ``tcgen05_commit``'s
``descs``) widen the commit to every CTA that shares a multicast operand with the issuer:
those whose ranks differ only in the bits an operand's ``cga_layout`` replicates, as Triton
3.9 does; ``tcgen05_mma_barrier_count`` counts the commits each barrier then receives.
"""

from __future__ import annotations

from ...ir.types import SharedMemoryDescType, TensorMemoryDescType
from ...ir.verify_tcgen05 import tcgen05_shape_problem
from ...layouts.distributed import replicated_cta_bits
from ...sync.builtin import barrier_type, predicate
from ..errors import ArgumentError, LayoutMismatchError, TypeMismatchError
from ..tensor import builtin
from .tmem import tensor_memory_descriptor

__all__ = ["tcgen05_mma", "tcgen05_commit", "tcgen05_mma_barrier_count", "cluster_attrs"]


def _flag(sem, value, what: str):
    flag = sem.to_bool(sem.to_tensor(value), what)
    if flag.is_block():
        sem.error(f"tcgen05_mma: {what} must be a scalar, got a tensor of shape {list(flag.shape)}", TypeMismatchError)
    return flag.handle


def _barriers(sem, what: str, mbarriers, mbarrier_preds):
    """The barrier handles and int1 predicate handles of an MMA's ``mbarriers``/``mbarrier_preds``."""
    if mbarriers is None:
        if mbarrier_preds is not None:
            sem.error(f"{what}: mbarrier_preds needs mbarriers", ArgumentError)
        return [], []
    if not isinstance(mbarriers, (list, tuple)):
        sem.error(f"{what}'s mbarriers must be a list of barriers (mbarriers=[bar]), got {mbarriers!r}",
                  TypeMismatchError)
    bars = [barrier_type(sem, bar, f"each of {what}'s mbarriers") for bar in mbarriers]
    preds = [True] * len(bars) if mbarrier_preds is None else list(mbarrier_preds)
    if len(preds) != len(bars):
        sem.error(f"{what}: {len(bars)} mbarriers but {len(preds)} mbarrier_preds", ArgumentError)
    return bars, [_flag(sem, p, "each mbarrier_preds entry") for p in preds]


@builtin
def tcgen05_mma(a, b, acc, *, use_acc=True, pred=True, multicast=False, mbarriers=None, mbarrier_preds=None,
                _semantic=None):
    """``acc = a @ b + (acc if use_acc else 0)`` on the tensor cores (see the module docstring)."""
    sem = _semantic
    handles = []
    for value, name in ((a, "a"), (b, "b"), (acc, "acc")):
        handle = getattr(value, "handle", None)
        if handle is None:
            sem.error(f"tcgen05_mma's {name} must be a shared or tensor memory descriptor, got {value!r}",
                      TypeMismatchError)
        handles.append(handle)
    if not isinstance(acc, tensor_memory_descriptor):
        sem.error(f"tcgen05_mma's acc must be a tensor memory descriptor (allocate_tensor_memory), got {acc!r}",
                  TypeMismatchError)
    problem = tcgen05_shape_problem(*(h.type for h in handles))
    if problem:
        sem.error(f"tcgen05_mma: {problem}", LayoutMismatchError if "layout" in problem else TypeMismatchError)
    bars, preds = _barriers(sem, "tcgen05_mma", mbarriers, mbarrier_preds)
    attrs = {"num_barriers": len(bars), "is_async": mbarriers is not None,
             **cluster_attrs(sem, "tcgen05_mma", acc, handles[:2], mbarriers, multicast)}
    operands = handles + [_flag(sem, use_acc, "use_acc"), _flag(sem, pred, "pred")] + bars + preds
    sem.create("tcgen05_mma", operands, [], attrs)


def cluster_attrs(sem, what: str, acc, operands, mbarriers, multicast) -> dict:
    """Check an MMA's CTA-pair and cluster arguments; its ``multicast_bits`` attribute (if any).

    A ``two_ctas`` accumulator needs one ``cga_layout`` basis per CTA-rank bit of the launch and an
    asynchronous MMA whose barriers exist in every CTA; with ``multicast`` in a cluster, the commit
    reaches every CTA that shares one of the shared ``operands`` (the bits their layouts replicate)."""
    pair = acc.type.layout.two_ctas
    if pair and 1 << len(acc.type.layout.cga_layout) != sem.num_ctas:
        sem.error(f"{what}: a two_ctas accumulator is a cta_group::2 MMA of CTA pairs with one cga_layout basis "
                  f"per CTA-rank bit; its {len(acc.type.layout.cga_layout)} bases need num_ctas="
                  f"{1 << len(acc.type.layout.cga_layout)} (the kernel runs with {sem.num_ctas})",
                  LayoutMismatchError)
    if pair and mbarriers is None:
        sem.error(f"{what}: a two_ctas (cta_group::2) MMA must be asynchronous: pass mbarriers=[bar] (a barrier "
                  "from allocate_mbarrier(), which the commit reaches in both CTAs) and wait on it", ArgumentError)
    for bar in ([] if mbarriers is None else mbarriers):
        _not_pair_barrier(sem, bar, f"{what}'s mbarriers")
    multicast = sem.require_constexpr(multicast, f"{what}'s multicast")
    if not isinstance(multicast, bool):
        sem.error(f"{what}'s multicast must be True or False, got {multicast!r}", ArgumentError)
    if not multicast or sem.num_ctas == 1:  # (one CTA: nothing to multicast to, the plain commit)
        return {}
    shared = [h for h in operands if not isinstance(h.type, TensorMemoryDescType)]
    return {"multicast_bits": _multicast_bits(sem, shared)}


def _multicast_bits(sem, handles) -> tuple:
    """Per shared operand, the CTA-rank bits its layout replicates: a multicast load filled the CTAs
    that differ only in them, so the commit must reach each of those (``docs/blackwell_2cta.rst``)."""
    return tuple(replicated_cta_bits(getattr(h.type.layout, "cga_layout", None), sem.num_ctas) for h in handles)


@builtin
def tcgen05_commit(barrier, pred=True, descs=(), _semantic=None):
    """One arrival on ``barrier`` once every tcgen05 MMA issued before it has completed.

    With ``descs`` (the MMAs' shared operands) in a cluster, the commit arrives on the barrier of
    every CTA that shares a multicast operand with this one (the CTA-rank bits the descriptors'
    ``cga_layout`` replicates; in a kernel of CTA pairs, the peer CTA too).
    """
    sem = _semantic
    descs = list(sem.require_constexpr(descs, "tcgen05_commit's descs") or ())
    handles = []
    for d in descs:
        handle = getattr(d, "handle", None)
        if not isinstance(getattr(handle, "type", None), SharedMemoryDescType):
            sem.error(f"tcgen05_commit's descs must be the MMAs' shared memory operands, got {d!r}", TypeMismatchError)
        handles.append(handle)
    _not_pair_barrier(sem, barrier, "tcgen05_commit's barrier")
    bar = barrier_type(sem, barrier, "tcgen05_commit's barrier")
    attrs = {"multicast_bits": _multicast_bits(sem, handles)} if handles and sem.num_ctas > 1 else {}
    p = predicate(sem, pred)
    if p is not None:
        sem.create("tcgen05_commit", [bar, p.handle], [], attrs)


def _not_pair_barrier(sem, bar, what: str) -> None:
    """MMA completions arrive on a barrier in each CTA (a pair's commit multicasts), so a
    ``two_ctas`` barrier, which only the even CTA holds, is refused (as Triton 3.9 does)."""
    if getattr(getattr(getattr(bar, "type", None), "layout", None), "two_ctas", False):
        sem.error(f"{what}: a two_ctas barrier (allocate_mbarrier(two_ctas=True)) only exists in the even CTA, but "
                  "an MMA's commit arrives on the barrier of each CTA of the pair; use allocate_mbarrier()",
                  ArgumentError)


def tcgen05_mma_barrier_count(smems, multicast, two_ctas):
    """How many CTAs commit a tcgen05 MMA onto a barrier: the arrival count to ``mbarrier.init`` it with.

    One CTA per cluster (all gluonkit launches) commits once; multicast operands split over the
    CTA bits of their layouts' ``cga_layout`` count each CTA that holds a distinct part (every
    other CTA when ``two_ctas`` pairs them).
    """
    smems = list(smems)
    if not 0 <= len(smems) <= 4:
        raise ValueError(f"tcgen05_mma_barrier_count takes 0 to 4 shared memory descriptors, got {len(smems)}")
    if not smems or not multicast:
        return 1
    layouts = [getattr(s, "layout", s) for s in smems]
    cta_bits = len(getattr(layouts[0], "cga_layout", None) or [])
    count = 0
    for cta in range(1 << cta_bits):
        if two_ctas and cta & 1:
            continue
        if any(all(not any(basis) or not cta >> i & 1 for i, basis in enumerate(getattr(l, "cga_layout", None) or []))
               for l in layouts):
            count += 1
    return count
