"""Nsight Compute side by side: gluonkit's Hopper attention kernel and torch SDPA's cuDNN kernel.

Runs itself under ``ncu`` (one launch of each kernel, ``--clock-control none``, raw metrics of
the SpeedOfLight, ComputeWorkloadAnalysis, MemoryWorkloadAnalysis, WarpStateStats, SchedulerStats
and InstructionStats sections) and prints one table: a metric a row, gluonkit's value beside cuDNN's.  The rows are
the ones that say where the time goes: duration and clocks, issue slots, pipe utilisation
(tensor, FMA, ALU, MUFU/XU), instruction counts per pipe, L2 and DRAM traffic, and the warp
stall reasons.

Run (H100): ``python benchmarks/attention_ncu.py [--shape B,H,S,D] [--causal] [--config "{...}"]``.
"""

import argparse
import ast
import os
import re
import subprocess
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "WarpStateStats",
             "SchedulerStats", "InstructionStats"]
_KERNELS = "regex:attention_fwd_kernel|flash_fprop"
_METRIC = re.compile(r"^[a-z0-9]+__[A-Za-z0-9_.]+$")
# Raw metrics worth a row (regular expressions over the metric names ncu prints).
_ROWS = [
    r"^gpu__time_duration\.sum$", r"^sm__cycles_elapsed\.avg\.per_second$", r"^sm__cycles_elapsed\.max$",
    r"^launch__(grid_size|block_size|registers_per_thread|shared_mem_per_block_(dynamic|static))$",
    r"^sm__throughput\.avg\.pct_of_peak_sustained_elapsed$",
    r"^(lts|dram|l1tex)__throughput\.avg\.pct_of_peak_sustained_elapsed$", r"^lts__t_sector_hit_rate\.pct$",
    r"^(dram__bytes_read|lts__t_bytes)\.sum$",
    r"^smsp__issue_active\.avg\.pct_of_peak_sustained_active$", r"^smsp__inst_executed\.sum$",
    r"^sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active$",
    r"^sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active$",
    r"^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$",
    r"^smsp__warps_active\.avg\.per_cycle_active$",
    r"^smsp__average_warp_latency_per_inst_issued\.ratio$",
]


def _run_kernels(args) -> None:
    """One launch of gluonkit's kernel (after a compile-and-warm call) and one of cuDNN's."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    sys.path.insert(0, os.path.join(_HERE, "..", "examples", "attention"))
    import flash_attention

    B, H, S, D = args.shape
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    run = flash_attention.prepare(q, k, v, o, lse, args.causal, **ast.literal_eval(args.config))
    run()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    torch.cuda.synchronize()


def _parse(text: str):
    """``[(kernel name, {metric: (unit, value)})]`` from ncu's raw page: a kernel's header line, then
    one line per metric (name, unit if any, value), however the columns are spaced."""
    kernels = []
    for line in text.splitlines():
        header = re.match(r"^\s*(\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
        if header:
            kernels.append((header.group(1), {}))
            continue
        fields = line.split()
        if kernels and len(fields) >= 2 and _METRIC.match(fields[0]):
            unit, value = (fields[1], " ".join(fields[2:])) if len(fields) >= 3 else ("", fields[1])
            kernels[-1][1][fields[0]] = (unit, value)
    return kernels


def _table(kernels) -> str:
    names = [name for name, _ in kernels]
    lines = ["kernels: " + " | ".join(n[:90] for n in names)]
    metrics = sorted({m for _, ms in kernels for m in ms if any(re.search(p, m) for p in _ROWS)})
    for m in metrics:
        values = [ms.get(m, ("", "-")) for _, ms in kernels]
        unit = next((u for u, _ in values if u), "")
        lines.append(f"{m:78s} {unit:>6s} " + " ".join(f"{v:>14s}" for _, v in values))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=lambda s: tuple(map(int, s.split(","))), default=(4, 32, 16384, 128))
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--config", default="{}", help="prepare() keywords for gluonkit's kernel")
    parser.add_argument("--child", action="store_true", help="(internal) run the kernels, under ncu")
    args = parser.parse_args()
    if args.child:
        _run_kernels(args)
        return
    command = ["ncu", "--clock-control", "none", "--page", "raw", "-k", _KERNELS, "-c", "2"]
    for section in _SECTIONS:
        command += ["--section", section]
    command += [sys.executable, os.path.abspath(__file__), "--child", "--shape", ",".join(map(str, args.shape)),
                "--config", args.config] + (["--causal"] if args.causal else [])
    proc = subprocess.run(command, capture_output=True, text=True)
    kernels = _parse(proc.stdout)
    print(f"ncu rc={proc.returncode}, shape {args.shape}, causal={args.causal}, config {args.config}")
    if len(kernels) != 2 or not all(metrics for _, metrics in kernels):
        print(proc.stdout[:2500], "\n...\n", proc.stdout[-1500:], proc.stderr[-1500:])
        return
    print(_table(kernels))


if __name__ == "__main__":
    main()
