"""``predict``: a launch's modelled time, TFLOP/s and timeline, on the CPU.

The launch is set up as for the interpreter (:func:`~gluonkit.runtime.launch.interpreter_inputs`);
the programs that share one SM in the first wave — program 0 and, when several CTAs fit on an
SM, the next ones — run in the interpreter (one schedule) under a :class:`~.recorder.Recorder`;
:func:`~.simulate.simulate` times their recorded steps with the target's
:class:`~.tables.CostTable`.  The launch's time is then

``launch_us + waves × (cta_start_us + that SM's simulated time)``, ``waves = ceil(programs / (SMs × CTAs per SM))``,

floored by the DRAM time of the arguments' bytes (every array read or written once:
``bytes / hbm_bytes_per_second``).  A persistent kernel (grid ≤ SMs) is one wave whose program 0
has the most work (it takes tiles ``0, grid, 2 grid …``), so its time is the launch's.  L2 reuse is
in the per-SM memory share (a fitted bandwidth, :mod:`.tables`), not modelled per access; a
launch that leaves SMs idle gives the busy ones a larger share (up to ``max_mem_share`` times).

Interpreting a whole SM's work of a large launch takes long (an 8192³ GEMM's program 0 runs
2048 K-steps); :func:`extrapolate` predicts it from smaller problems instead.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field, is_dataclass, replace
from typing import Callable, Iterator, List, Optional, Tuple

from ...interpret.engine import run_program
from ...interpret.timeline import render_svg
from ...ir.warp_specialize import op_plan
from ...lower.backend.ptxas import find_ptxas
from ...lower.compiler import compile_function
from ...lower.memplan.smem import plan_shared_memory
from ..launch import INTERPRETED_LAUNCH_HANDLERS, interpreter_inputs
from .recorder import Recorder
from .simulate import Simulation, simulate
from .tables import CostTable, table_for

__all__ = ["predict", "predict_ir", "modelling", "for_interpreter", "Prediction", "extrapolate", "launch_time_us",
           "MAX_SHARED_PER_SM", "ptxas_notes"]

#: Shared memory per SM that CTAs can use together (bytes), for how many fit on an SM.
MAX_SHARED_PER_SM = 228 * 1024
_MAX_WARPS_PER_SM = 64


@dataclass
class Prediction:
    """A modelled launch (**model output**, not a measurement).

    ``time_us``: the launch; ``program_us``: one SM's simulated programs; ``tflops``: ``flops``
    over ``time_us`` (``flops``: given, or the simulated MMAs' FLOP scaled to the grid);
    ``waves``, ``ctas_per_sm``; ``simulation``: the cycles, per-partition ends and the units'
    busy cycles; ``table``: the cost table used.  :meth:`chrome` / :meth:`svg` / :meth:`save`
    give the simulated SM's timeline in the interpreter trace's vocabulary, on a nanosecond axis.
    """

    time_us: float
    program_us: float
    flops: float
    waves: int
    ctas_per_sm: int
    simulation: Simulation
    table: CostTable
    kernel: str = ""
    recorder: Optional[Recorder] = field(default=None, repr=False)
    programs: int = 1
    dram_bytes: float = 0.0

    def with_table(self, table, timeline: bool = False, active_sms: Optional[int] = None) -> "Prediction":
        """The same recorded programs simulated with another cost table (calibration, what-ifs);
        ``active_sms``: the SMs the launch keeps busy (default: from its grid)."""
        return Prediction.of(self.recorder, table_for(table), self.programs, self.ctas_per_sm, self.dram_bytes,
                             self.flops, timeline, active_sms)

    @classmethod
    def of(cls, recorder: Recorder, table: CostTable, programs: int, ctas_per_sm: int, dram_bytes: float,
           flops: float, timeline: bool = True, active_sms: Optional[int] = None) -> "Prediction":
        """Simulate ``recorder``'s programs with ``table`` and scale them to a launch of ``programs``
        (on ``active_sms`` SMs, default ``ceil(programs / ctas_per_sm)``: their memory share grows
        when SMs are idle, :meth:`~.tables.CostTable.sharing`)."""
        active = math.ceil(programs / ctas_per_sm) if active_sms is None else active_sms
        sim = simulate(recorder, table.sharing(active), events=timeline)
        program_us = table.cycles_to_us(sim.cycles)
        waves = max(1, math.ceil(programs / (table.sms * ctas_per_sm)))
        return cls(launch_time_us(table, program_us, waves, dram_bytes), program_us, flops, waves, ctas_per_sm, sim,
                   table, recorder.kernel, recorder, programs, dram_bytes)

    @property
    def tflops(self) -> float:
        return self.flops / self.time_us / 1e6 if self.time_us > 0 else 0.0

    @property
    def timeline(self) -> dict:
        """The simulated SM's timeline as a Chrome trace-event object (``ts`` in ns)."""
        return {"traceEvents": self.simulation.events, "displayTimeUnit": "ns",
                "otherData": {"producer": "gluonkit cost model (model output, not a measurement)",
                              "table": self.table.name, "clock": "ts in ns of the modelled SM clock"}}

    def save(self, path: str) -> None:
        """Write :attr:`timeline` as JSON (ui.perfetto.dev, chrome://tracing)."""
        import json
        with open(path, "w") as f:
            json.dump(self.timeline, f, separators=(",", ":"))

    def svg(self, width: int = 960, title: Optional[str] = None) -> str:
        """The timeline drawn by :func:`gluonkit.interpret.timeline.render_svg` (axis in ns)."""
        title = title or f"{self.kernel}, {self.time_us:.1f} us, {self.tflops:.0f} TFLOP/s predicted"
        return render_svg(self.timeline, width=width, title=f"model output ({self.table.name}): {title}")

    def summary(self) -> str:
        busy = ", ".join(f"{k} {v / max(self.simulation.cycles, 1) * 100:.0f}% busy"
                         for k, v in self.simulation.busy.items())
        serialized = "; wgmma serialized by ptxas" if self.recorder is not None and self.recorder.serialized_wgmma else ""
        return (f"{self.kernel}: predicted {self.time_us:.1f} us, {self.tflops:.0f} TFLOP/s "
                f"({self.waves} wave(s) of {self.program_us:.1f} us, {self.ctas_per_sm} CTA(s) per SM; {busy}"
                f"{serialized}) [model output, {self.table.name}]")


def predict(kernel, grid, *args, target="sm_90a", flops: Optional[float] = None, ctas_per_sm: Optional[int] = None,
            timeline: bool = True, **kwargs) -> Prediction:
    """Model ``kernel[grid](*args, **kwargs)`` on ``target`` (a name or a :class:`~.tables.CostTable`).

    The arguments are those of the launch, as the interpreter takes them (numpy arrays, CPU
    tensors, descriptors over them).  ``flops``: the launch's useful FLOP for :attr:`Prediction.tflops`
    (default: the simulated MMAs' FLOP times programs over simulated programs).  ``ctas_per_sm``:
    default from shared memory and warps, at most ``ceil(programs / SMs)``.  ``timeline=False``
    skips the events (faster).
    """
    func, grid3, values, memory = interpreter_inputs(kernel, grid, args, kwargs)
    return predict_ir(func, grid3, values, memory, target, flops, ctas_per_sm, timeline)


def predict_ir(func, grid, values, memory, target="sm_90a", flops: Optional[float] = None,
               ctas_per_sm: Optional[int] = None, timeline: bool = True) -> Prediction:
    """:func:`predict` of an inferred IR function with its interpreter values and memory."""
    table = table_for(target)
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    programs = grid3[0] * grid3[1] * grid3[2]
    if ctas_per_sm is None:  # what fits, but no more than the grid puts on an SM (it spreads CTAs over SMs)
        ctas_per_sm = min(_ctas_per_sm(func), math.ceil(programs / table.sms))
    recorder = Recorder(table)
    recorder.serialized_wgmma = any(_SERIALIZED in note for note in ptxas_notes(func, table.arch))
    order = [(x, y, z) for z in range(grid3[2]) for y in range(grid3[1]) for x in range(grid3[0])]
    simulated = order[:max(1, min(ctas_per_sm, programs))]
    for pid in simulated:
        run_program(func, pid, grid3, values, memory, trace=recorder, schedules=1)
    if flops is None:
        flops = recorder.mma_flops * programs / len(simulated)
    dram = sum(a.nbytes for a in memory.allocations)
    return Prediction.of(recorder, table, programs, ctas_per_sm, dram, flops, timeline)


@contextmanager
def modelling(target="sm_90a", timeline: bool = True) -> Iterator[List[Prediction]]:
    """Inside the block, every interpreted launch (``GLUONKIT_INTERPRET=1``) is modelled
    instead of run: its :class:`Prediction` is appended to the list the block gets.  The
    kernels' outputs are not computed (only the simulated SM's programs run)::

        with modelling("sm_90a") as predictions:
            ws_gemm.prepare(a, b, c, num_programs=1)()
        print(predictions[0].summary())
    """
    found: List[Prediction] = []

    def handler(func, grid, values, memory):
        found.append(predict_ir(func, grid, values, memory, target, timeline=timeline))

    INTERPRETED_LAUNCH_HANDLERS.append(handler)
    try:
        yield found
    finally:
        INTERPRETED_LAUNCH_HANDLERS.remove(handler)


def for_interpreter(value):
    """``value`` as the interpreter takes it: a GPU tensor as a host copy, a descriptor over one
    as the same descriptor over that copy; anything else as it is."""
    if is_dataclass(value) and hasattr(value, "base") and hasattr(value, "block_shape"):
        base = for_interpreter(value.base)
        return value if base is value.base else replace(value, base=base)
    if getattr(value, "is_cuda", False) and hasattr(value, "cpu"):
        return value.detach().cpu()
    return value


def launch_time_us(table: CostTable, program_us: float, waves: int, dram_bytes: float) -> float:
    """A launch's time from one SM's: ``launch_us + waves × (cta_start_us + program_us)``, at least the
    DRAM time."""
    return table.launch_us + max(waves * (table.cta_start_us + program_us),
                                 dram_bytes / table.hbm_bytes_per_second * 1e6)


_SERIALIZED = "wgmma.mma_async instructions are serialized"
_NOTES: dict = {}


def ptxas_notes(func, arch: str) -> tuple:
    """ptxas's "Potential Performance Loss" notes on ``func`` compiled for ``arch`` (empty without
    ptxas, for a kernel without wgmma or for an arch other than sm_90a).  The model needs one of them: a kernel whose wgmma ptxas
    serialized runs each MMA instruction after the previous one completed (:mod:`.simulate`),
    which no IR-level view of the kernel shows.  Compiled once per function and arch."""
    if arch != "sm_90a" or find_ptxas() is None or not any(op.name == "warpgroup_mma" for op in func.walk()):
        return ()
    key = (func, arch)
    if key not in _NOTES:
        _NOTES[key] = tuple(compile_function(func, arch).metadata.get("ptxas_notes", ()))
    return _NOTES[key]


def _ctas_per_sm(func) -> int:
    """How many CTAs of ``func`` fit on an SM: by shared memory and warps; one when its
    partitions set register budgets (``setmaxnreg`` shares out the whole register file)."""
    smem = plan_shared_memory(func).size
    plans = [op_plan(op, func.num_warps, func.maxnreg) for op in func.walk() if op.name == "warp_specialize"]
    if any(plan.default_regs is not None for plan in plans):
        return 1
    warps = max([plan.total_warps for plan in plans] + [func.num_warps])
    return max(1, min(MAX_SHARED_PER_SM // max(smem, 1), _MAX_WARPS_PER_SM // warps, 8))


def extrapolate(predict_at: Callable[[int, int], float], full: Tuple[int, int],
                points: Tuple[Tuple[int, int], Tuple[int, int]] = ((2, 3), (8, 16))) -> float:
    """``predict_at(tiles, k_steps)`` at ``full = (tiles, k_steps)``, from smaller problems.

    A persistent GEMM program's time is bilinear in its tiles ``t`` and K-steps ``k`` once its
    pipeline is in steady state (``a + b t + c k + d t k``: the ring fill, per-tile epilogues,
    per-step MMAs and loads), so it is fitted exactly at ``t ∈ points[0]``, ``k ∈ points[1]``
    (choose ``k`` at least the ring depth) and evaluated at ``full``.  A dimension of ``full``
    no larger than its points is not extrapolated: it is used as it is (one tile per program:
    linear in ``k`` alone).
    """
    (t1, t2), (k1, k2) = points
    t, k = full
    ts, u = ((t, t), 0.0) if t <= t2 else ((t1, t2), (t - t1) / (t2 - t1))
    ks, v = ((k, k), 0.0) if k <= k2 else ((k1, k2), (k - k1) / (k2 - k1))
    f = {(a, b): predict_at(a, b) for a in set(ts) for b in set(ks)}
    return (f[ts[0], ks[0]] * (1 - u) * (1 - v) + f[ts[1], ks[0]] * u * (1 - v) + f[ts[0], ks[1]] * (1 - u) * v
            + f[ts[1], ks[1]] * u * v)
