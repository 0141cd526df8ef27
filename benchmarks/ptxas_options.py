"""Wall time of ptxas on the WS GEMM's PTX per option set, and whether the SASS stays the same.

The cooperative WS GEMM is compiled to PTX once (no GPU needed); each option set then runs
``--rounds`` times, interleaved, and the median wall time is printed with the register count
and a hash of the disassembled SASS (``nvdisasm``, comments dropped), so an option that saves
time without changing the code shows the same hash as gluonkit's options.

Run: ``PYTHONPATH=$PWD python benchmarks/ptxas_options.py``.
"""

import argparse
import hashlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples", "warp_specialized"))

import ws_gemm  # noqa: E402
from gluonkit.lower.backend.cuda_tools import find_tool  # noqa: E402
from gluonkit.lower.backend.ptxas import find_ptxas  # noqa: E402

VARIANTS = {
    "gluonkit's: -O3 -lineinfo -v": ["-O3", "-lineinfo", "-v"],
    "+ --split-compile 0": ["-O3", "-lineinfo", "-v", "--split-compile", "0"],
    "without -lineinfo": ["-O3", "-v"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ptxas, nvdisasm = find_ptxas(), find_tool("nvdisasm")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GLUONKIT_CACHE_DIR"] = tmp
        source = os.path.join(tmp, "k.ptx")
        with open(source, "w") as f:
            f.write(ws_gemm.compile_ahead("sm_90a").asm["ptx"])
        times = {name: [] for name in VARIANTS}
        facts = {}
        for _ in range(args.rounds):
            for name, options in VARIANTS.items():
                cubin = os.path.join(tmp, "k.cubin")
                start = time.perf_counter()
                proc = subprocess.run([ptxas, "-arch=sm_90a", *options, source, "-o", cubin], capture_output=True,
                                      text=True, check=True)
                times[name].append(time.perf_counter() - start)
                if name not in facts:
                    regs = re.search(r"Used (\d+) registers", proc.stderr + proc.stdout)
                    sass = "no nvdisasm"
                    if nvdisasm:
                        text = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True).stdout
                        code = "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))
                        sass = hashlib.sha1(code.encode()).hexdigest()[:10]
                    facts[name] = (regs.group(1) if regs else "?", sass)
    print(f"ptxas on the WS GEMM (sm_90a), median of {args.rounds}")
    for name, values in times.items():
        regs, sass = facts[name]
        print(f"{name:34s} {1e3 * statistics.median(values):6.0f} ms  regs {regs}  SASS {sass}")


if __name__ == "__main__":
    main()
