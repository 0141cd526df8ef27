"""mbarriers: shared-memory barriers with a phase, an arrival count and transaction bytes.

Gluon's ``mbarrier`` module (``triton.experimental.gluon.language.nvidia.hopper.mbarrier``).
A barrier is initialized expecting ``count`` arrivals; a *phase* completes when that many
arrivals have happened and every expected transaction byte (from ``expect`` plus async
copies, in later slices) has arrived; then the next phase starts with the same count.
``wait(bar, phase)`` blocks until the phase of parity ``phase`` has completed, so a
pipeline flips ``phase`` each time it wraps around its stages.  ``arrive`` and ``expect``
are one arrival per call (one thread of the program performs it), like Gluon's.  The
signatures are Gluon 3.9's; ``from_cta`` routes arrivals between the CTAs of a cluster
(:func:`_routing`, ``docs/clusters.rst``).
"""

from __future__ import annotations

from ..ir.types import int32
from ..layouts.barrier import MBarrierLayout
from .builtin import barrier_type, builtin, descriptor_handle, predicate

__all__ = ["MBarrierLayout", "init", "expect", "arrive", "wait", "invalidate"]

#: An mbarrier's pending-arrival and transaction counts are 20 bits wide (PTX ISA, mbarrier): at most 2**20 - 1.
MAX_ARRIVALS = (1 << 20) - 1


@builtin
def init(mbarrier, count, _semantic=None) -> None:
    """Initialize ``mbarrier`` to expect ``count`` (a compile-time int) arrivals per phase."""
    bar = barrier_type(_semantic, mbarrier)
    count = _semantic.require_int(count, "mbarrier.init's count")
    if not 1 <= count <= MAX_ARRIVALS:
        _semantic.error(f"mbarrier.init's count must be in [1, {MAX_ARRIVALS}] (the arrival counts an mbarrier "
                        f"holds), got {count}")
    _semantic.create("mbarrier_init", [bar], [], {"count": count})


@builtin
def expect(mbarrier, bytes_per_cta=None, pred=True, *, from_cta=None, _semantic=None) -> None:
    """Arrive once and expect ``bytes_per_cta`` (a compile-time int) more transaction bytes this phase."""
    bar = barrier_type(_semantic, mbarrier)
    if bytes_per_cta is None:
        _semantic.error("mbarrier.expect needs bytes_per_cta, the bytes the copies will bring, "
                        "e.g. mbarrier.expect(bar, desc.block_type.nbytes)")
    nbytes = _semantic.require_int(bytes_per_cta, "mbarrier.expect's bytes_per_cta")
    if not 0 <= nbytes <= MAX_ARRIVALS:
        _semantic.error(f"mbarrier.expect's bytes_per_cta must be in [0, {MAX_ARRIVALS}] (an mbarrier's transaction "
                        f"count is 20 bits wide; split larger transfers over several phases), got {nbytes}")
    attrs = {"bytes": nbytes, **_routing(_semantic, from_cta, "mbarrier.expect")}
    p = predicate(_semantic, pred)
    if p is not None:
        _semantic.create("mbarrier_expect", [bar, p], [], attrs)


@builtin
def arrive(mbarrier, *, count=1, pred=True, from_cta=None, _semantic=None) -> None:
    """Arrive ``count`` (a compile-time int) times on ``mbarrier``."""
    bar = barrier_type(_semantic, mbarrier)
    count = _semantic.require_int(count, "mbarrier.arrive's count")
    if not 1 <= count <= MAX_ARRIVALS:
        _semantic.error(f"mbarrier.arrive's count must be in [1, {MAX_ARRIVALS}], got {count}")
    attrs = {"count": count, **_routing(_semantic, from_cta, "mbarrier.arrive")}
    p = predicate(_semantic, pred)
    if p is not None:
        _semantic.create("mbarrier_arrive", [bar, p], [], attrs)


def _routing(sem, from_cta, what: str) -> dict:
    """The op attribute for ``from_cta``: ``{}`` when every CTA arrives on its own barrier
    (``None``, or the mask ``num_ctas - 1``), else ``{"from_cta": mask}``.

    ``from_cta`` is a mask of CTA-rank bits: only the CTAs whose other rank bits are zero
    arrive, each on the barrier of every CTA that agrees with it on the mask's bits
    (``0``: CTA 0 arrives on every CTA's barrier); ``docs/clusters.rst``."""
    if from_cta is None:
        return {}
    mask = sem.require_int(from_cta, f"{what}'s from_cta")
    if not 0 <= mask < sem.num_ctas:
        sem.error(f"{what}'s from_cta is a mask of CTA-rank bits in [0, num_ctas - 1] = [0, {sem.num_ctas - 1}] "
                  f"(the kernel runs with num_ctas={sem.num_ctas}), got {mask}")
    return {} if mask == sem.num_ctas - 1 else {"from_cta": mask}


@builtin
def wait(mbarrier, phase, pred=True, deps=(), _semantic=None) -> None:
    """Wait until the phase of parity ``phase`` (0 or 1, runtime or constant) has completed.

    ``deps`` are the shared memory descriptors the wait makes safe to use.
    """
    bar = barrier_type(_semantic, mbarrier)
    if isinstance(phase, int) and phase not in (0, 1):
        _semantic.error(f"mbarrier.wait's phase is a parity, 0 or 1, got {phase}")
    phase = _semantic.to_tensor(phase, int32)
    if phase.is_block() or not phase.dtype.is_int() or phase.dtype.is_bool():
        _semantic.error(f"mbarrier.wait's phase must be an integer scalar, got {phase.type}")
    phase = _semantic.cast(phase, int32)
    deps = [descriptor_handle(_semantic, d, "each of mbarrier.wait's deps") for d in deps]
    p = predicate(_semantic, pred)
    if p is not None:
        _semantic.create("mbarrier_wait", [bar, phase, p] + deps, [])


@builtin
def invalidate(mbarrier, _semantic=None) -> None:
    """Invalidate ``mbarrier`` (before its memory is reused for something else)."""
    _semantic.create("mbarrier_invalidate", [barrier_type(_semantic, mbarrier)], [])
