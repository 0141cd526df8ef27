"""Calibrate the cost model (:mod:`gluonkit.runtime.model`) against the Hopper GEMM examples.

Two halves, one table of configurations (``CONFIGS``) and shapes (``SHAPES``):

* ``--measure`` (on the H100): times every configuration of the three Hopper GEMM examples
  (``ws_gemm`` cooperative / ping-pong, ``persistent_gemm``, ``pipelined_gemm``) on every
  shape, fp16 in and out, the median of ``--samples`` calls each after an L2 flush, and prints
  one ``measured`` line each as soon as it is timed;
* without it (on the CPU): predicts every configuration with the model and prints predicted
  against measured time (the ``measured`` lines of ``--measured FILE``, default
  ``benchmarks/calibration_h100.txt``), the error in percent and, per shape, the Spearman
  rank correlation between predicted and measured times across the configurations.

Run: ``PYTHONPATH=$PWD python benchmarks/calibrate_model.py --measure`` on the GPU machine,
``PYTHONPATH=$PWD python benchmarks/calibrate_model.py`` anywhere.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "persistent_gemm"))
sys.path.insert(0, HERE)

SHAPES = ((4096, 4096, 4096), (8192, 8192, 1024), (2048, 2048, 8192), (6144, 6144, 6144), (8192, 8192, 8192))

#: name -> (example, keyword arguments of its ``prepare`` / ``gemm``); configurations measured
#: before (docs/benchmarks.rst) first, so that a run cut short still has them.
CONFIGS = {
    "ws coop 128x256 s4": ("ws", dict(BN=256, STAGES=4)),
    "ws pp 128x128 s6": ("ws", dict(BN=128, STAGES=6, PINGPONG=True, GROUP_M=8)),
    "ws tall 256x128 s4": ("ws", dict(BM=256, BN=128, STAGES=4, GROUP_M=4)),
    "pers 128x256 s4 e2": ("pers", dict(BN=256, STAGES=4, EPILOGUE_SPLIT=2)),
    "pers 128x128 s6 w4": ("pers", dict(BN=128, STAGES=6, num_warps=4)),
    "pipe 128x128 s4": ("pipe", dict(BN=128, STAGES=4)),
    "pers 128x256 s3": ("pers", dict(BN=256, STAGES=3)),
    "pers 128x256 s2": ("pers", dict(BN=256, STAGES=2)),
    "pipe 128x256 s3": ("pipe", dict(BN=256, STAGES=3)),
    "ws coop 128x256 s3 e1": ("ws", dict(BN=256, STAGES=3, EPILOGUE_SPLIT=1)),
    "ws coop 128x128 s4": ("ws", dict(BN=128, STAGES=4)),
    "ws coop 128x256 s2": ("ws", dict(BN=256, STAGES=2)),
    "ws pp 128x128 s2": ("ws", dict(BN=128, STAGES=2, PINGPONG=True, GROUP_M=8)),
}

#: The Blackwell variants the model compares (``--blackwell``; no GPU to measure them on).
BLACKWELL = {
    "plain, 1 accumulator": ("bw", dict(BN=256, STAGES=3)),
    "ws, 1 accumulator": ("bwws", dict(BN=256, STAGES=3, ACC_BUFFERS=1)),
    "ws, 2 accumulators": ("bwws", dict(BN=256, STAGES=3, ACC_BUFFERS=2)),
}


def runner(example: str, a, b, c, config: dict):
    """A function of no arguments that runs ``example`` with ``config`` on ``a``, ``b``, ``c``."""
    if example == "bw":
        import blackwell_gemm
        return blackwell_gemm.prepare(a, b, c, **config)
    if example == "bwws":
        import blackwell_ws_gemm
        return blackwell_ws_gemm.prepare(a, b, c, **config)
    if example == "ws":
        import ws_gemm
        return ws_gemm.prepare(a, b, c, **config)
    if example == "pers":
        import persistent_gemm
        return persistent_gemm.prepare(a, b, c, **config)
    import pipelined_gemm
    return pipelined_gemm.prepare(a, b, c, **config)


def measure(shapes, samples: int, skip=(), done=(), only: str = "") -> None:
    """Time every configuration on every shape on the GPU; print one ``measured`` line each as
    soon as it is timed (CUDA events around each call, an L2 flush before each; the median).

    Configurations named in ``skip``, whose name does not contain ``only``, and ``(shape, name)``
    pairs in ``done`` are left out.  A
    first call that has not finished after :data:`HANG_SECONDS` is reported (``hang: name``) and
    the process exits with status 3, so that a rerun can skip that configuration."""
    import statistics
    import time

    import torch

    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float()
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        for name, (example, config) in CONFIGS.items():
            if name in skip or only not in name or ((M, N, K), name) in done:
                continue
            c.fill_(float("nan"))
            start = time.perf_counter()
            fn = runner(example, a, b, c, config)
            fn()
            finished = torch.cuda.Event()
            finished.record()
            while not finished.query():
                if time.perf_counter() - start > HANG_SECONDS:
                    print(f"hang: {name} (first call on {M}x{N}x{K} still running after {HANG_SECONDS} s)", flush=True)
                    os._exit(3)
                time.sleep(0.001)
            first = time.perf_counter() - start
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            times = []
            for _ in range(samples):
                flush.zero_()
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                fn()
                end.record()
                end.synchronize()
                times.append(begin.elapsed_time(end))
            ms = statistics.median(times)
            print(f"measured {M}x{N}x{K} | {name:24s} | {ms * 1e3:10.1f} us | {2 * M * N * K / ms / 1e9:6.0f} TFLOP/s"
                  f" | rel.err {err:.1e} | first call {first:.2f} s", flush=True)


HANG_SECONDS = 8.0


# ---------------------------------------------------------------------------- the model's side
BK = 64
POINTS = ((2, 3), (8, 16))  # tiles and K-steps of the problems the model interprets (extrapolate)


def _tile(config: dict):
    return config.get("BM", 128), config.get("BN", 128 if config.get("PINGPONG") else 256)


def record(example: str, config: dict, tiles: int, k_steps: int, target="sm_90a", aligned: bool = True):
    """The model's :class:`~gluonkit.runtime.model.Prediction` of one program doing ``tiles``
    tiles of ``k_steps`` K-slices (zero inputs: the values do not change the schedule).
    ``aligned=False``: B's and C's rows are 8 elements short of the tile, so that the kernel is
    specialized (and compiled, which the model asks ptxas about) like one whose row strides are
    not multiples of 16 elements."""
    import numpy as np
    from gluonkit.runtime.model import modelling

    BM, BN = _tile(config) if example != "pipe" else (config.get("BM", 128), config.get("BN", 128))
    M, N, K = BM * tiles, BN if aligned else BN - 8, BK * k_steps
    a, b, c = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16), np.zeros((M, N), np.float16)
    extra = {} if example == "pipe" else dict(num_programs=1)
    with modelling(target, timeline=False) as found:
        runner(example, a, b, c, dict(config, **extra))()
    return found[0]


class Model:
    """The recorded small problems of every configuration, and predictions at full size from them."""

    def __init__(self, configs=CONFIGS, target="sm_90a", log=print):
        """Record every configuration of ``configs`` at the :data:`POINTS` problems on ``target``."""
        self.recorded = {}
        self.configs, self.target = configs, target
        self._table, self._simulated = None, {}
        for name, (example, _) in configs.items():
            for t in sorted(set((1, 1) if example == "pipe" else POINTS[0])):
                for k in POINTS[1]:
                    self.recording(name, t, k)
            log(f"  recorded {name}")

    def recording(self, name: str, tiles: int, k_steps: int, aligned: bool = True):
        """The prediction of configuration ``name`` at ``tiles`` × ``k_steps``, recorded once."""
        key = (name, tiles, k_steps) + (() if aligned else ("unaligned",))
        if key not in self.recorded:
            example, config = self.configs[name]
            self.recorded[key] = record(example, config, tiles, k_steps, self.target, aligned)
        return self.recorded[key]

    def predict_us(self, name: str, shape, table) -> float:
        """Predicted time of configuration ``name`` on ``shape`` with cost table ``table``."""
        from gluonkit.runtime.model import extrapolate, launch_time_us

        if table is not self._table:  # simulations are kept per table: shapes share recorded problems
            self._table, self._simulated = table, {}

        example, config = self.configs[name]
        M, N, K = shape
        BM, BN = _tile(config) if example != "pipe" else (config.get("BM", 128), config.get("BN", 128))
        tiles = -(-M // BM) * -(-N // BN)
        k_steps = -(-K // BK)
        aligned = N % 16 == 0 and K % 16 == 0  # the row strides the launch specializes on
        sample = self.recording(name, 1 if example == "pipe" else POINTS[0][0], POINTS[1][0], aligned)
        if example == "pipe":
            per_tile, points = 1, ((1, 1), POINTS[1])
            waves = -(-tiles // (table.sms * sample.ctas_per_sm))
        else:
            per_tile, points, waves = -(-tiles // min(tiles, table.sms)), POINTS, 1

        active = min(-(-tiles // sample.ctas_per_sm), table.sms)  # SMs the launch keeps busy

        def program_us(t, k):
            key = (name, t, k, active, aligned)
            if key not in self._simulated:
                self._simulated[key] = self.recording(name, t, k, aligned).with_table(
                    table, active_sms=max(1, active)).program_us
            return self._simulated[key]

        program = extrapolate(program_us, (per_tile, k_steps), points)
        return launch_time_us(table, program, waves, 2 * (M * K + K * N + M * N))


def read_measured(path: str) -> dict:
    """``{(shape, config name): µs}`` from the ``measured`` lines of a ``--measure`` run's output."""
    found = {}
    with open(path) as f:
        for line in f:
            if line.startswith("measured "):
                parts = [p.strip() for p in line[len("measured "):].split("|")]
                shape = tuple(int(x) for x in parts[0].split("x"))
                found[shape, parts[1]] = float(parts[2].split()[0])
    return found


