"""Run Gluon's own tutorials against gluonkit on a machine without a GPU (run by hand).

Gluon's tutorials live in the Triton repository (``python/tutorials/gluon/``, the attention
example in ``python/examples/gluon/``) and are not part of this one: point ``--tutorials`` at
a directory holding them.  Each file is copied to a temporary directory with only its
imports rewritten (``triton.experimental.gluon`` → ``gluonkit``; ``from
triton.experimental import gluon`` → ``import gluonkit as gluon``), then run with pytest in
a subprocess of its own, with:

* the CPU interpreter (``GLUONKIT_INTERPRET=1``): CUDA tensors the tutorial asks torch for are
  made on the CPU, and the GPU queries the tutorials gate their tests on answer as a
  Blackwell GPU (capability 10.0, 148 SMs) would (the cuBLAS handle some make at import for
  their benchmarks is a stub).  Benchmarks are not timed: ``triton.testing.do_bench`` and
  ``do_bench_cudagraph`` return NaN without calling the function, and tensors of more than
  2**26 elements (a benchmark's, as tutorial 14 makes at import) are made on torch's ``meta``
  device, which holds no data;
* every kernel launch first compiled for sm_100a (``kernel.compile(..., target="sm_100a")``,
  ptxas included when it is found) with the launch's own arguments, then interpreted;
* with ``--renames-39``, also the renames Gluon 3.9 made (``async_copy_global_to_shared`` →
  ``async_load``, ``async_copy_shared_to_global`` → ``async_store``), for copies that predate it;
* per test function, only its smallest parametrization (the product of its integer
  parameters; ``--all`` for every one), each under ``--timeout`` seconds.

It prints one table: per tutorial, whether it imports, how many kernels compiled for
sm_100a (and the first error), how many tests passed in the interpreter (and the first
failure).  Needs an environment with gluonkit's dependencies, torch (CPU is enough), pytest
and ``triton`` (the tutorials import ``triton`` for ``triton.cdiv`` and the like)::

    PYTHONPATH=$PWD python scripts/check_gluon_tutorials.py --tutorials /path/to/python/tutorials/gluon \
        [--only 06,09] [--timeout 120] [--all] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# ------------------------------------------------------------------------- rewriting
_IMPORT_RULES = [
    (re.compile(r"^([ \t]*)from triton\.experimental import gluon[ \t]*$"), r"\1import gluonkit as gluon"),
    (re.compile(r"^([ \t]*)import triton\.experimental\.gluon as "), r"\1import gluonkit as "),
    (re.compile(r"^([ \t]*)import triton\.experimental\.gluon\.(\S+) as "), r"\1import gluonkit.\2 as "),
    (re.compile(r"^([ \t]*)from triton\.experimental\.gluon(\.\S+)? import "), r"\1from gluonkit\2 import "),
]


# What Gluon 3.9 renamed (its errors name the replacement), for tutorial copies older than 3.9.
RENAMES_39 = [("async_copy_global_to_shared(", "async_load("), ("async_copy_shared_to_global(", "async_store(")]


def rewrite_imports(source: str) -> str:
    """``source`` with its import lines moved from ``triton.experimental.gluon`` to ``gluonkit``."""
    lines = []
    for line in source.split("\n"):
        for pattern, replacement in _IMPORT_RULES:
            if pattern.match(line):
                line = pattern.sub(replacement, line, count=1)
                break
        lines.append(line)
    return "\n".join(lines)


def copy_rewritten(src_dirs, dest: Path, renames=()) -> None:
    for src_dir in src_dirs:
        for path in sorted(Path(src_dir).glob("*.py")):
            text = rewrite_imports(path.read_text())
            for old, new in renames:
                text = text.replace(old, new)
            (dest / path.name).write_text(text)
    (dest / "pytest.ini").write_text("[pytest]\npython_files = *.py\n")


# ------------------------------------------------------------- inside the subprocess
class _Plugin:
    """The pytest plugin of one tutorial run: selection, timeouts, outcomes."""

    def __init__(self, timeout: int, run_all: bool, report: dict):
        self.timeout, self.run_all, self.report = timeout, run_all, report

    def pytest_collection_modifyitems(self, session, config, items):
        if self.run_all:
            return
        smallest = {}
        for item in items:
            spec = getattr(item, "callspec", None)
            size = 1
            for value in (spec.params.values() if spec else ()):
                if isinstance(value, int) and not isinstance(value, bool):
                    size *= max(abs(value), 1)
                elif isinstance(value, tuple):
                    size *= max(1, abs(int(sum(v for v in value if isinstance(v, int)))))
            key = item.nodeid.split("[")[0]
            if key not in smallest or size < smallest[key][0]:
                smallest[key] = (size, item)
        keep = {id(item) for _, item in smallest.values()}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in keep])
        items[:] = [i for i in items if id(i) in keep]

    def pytest_runtest_call(self, item):
        def expire(signum, frame):
            raise TimeoutError(f"over {self.timeout} s in the interpreter")
        signal.signal(signal.SIGALRM, expire)
        signal.alarm(self.timeout)

    def pytest_runtest_teardown(self, item):
        signal.alarm(0)

    def pytest_collectreport(self, report):
        if report.failed:
            self.report["import"] = _first_line(str(report.longrepr))

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = "skipped" if report.skipped else ("passed" if report.passed else "failed")
            text = _failure_text(report) if report.failed else ""
            if "TimeoutError: over" in text:
                outcome = "timeout"
            self.report["tests"].append({"test": report.nodeid.split("::")[-1], "outcome": outcome,
                                         "why": text})


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    return (errors[-1][2:].strip() if errors else (lines[-1] if lines else ""))[:300]


def _failure_text(report) -> str:
    """The error's class and where, then its last line (what went wrong)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is None:
        return _first_line(str(report.longrepr))
    lines = [line.strip() for line in crash.message.splitlines() if line.strip()]
    where = re.search(r"\S+\.py:(\d+)", lines[0]) if lines else None
    text = lines[0].split(":")[0] + (f" (line {where.group(1)})" if where else "") + ": " + lines[-1]
    return text[:300]


