"""GPU targets gluonkit compiles for, and the PTX ISA version each needs.

``sm_90a`` is Hopper with its architecture-specific instructions (wgmma, setmaxnreg);
``sm_100a`` is Blackwell (tcgen05).  The PTX ISA version is the lowest that has every
instruction the target's kernels may use: 8.0 introduced sm_90a; sm_100a (8.6) needs 8.7 for
``kind::mxf4nvf4`` (nvfp4 MMAs) and 8.8 for the ``.block16``/``.block32`` scale qualifiers
that Triton 3.9 writes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Target", "TARGETS", "get_target"]


@dataclass(frozen=True)
class Target:
    """One compilation target: ``arch`` for LLVM/ptxas, ``ptx_version`` as ``major*10+minor``."""

    arch: str
    ptx_version: int
    compute_capability: int
    max_shared_memory_per_block: int  # bytes, opt-in maximum

    @property
    def llvm_features(self) -> str:
        return f"+ptx{self.ptx_version}"

    @property
    def ptx_version_text(self) -> str:
        return f"{self.ptx_version // 10}.{self.ptx_version % 10}"


TARGETS = {
    # H100/H200: 227 KB of dynamic shared memory per block (232448 bytes).
    "sm_90a": Target("sm_90a", 80, 90, 232448),
    # B200: the same opt-in per-block limit as Hopper.
    "sm_100a": Target("sm_100a", 88, 100, 232448),
}


def get_target(arch: str) -> Target:
    """The :class:`Target` called ``arch``; a ``ValueError`` listing the known ones otherwise."""
    try:
        return TARGETS[arch]
    except KeyError:
        raise ValueError(f"unknown target {arch!r}; gluonkit compiles for {', '.join(TARGETS)}") from None
