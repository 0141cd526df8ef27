"""scripts/sanitize_examples.py's verdicts and table, with a stand-in for compute-sanitizer
(the real runs are on the GPU machine; see docs/install.rst, "Sanitizers")."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("sanitize_examples", os.path.join(ROOT, "scripts", "sanitize_examples.py"))
sanitize = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sanitize)

PROBE = ('echo \'========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API '
         'call to cuGetProcAddress_v2.\'; echo "=========     Saved host backtrace up to driver entry point at error"')
FAKE = """#!/bin/sh
[ "$1" = "--version" ] && { echo "Version 2099.1.0"; exit 0; }
tool=$2
case "$tool" in
  memcheck) PROBE; echo "========= Invalid __global__ read of size 4 bytes"; echo "=========     at add_kernel+0x70";
            PROBE; echo "========= ERROR SUMMARY: 4 errors"; exit 86 ;;
  initcheck) PROBE; PROBE; PROBE; echo "========= ERROR SUMMARY: 3 errors"; exit 86 ;;
  leakcheck) echo "Traceback (most recent call last):"; echo "AssertionError: 0.5" >&2;
             echo "========= ERROR SUMMARY: 0 errors"; exit 1 ;;
  racecheck) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"; exit 0 ;;
  synccheck) echo "Traceback: boom" >&2; exit 3 ;;
  *) echo "========= ERROR SUMMARY: 0 errors"; exit 0 ;;
esac
""".replace("PROBE", PROBE)


def _fake(tmp_path):
    path = tmp_path / "compute-sanitizer"
    path.write_text(FAKE)
    path.chmod(0o755)
    return str(path)


def test_verdicts(tmp_path):
    fake = _fake(tmp_path)
    verdict, _, detail = sanitize.run_one(fake, "memcheck", "vector_add", timeout=30)
    assert verdict == "2 error(s)" and "Invalid __global__ read" in detail and "add_kernel+0x70" in detail
    assert "cuGetProcAddress" not in detail  # cuda-python's import-time probes are not findings
    assert sanitize.run_one(fake, "racecheck", "vector_add", timeout=30)[0] == "clean"
    assert sanitize.run_one(fake, "initcheck", "vector_add", timeout=30)[0] == "clean (3 probes)"
    assert sanitize.run_one(fake, "leakcheck", "vector_add", timeout=30)[0] == "failed (exit 1)"
    verdict, _, detail = sanitize.run_one(fake, "synccheck", "vector_add", timeout=30)
    assert verdict == "failed (exit 3)" and "Traceback: boom" in detail


def test_table_and_exit_status(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sanitize, "find_sanitizer", lambda: _fake(tmp_path))
    monkeypatch.setattr(sys, "argv", ["sanitize_examples.py", "--tools", "memcheck,initcheck",
                                      "--examples", "vector_add,transpose"])
    assert sanitize.main() == 1
    out = capsys.readouterr().out
    assert "Version 2099.1.0" in out
    assert "--- memcheck transpose: 2 error(s)" in out and "--- initcheck" not in out
    assert "sanitize_examples: 2/4 clean" in out