def spearman(xs, ys) -> float:
    """Spearman's rank correlation of two sequences (average ranks for ties)."""
    def ranks(values):
        order = sorted(range(len(values)), key=lambda i: values[i])
        r = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for m in range(i, j + 1):
                r[order[m]] = (i + j) / 2
            i = j + 1
        return r
    rx, ry = ranks(list(xs)), ranks(list(ys))
    n = len(rx)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return cov / (vx * vy) ** 0.5 if vx and vy else 1.0


def compare(model: Model, measured: dict, table) -> list:
    """``[(shape, name, predicted µs, measured µs)]`` for every measured configuration the model has."""
    rows = []
    for (shape, name), us in sorted(measured.items()):
        if name in model.configs:
            rows.append((shape, name, model.predict_us(name, shape, table), us))
    return rows


def report(rows) -> None:
    """Print predicted against measured, error in percent, Spearman per shape."""
    print(f"{'shape':16s} {'configuration':24s} {'model us':>9s} {'H100 us':>9s} {'error':>7s} "
          f"{'model TF/s':>10s} {'H100 TF/s':>9s}")
    for shape in sorted({r[0] for r in rows}, key=lambda s: -s[0] * s[1] * s[2]):
        mine = [r for r in rows if r[0] == shape]
        flops = 2 * shape[0] * shape[1] * shape[2]
        for _, name, p, m in sorted(mine, key=lambda r: r[3]):
            print(f"{'x'.join(map(str, shape)):16s} {name:24s} {p:9.1f} {m:9.1f} {(p - m) / m * 100:+6.1f}% "
                  f"{flops / p / 1e6:10.0f} {flops / m / 1e6:9.0f}")
        rho = spearman([r[2] for r in mine], [r[3] for r in mine])
        print(f"{'x'.join(map(str, shape)):16s} Spearman (predicted vs measured order of {len(mine)} configs): "
              f"{rho:.2f}")
    errors = [abs(r[2] - r[3]) / r[3] * 100 for r in rows]
    within = sum(e <= 15 for e in errors)
    print(f"all: mean |error| {sum(errors) / len(errors):.1f}%, max {max(errors):.1f}%, "
          f"{within}/{len(errors)} within ±15%")


