"""Measured timelines of every pipeline example: a table on the GPU, pictures for docs/timelines.rst.

On a GPU machine each example of :mod:`measured_examples` runs once with a measured timeline at
level ``all``; the script prints one line per example (its kernel, CTAs, events per warp, span,
SM clock, whether the events are well-formed) and keeps CTA 0's first ``--window`` µs as JSON
(:meth:`~gluonkit.runtime.timeline.MeasuredTimeline.to_json`): files in ``--out``, and with
``--print`` also as ``TIMELINE <name> <base64 of the gzipped JSON>`` lines, which a machine
without a GPU turns into the pictures::

    PYTHONPATH=$PWD python benchmarks/timeline_pictures.py --out /tmp/tl --print      # on the GPU
    PYTHONPATH=$PWD python benchmarks/timeline_pictures.py --draw RESULT.txt --out docs/_static/timelines

``--draw`` reads ``TIMELINE`` lines from a text file (or ``*.json`` files from a folder) and writes
``<name>.svg`` (no dependency) and, where matplotlib is installed, ``<name>.png``.
"""

import argparse
import base64
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gluonkit.runtime.timeline import MeasuredTimeline  # noqa: E402


def _short(data: dict) -> dict:
    """The JSON with file names instead of paths (the pictures are kept in the repository)."""
    for entry in data["table"]:
        path, _, line = entry["location"].rpartition(":")
        entry["location"] = f"{os.path.basename(path)}:{line}"
    return data


def measure_all(out: str, window_us: float, show: bool, only: str) -> None:
    import torch
    from measured_examples import EXAMPLES

    print(f"device: {torch.cuda.get_device_name()}")
    print(f"{'example':18} {'kernel':28} {'CTAs':>5} {'warps':>5} {'ev/warp':>7} {'span us':>8} {'GHz':>5}  events")
    for name, run in EXAMPLES.items():
        if only and name not in only.split(","):
            continue
        try:
            tl = run("all")
        except Exception as e:  # report and go on with the other examples
            print(f"{name:18} FAILED: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            continue
        found = tl.problems()
        span = max(w.times[-1] for w in tl.warps) - min(w.times[0] for w in tl.warps)
        print(f"{name:18} {tl.kernel[:28]:28} {len({w.cta for w in tl.warps}):5d} {tl.warps_per_cta:5d} "
              f"{max(len(w.times) for w in tl.warps):7d} {span / 1e3:8.1f} {tl.clock_ghz:5.2f}  "
              f"{'well-formed' if not found else 'BAD: ' + '; '.join(found[:3])}", flush=True)
        start = min(w.times[0] for w in tl.warps if w.cta == 0)
        data = _short(tl.to_json(ctas=[0], start_ns=start, end_ns=start + window_us * 1e3))
        text = json.dumps(data, separators=(",", ":"))
        if out:
            with open(os.path.join(out, name + ".json"), "w") as f:
                f.write(text)
        if show:
            print(f"TIMELINE {name} {base64.b64encode(gzip.compress(text.encode(), 9)).decode()}", flush=True)


def _read(source: str) -> dict:
    """name -> timeline JSON, from TIMELINE lines of a text file or the ``*.json`` files of a folder."""
    if os.path.isdir(source):
        return {f[:-5]: json.load(open(os.path.join(source, f))) for f in sorted(os.listdir(source))
                if f.endswith(".json")}
    found = {}
    for line in open(source):
        if line.startswith("TIMELINE "):
            _, name, blob = line.split()
            found[name] = json.loads(gzip.decompress(base64.b64decode(blob)))
    return found


def draw(source: str, out: str) -> None:
    for name, data in _read(source).items():
        tl = MeasuredTimeline.from_json(data)
        start = min(w.times[0] for w in tl.warps)
        for w in tl.warps:  # the picture's axis starts at CTA 0's first event
            w.times = w.times - start
        with open(os.path.join(out, name + ".svg"), "w") as f:
            f.write(tl.svg(ctas=[0], width=1100))
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print(f"{name}: {name}.svg (no matplotlib: no PNG)")
            continue
        ax = tl.plot(ctas=[0])
        ax.figure.savefig(os.path.join(out, name + ".png"), dpi=80, bbox_inches="tight")
        plt.close(ax.figure)
        print(f"{name}: {name}.svg, {name}.png")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for the JSON (GPU) or the pictures (--draw)")
    parser.add_argument("--print", action="store_true", help="also print each timeline as a TIMELINE line")
    parser.add_argument("--window", type=float, default=12.0, help="µs of CTA 0 kept, from its first event")
    parser.add_argument("--only", default="", help="comma-separated example names (all by default)")
    parser.add_argument("--draw", default=None, help="draw the pictures of a GPU run's output (file or folder)")
    args = parser.parse_args()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    if args.draw:
        draw(args.draw, args.out or ".")
    else:
        measure_all(args.out, args.window, args.print, args.only)


if __name__ == "__main__":
    main()
