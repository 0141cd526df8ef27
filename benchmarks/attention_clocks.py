"""Sustained attention throughput with the SM clock and board power beside it.

Runs gluonkit's attention kernel and torch SDPA's cuDNN kernel back to back for about a second
each (no L2 flush between calls: the steady state of a long run), several rounds alternating,
while ``nvidia-smi`` samples the SM clock and the board power every 20 ms.  Prints, per kernel,
the TFLOP/s of each round and the mean clock and power over its samples: whether one kernel
runs at lower clocks under the power limit than the other (which a single profiled launch, as
Nsight Compute's, does not show).

Run (H100): ``python benchmarks/attention_clocks.py [--shape B,H,S,D] [--causal] [--seconds 1.0]``.
"""

import argparse
import datetime
import os
import statistics
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "attention"))

import flash_attention  # noqa: E402


def _phase(fn, seconds):
    """``(start, end, ms per call)``: ``fn`` called back to back for about ``seconds``."""
    torch.cuda.synchronize()
    start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    start_event.record()
    fn()
    end_event.record()
    torch.cuda.synchronize()
    calls = max(3, int(seconds * 1e3 / start_event.elapsed_time(end_event)))
    begin = datetime.datetime.now()
    start_event.record()
    for _ in range(calls):
        fn()
    end_event.record()
    torch.cuda.synchronize()
    return begin, datetime.datetime.now(), start_event.elapsed_time(end_event) / calls


def _samples(text):
    """``[(time, SM MHz, W)]`` from nvidia-smi's CSV lines."""
    out = []
    for line in text.splitlines():
        try:
            stamp, clock, power = (field.strip() for field in line.split(","))
            out.append((datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f"), float(clock), float(power)))
        except ValueError:
            continue
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", type=lambda s: tuple(map(int, s.split(","))), default=(4, 32, 16384, 128))
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    B, H, S, D = args.shape
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    ours = flash_attention.prepare(q, k, v, o, lse, args.causal)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return scaled_dot_product_attention(q, k, v, is_causal=args.causal)

    flops = 4 * B * H * S * S * D / (2 if args.causal else 1)
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "20"], stdout=subprocess.PIPE, text=True)
    phases = {"gluonkit": [], "cudnn": []}
    try:
        for _ in range(args.rounds):
            for name, fn in (("gluonkit", ours), ("cudnn", cudnn)):
                phases[name].append(_phase(fn, args.seconds))
    finally:
        smi.terminate()
    samples = _samples(smi.communicate()[0])
    print(f"{torch.cuda.get_device_name()}, B={B} H={H} S={S} D={D} causal={args.causal}, bf16, back to back, "
          f"{len(samples)} nvidia-smi samples")
    for name, runs in phases.items():
        inside = [(c, w) for t, c, w in samples if any(a <= t <= b for a, b, _ in runs)]
        clock = statistics.mean(c for c, _ in inside) if inside else float("nan")
        power = statistics.mean(w for _, w in inside) if inside else float("nan")
        rates = " ".join(f"{flops / (ms * 1e-3) / 1e12:6.1f}" for _, _, ms in runs)
        print(f"{name:9s} TFLOP/s per round {rates}   SM clock {clock:6.0f} MHz   power {power:5.0f} W   "
              f"({len(inside)} samples)")


if __name__ == "__main__":
    main()