#: The cost table's fields the fit moves, and the range each is kept in.  Not fitted:
#: ``mma_instr_cycles`` (0: a cost per MMA instruction stands in for the memory traffic of
#: 128 × 128 tiles and so puts 256 × 128 tiles, which have 128 × 256's traffic, wrongly behind:
#: docs/benchmarks.rst) and ``wgmma_latency`` (no calibrated kernel's wgmma is serialized).
FITTED = {"clock_ghz": (1.0, 1.98), "mma_rate": (0.5, 1.0), "mem_bytes_per_cycle": (16.0, 128.0),
          "load_latency": (200.0, 2000.0), "launch_us": (1.0, 10.0),
          "max_mem_share": (1.0, 3.0), "cta_start_us": (0.0, 5.0)}


def _with(table, name: str, value: float):
    """``table`` with fitted field ``name`` set; ``mma_rate`` is the fraction of the H100's public
    peak tensor-core rates (:data:`~gluonkit.runtime.model.tables.H100_PEAK_MMA`)."""
    if name == "mma_rate":
        from gluonkit.runtime.model.tables import H100_PEAK_MMA
        return table.with_(mma_flops_per_cycle={k: v * value for k, v in H100_PEAK_MMA.items()})
    return table.with_(**{name: value})


def _value(table, name: str) -> float:
    if name == "mma_rate":
        from gluonkit.runtime.model.tables import H100_PEAK_MMA
        return table.mma_flops_per_cycle["float16"] / H100_PEAK_MMA["float16"]
    return getattr(table, name)


