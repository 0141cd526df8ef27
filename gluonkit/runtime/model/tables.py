"""Cost tables: what each kind of work costs on one SM of a target, in SM clock cycles.

A :class:`CostTable` holds the few numbers the simulation (:mod:`.simulate`) needs: the
tensor cores' throughput per dtype, the SM's share of the memory system (bytes per cycle
that TMA copies and global loads and stores get, and their latency), what an op costs to
issue, and the clock that turns cycles into time.  The figures are per SM: a launch's time
is one SM's simulated time scaled by waves (:mod:`.predict`).

``SM90A`` (H100 SXM) starts from public figures (132 SMs, 4096 dense fp16 FLOP per cycle per
SM, 3.35 TB/s HBM3) and takes its clock, memory share and latencies from the fit that
``benchmarks/calibrate_model.py`` makes against H100 measurements (the table in
docs/benchmarks.rst).  ``SM100A`` (B200) is **from public specifications only**, with
Hopper's latencies: there is no Blackwell GPU to calibrate on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict

__all__ = ["CostTable", "SM90A", "SM100A", "TABLES", "table_for", "H100_PEAK_MMA"]


@dataclass(frozen=True)
class CostTable:
    """Per-SM costs of one target (cycles unless the name says otherwise).

    ``mma_flops_per_cycle``: dense tensor-core FLOP per cycle per SM, by the operands' dtype
    name; ``mma_instr_cycles``: the fixed cost of each MMA instruction (a K-slice of 16
    elements of fp16) on top of its FLOP, which makes narrow MMAs less efficient.
    ``mem_bytes_per_cycle``: the SM's share of the L2/HBM bandwidth that TMA copies and
    global loads and stores use (one server, first come first served); ``load_latency``:
    issue to landing of a copy beyond its transfer time; ``store_latency`` the same for a
    store's read of shared memory.  ``smem_bytes_per_cycle``: shared memory's bandwidth
    (``local_load``/``local_store``).  ``alu_per_warp_op``: cycles of one warp instruction
    on one of the SM's 4 schedulers; ``op_cycles``: the issue cost of an op (by IR op name,
    default ``default_op_cycles``).  ``wait_cycles``: an ``mbarrier.wait`` that returns
    (more when it blocked: the wake-up).  ``hbm_bytes_per_second``: the whole GPU's DRAM
    bandwidth, a floor on a launch's time (:mod:`.predict`).  ``launch_us``: a launch's fixed
    cost.  ``wgmma_latency``: what a ``wgmma`` instruction takes from issue to completion on
    top of its tensor-core cycles — paid by every instruction of a kernel whose wgmma ptxas
    serialized (its note C7514 and kin: each instruction waits for the previous one's
    completion, :mod:`.simulate`), hidden otherwise.  ``cta_start_us``: what each wave of CTAs
    costs an SM beyond its programs' simulated time — the previous CTA's exit and the next
    one's start on the SM (:func:`~.predict.launch_time_us`).  ``max_mem_share``: how many times its share an SM may get when other SMs are idle
    (:meth:`sharing`).
    """

    name: str
    arch: str
    sms: int
    clock_ghz: float
    mma_flops_per_cycle: Dict[str, float]
    mma_instr_cycles: float
    mem_bytes_per_cycle: float
    load_latency: float
    store_latency: float
    smem_bytes_per_cycle: float
    alu_per_warp_op: float
    default_op_cycles: float
    op_cycles: Dict[str, float]
    wait_cycles: float
    wake_cycles: float
    hbm_bytes_per_second: float
    launch_us: float
    wgmma_latency: float = 0.0
    cta_start_us: float = 0.0
    source: str = ""
    schedulers: int = 4
    max_mem_share: float = 2.0
    notes: Dict[str, str] = field(default_factory=dict)

    def with_(self, **changes) -> "CostTable":
        """A copy with some fields changed (``table.with_(clock_ghz=1.6)``), for calibration and tests."""
        return replace(self, **changes)

    def mma_cycles(self, m: int, n: int, k: int, dtype: str) -> float:
        """Cycles the SM's tensor cores take for an ``m × n × k`` MMA with ``dtype`` operands."""
        try:
            rate = self.mma_flops_per_cycle[dtype]
        except KeyError:
            raise ValueError(f"the {self.name} cost table has no MMA rate for {dtype} operands; it knows "
                             f"{', '.join(sorted(self.mma_flops_per_cycle))}") from None
        instructions = max(1, m // 64) * self.k_slices(k, dtype)
        return 2.0 * m * n * k / rate + instructions * self.mma_instr_cycles

    @staticmethod
    def k_slices(k: int, dtype: str) -> int:
        """The MMA instructions along ``k`` (one per 32 bytes of K) of one 64-row slice of an MMA."""
        return max(1, k * _bits(dtype) // 256)

    def sharing(self, active_sms: int) -> "CostTable":
        """The table for a launch that keeps ``active_sms`` SMs busy: the memory system's bandwidth is
        shared by those only, so each gets ``sms / active_sms`` times its share, at most ``max_mem_share``."""
        scale = min(self.max_mem_share, self.sms / max(1, min(active_sms, self.sms)))
        return self if scale <= 1.0 else replace(self, mem_bytes_per_cycle=self.mem_bytes_per_cycle * scale)

    def cycles_to_us(self, cycles: float) -> float:
        return cycles / (self.clock_ghz * 1e3)


def _bits(dtype: str) -> int:
    if dtype.startswith("float8") or dtype in ("int8", "uint8"):
        return 8
    if dtype in ("float32", "int32", "tf32"):
        return 32
    return 16


_COMMON_OPS = {
    # control flow and scalars: nearly free; the loop's branch and index math
    "for": 2, "yield": 1, "if": 2, "while": 2, "condition": 1, "constant": 0, "program_id": 1, "num_programs": 1,
    "memdesc_index": 1, "memdesc_slice": 0, "memdesc_permute": 0, "memdesc_reshape": 0, "memdesc_reinterpret": 0,
    "tmem_index": 0, "tmem_slice": 0, "tmem_reinterpret": 0, "hint": 0, "assume": 0, "return": 0,
    "local_alloc": 0, "tmem_alloc": 0, "set_auto_layout": 0,
    # synchronization and asynchronous issue
    "mbarrier_init": 8, "mbarrier_invalidate": 8, "mbarrier_arrive": 8, "mbarrier_expect": 8,
    "mbarrier_wait": 0, "thread_barrier": 20, "fence_async_shared": 16,
    "async_tma_copy_global_to_shared": 24, "async_tma_copy_shared_to_global": 24, "async_tma_store_wait": 8,
    "warpgroup_mma": 8, "warpgroup_mma_wait": 4, "tcgen05_mma": 8, "tcgen05_commit": 8,
    "warp_specialize": 40,
}

#: Dense tensor-core FLOP per cycle per SM of the H100 (public: 989 TFLOP/s fp16 at 1.83 GHz on 132 SMs).
H100_PEAK_MMA = {"float16": 4096, "bfloat16": 4096, "float32": 2048, "float8e4nv": 8192, "float8e5": 8192,
                 "int8": 8192}

#: The fit of ``benchmarks/calibrate_model.py --fit`` (docs/benchmarks.rst, "Cost model calibration").
#: ``mma_instr_cycles`` and ``wgmma_latency`` are set, not fitted (``FITTED`` in that script says why).
_FIT = dict(clock_ghz=1.98, mma_rate=0.741, mem_bytes_per_cycle=42.42, load_latency=853.5, mma_instr_cycles=0.0,
            launch_us=1.0, max_mem_share=2.0, wgmma_latency=180.0, cta_start_us=1.829)

SM90A = CostTable(
    name="H100 SXM (sm_90a)", arch="sm_90a", sms=132, clock_ghz=_FIT["clock_ghz"],
    mma_flops_per_cycle={k: v * _FIT["mma_rate"] for k, v in H100_PEAK_MMA.items()},
    mma_instr_cycles=_FIT["mma_instr_cycles"], mem_bytes_per_cycle=_FIT["mem_bytes_per_cycle"],
    load_latency=_FIT["load_latency"], store_latency=500.0,
    smem_bytes_per_cycle=128.0, alu_per_warp_op=1.0, default_op_cycles=1.0, op_cycles=dict(_COMMON_OPS),
    wait_cycles=4.0, wake_cycles=30.0, hbm_bytes_per_second=3.35e12, launch_us=_FIT["launch_us"],
    max_mem_share=_FIT["max_mem_share"], wgmma_latency=_FIT["wgmma_latency"], cta_start_us=_FIT["cta_start_us"],
    source="public H100 SXM figures; clock, memory share and latencies fitted to H100 measurements "
           "(benchmarks/calibrate_model.py)")

_HOPPER_MMA_FRACTION = SM90A.mma_flops_per_cycle["float16"] / H100_PEAK_MMA["float16"]
_B200_CLOCK_GHZ = 1.85  # with 8192 FLOP per cycle per SM on 148 SMs: the 2.25 PFLOP/s dense fp16 of the specification
_NS = SM90A.clock_ghz / _B200_CLOCK_GHZ  # Hopper's fitted latencies, kept in nanoseconds

SM100A = CostTable(
    name="B200 (sm_100a)", arch="sm_100a", sms=148, clock_ghz=_B200_CLOCK_GHZ,
    # the public peak rates, times the fraction of its peak that the H100 fit found (clocks under load)
    mma_flops_per_cycle={k: v * 2 * _HOPPER_MMA_FRACTION for k, v in H100_PEAK_MMA.items()},
    mma_instr_cycles=SM90A.mma_instr_cycles,
    # Hopper's fitted per-SM share scaled by the HBM bandwidth per SM per cycle (8 TB/s over 148 SMs)
    mem_bytes_per_cycle=SM90A.mem_bytes_per_cycle * (8.0e12 / 148 / _B200_CLOCK_GHZ)
    / (SM90A.hbm_bytes_per_second / SM90A.sms / SM90A.clock_ghz),
    load_latency=SM90A.load_latency / _NS, store_latency=SM90A.store_latency / _NS,
    smem_bytes_per_cycle=128.0, alu_per_warp_op=1.0, default_op_cycles=1.0, op_cycles=dict(_COMMON_OPS),
    wait_cycles=SM90A.wait_cycles, wake_cycles=SM90A.wake_cycles, hbm_bytes_per_second=8.0e12,
    launch_us=SM90A.launch_us, max_mem_share=SM90A.max_mem_share, wgmma_latency=SM90A.wgmma_latency / _NS,
    cta_start_us=SM90A.cta_start_us,
    source="public B200 specifications only (148 SMs, 2.25 PFLOP/s dense fp16 at an assumed 1.85 GHz, "
           "8 TB/s HBM3e); tensor cores at the same fraction of peak, latencies and launch cost (same "
           "nanoseconds) as the H100 fit, the per-SM memory share scaled from it by HBM bandwidth per SM; "
           "not calibrated")

TABLES = {"sm_90a": SM90A, "sm_100a": SM100A}


def table_for(target) -> CostTable:
    """The table of ``target`` (``"sm_90a"``, ``"sm_100a"``) or ``target`` itself if it is a table."""
    if isinstance(target, CostTable):
        return target
    try:
        return TABLES[target]
    except KeyError:
        raise ValueError(f"no cost table for target {target!r}; there are tables for {', '.join(TABLES)}") from None