# Tensors the tutorials ask for on the GPU above this many elements are benchmarks' (not timed here).
_BENCHMARK_NUMEL = 1 << 26


def _pretend_blackwell() -> None:
    """CUDA tensors on the CPU, and the GPU queries answered as a Blackwell GPU would."""
    import types

    import torch
    from torch.overrides import TorchFunctionMode

    def cpu(device):
        return "cpu" if device is not None and str(device).startswith("cuda") else device

    def numel(args) -> int:
        dims = args[0] if args and isinstance(args[0], (tuple, list, torch.Size)) else args
        return math.prod(dims) if all(isinstance(d, int) for d in dims) else 0

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                big = str(kwargs["device"]).startswith("cuda") and numel(args) > _BENCHMARK_NUMEL
                kwargs["device"] = "meta" if big else cpu(kwargs["device"])
            if func is torch.Tensor.cuda:
                return args[0]
            if func is torch.Tensor.to:
                args = tuple(cpu(a) if isinstance(a, (str, torch.device)) else a for a in args)
            return func(*args, **kwargs)

    CudaOnCpu().__enter__()
    torch.cuda.is_available = lambda: True
    torch.cuda.get_device_capability = lambda *a, **k: (10, 0)
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(multi_processor_count=148,
                                                                             name="interpreter (sm_100a)")
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: 0

    import triton
    from triton.backends.compiler import GPUTarget

    class Driver:
        def get_current_target(self):
            return GPUTarget("cuda", 100, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

    triton.runtime.driver.set_active(Driver())
    from triton._C.libtriton import nvidia

    class NoCublas:  # the tutorials make one at import for their benchmarks; it needs a GPU
        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            raise RuntimeError("cuBLAS is not available in the interpreter")

    nvidia.cublas.CublasLt = NoCublas
    import triton.testing
    triton.testing.do_bench = triton.testing.do_bench_cudagraph = lambda *args, **kwargs: float("nan")


def _compile_each_launch(report: dict) -> None:
    """Compile every launched kernel for sm_100a before the interpreter runs it (first 3 per kernel)."""
    import importlib

    jit = importlib.import_module("gluonkit.lang.jit")  # the module (gluonkit.lang.jit the name is the decorator)
    launching = importlib.import_module("gluonkit.runtime.launch")

    def launch(kernel, grid, args, kwargs):
        seen = report["kernels"].setdefault(kernel.__name__, {"compiled": 0, "errors": []})
        if seen["compiled"] + len(seen["errors"]) < 3:
            try:  # compile() takes the runtime arguments in order and the compile-time ones by name
                named = dict(zip(kernel.arg_names, args))
                runtime = [v for n, v in named.items() if not launching._is_compile_time(kernel, n, v)]
                fixed = {n: v for n, v in named.items() if launching._is_compile_time(kernel, n, v)}
                compiled = kernel.compile(*runtime, target="sm_100a", **fixed, **kwargs)
                seen["compiled"] += 1
                seen["ptxas"] = "cubin" in compiled.asm
            except Exception as e:  # noqa: BLE001 - reported, then the launch still runs
                lines = [line.strip() for line in str(e).splitlines() if line.strip()]
                seen["errors"].append(f"{type(e).__name__}: {lines[-1] if lines else ''}"[:300])
        return launching.launch(kernel, grid, args, kwargs)

    jit.set_launcher(launch)


def run_one(path: Path, timeout: int, run_all: bool, out: Path) -> None:
    os.environ["GLUONKIT_INTERPRET"] = "1"
    report = {"tutorial": path.stem, "import": "ok", "kernels": {}, "tests": []}
    import pytest
    try:
        _pretend_blackwell()
        _compile_each_launch(report)
    except Exception as e:  # noqa: BLE001
        report["import"] = f"harness setup failed: {type(e).__name__}: {e}"
    else:
        sys.path.insert(0, str(path.parent))
        pytest.main([str(path), "-q", "-p", "no:cacheprovider", "-W", "ignore", "--rootdir", str(path.parent)],
                    plugins=[_Plugin(timeout, run_all, report)])
    out.write_text(json.dumps(report))


# ------------------------------------------------------------------------ the table
def _row(r: dict) -> str:
    kernels = r["kernels"]
    ok = sum(1 for k in kernels.values() if k["compiled"] and not k["errors"])
    errors = [f"{name}: {k['errors'][0]}" for name, k in kernels.items() if k["errors"]]
    tests = r["tests"]
    counts = {o: sum(t["outcome"] == o for t in tests) for o in ("passed", "failed", "timeout", "skipped")}
    first = next((f"{t['test']}: {t['why']}" for t in tests if t["outcome"] in ("failed", "timeout")), "")
    compiled = f"{ok}/{len(kernels)}" if kernels else "-"
    test_text = ", ".join(f"{n} {o}" for o, n in counts.items() if n) or "-"
    note = errors[0] if errors else first
    return f"| {r['tutorial']} | {'yes' if r['import'] == 'ok' else 'no: ' + r['import'][:120]} | {compiled} | " \
           f"{test_text} | {note[:200]} |"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tutorials", nargs="+", help="directories holding Gluon's tutorial / example files")
    parser.add_argument("--only", default="", help="comma-separated file-name prefixes, e.g. 06,09,01-attention")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test in the interpreter")
    parser.add_argument("--all", action="store_true", help="every parametrization, not only the smallest")
    parser.add_argument("--json", help="write the per-tutorial results here")
    parser.add_argument("--renames-39", action="store_true",
                        help="also apply Gluon 3.9's renames (async_copy_* → async_load/async_store) to older copies")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_one:
        run_one(Path(args.run_one), args.timeout, args.all, Path(args.out))
        return 0
    if not args.tutorials:
        parser.error("--tutorials is required")
    prefixes = [p for p in args.only.split(",") if p]
    results = []
    with tempfile.TemporaryDirectory(prefix="gluon_tutorials_") as tmp:
        tmp = Path(tmp)
        copy_rewritten(args.tutorials, tmp, RENAMES_39 if args.renames_39 else ())
        files = [p for p in sorted(tmp.glob("*.py")) if p.name != "conftest.py"
                 and (not prefixes or any(p.name.startswith(x) for x in prefixes))]
        for path in files:
            out = tmp / f"{path.stem}.result.json"
            cmd = [sys.executable, __file__, "--run-one", str(path), "--out", str(out), "--timeout", str(args.timeout)]
            cmd += ["--all"] if args.all else []
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
            if out.exists():
                results.append(json.loads(out.read_text()))
            else:
                results.append({"tutorial": path.stem, "import": f"crashed: {_first_line(proc.stderr)}",
                                "kernels": {}, "tests": []})
            print(_row(results[-1]), flush=True)
    print("\n| tutorial | imports | kernels compiled sm_100a | interpreter tests | first error |")
    print("|---|---|---|---|---|")
    for r in results:
        print(_row(r))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