def fit(model: Model, measured: dict, table, rounds: int = 6, log=print):
    """The table whose predictions best match ``measured`` (least mean squared log error),
    by coordinate search over :data:`FITTED` with shrinking steps."""
    import math

    def loss(t) -> float:
        rows = compare(model, measured, t)
        return sum(math.log(p / m) ** 2 for _, _, p, m in rows) / len(rows)

    best = loss(table)
    for step in (0.3, 0.15, 0.07, 0.03, 0.01)[:rounds]:
        improved = True
        while improved:
            improved = False
            for name, (low, high) in FITTED.items():
                current = _value(table, name)
                for candidate in (current * (1 + step), current * (1 - step), current + step * (high - low),
                                  current - step * (high - low)):
                    candidate = min(high, max(low, candidate))
                    trial = _with(table, name, candidate)
                    value = loss(trial)
                    if value < best - 1e-9:
                        table, best, improved = trial, value, True
                        break
        log(f"  fit: step {step}: rms log error {best ** 0.5:.3f}; " +
            ", ".join(f"{n}={_value(table, n):.4g}" for n in FITTED))
    return table


def blackwell(shapes, table) -> None:
    """Print the model's time and TFLOP/s of the :data:`BLACKWELL` variants on ``shapes``."""
    model = Model(BLACKWELL, table.arch)
    print(f"model output ({table.name}, {table.source})")
    for shape in shapes:
        flops = 2 * shape[0] * shape[1] * shape[2]
        for name in BLACKWELL:
            us = model.predict_us(name, shape, table)
            print(f"model {'x'.join(map(str, shape)):16s} | {name:22s} | {us:9.1f} us | "
                  f"{flops / us / 1e6:6.0f} TFLOP/s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measure", action="store_true", help="time the configurations on the GPU")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--skip", help="configuration names not to measure (comma-separated)")
    parser.add_argument("--done", help="a file of measured lines: those pairs are not measured again")
    parser.add_argument("--only", default="", help="measure only the configurations whose name contains this")
    parser.add_argument("--shapes", help="MxNxK,… (default: SHAPES)")
    parser.add_argument("--measured", default=os.path.join(HERE, "calibration_h100.txt"),
                        help="a --measure run's output (its measured lines)")
    parser.add_argument("--blackwell", action="store_true",
                        help="predict the Blackwell GEMM variants (sm_100a table; model output only)")
    parser.add_argument("--fit", action="store_true", help="fit the sm_90a table's clock, rates and latencies first")
    parser.add_argument("--hold-out", default="", help="MxNxK,… shapes the fit does not see (still reported)")
    args = parser.parse_args(argv)
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    if args.measure:
        done = set(read_measured(args.done)) if args.done and os.path.exists(args.done) else set()
        measure(shapes, args.samples, args.skip.split(",") if args.skip else (), done, args.only)
        return 0
    os.environ["GLUONKIT_INTERPRET"] = "1"
    from gluonkit.runtime.model import SM90A, SM100A
    if args.blackwell:
        blackwell(shapes, SM100A)
        return 0

    measured = read_measured(args.measured)
    model = Model()
    table = SM90A
    if args.fit:
        held = {tuple(int(x) for x in h.split("x")) for h in args.hold_out.split(",") if h}
        table = fit(model, {key: us for key, us in measured.items() if key[0] not in held}, SM90A)
    report(compare(model, measured, table))


if __name__ == "__main__":
    sys.exit(main())
