"""scripts/sanitize_examples.py's verdicts and table, with a stand-in for compute-sanitizer
(the real runs are on the GPU machine; see docs/install.rst, "Sanitizers")."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("sanitize_examples", os.path.join(ROOT, "scripts", "sanitize_examples.py"))
sanitize = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sanitize)

HEADLINE = ('echo \'========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API '
            'call to cuGetProcAddress_v2.\'; echo "=========     Saved host backtrace up to driver entry point at error"; ')
PROBE = HEADLINE + 'echo "=========         Host Frame:  [0xd4a2] in cydriver.cpython-312-x86_64-linux-gnu.so"'
OTHER_LOOKUP = HEADLINE + 'echo "=========         Host Frame:  [0x1234] in libsomething.so"'
FAKE = """#!/bin/sh
[ "$1" = "--version" ] && { echo "Version 2099.1.0"; exit 0; }
tool=$2
case "$tool" in
  memcheck) PROBE; echo "========= Invalid __global__ read of size 4 bytes"; echo "=========     at add_kernel+0x70";
            PROBE; OTHER_LOOKUP; echo "========= ERROR SUMMARY: 4 errors"; exit 86 ;;
  initcheck) PROBE; PROBE; PROBE; echo "========= ERROR SUMMARY: 3 errors"; exit 86 ;;
  leakcheck) echo "Traceback (most recent call last):"; echo "AssertionError: 0.5" >&2;
             echo "========= ERROR SUMMARY: 0 errors"; exit 1 ;;
  racecheck) echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"; exit 0 ;;
  synccheck) echo "Traceback: boom" >&2; exit 3 ;;
  *) echo "========= ERROR SUMMARY: 0 errors"; exit 0 ;;
esac
""".replace("OTHER_LOOKUP", OTHER_LOOKUP).replace("PROBE", PROBE)


def _fake(tmp_path):
    path = tmp_path / "compute-sanitizer"
    path.write_text(FAKE)
    path.chmod(0o755)
    return str(path)


def test_verdicts(tmp_path):
    fake = _fake(tmp_path)
    verdict, _, detail = sanitize.run_one(fake, "memcheck", "vector_add", timeout=30)
    assert verdict == "2 error(s) (+2 cuda-python lookups)"
    assert "Invalid __global__ read" in detail and "add_kernel+0x70" in detail
    assert "libsomething.so" in detail and "cydriver" not in detail  # cuda-python's own lookups are not findings
    assert sanitize.run_one(fake, "racecheck", "vector_add", timeout=30)[0] == "clean"
    assert sanitize.run_one(fake, "initcheck", "vector_add", timeout=30)[0] == "clean (+3 cuda-python lookups)"
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


def test_a_lookup_is_cuda_pythons_by_its_first_host_frame():
    headline = ('========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call '
                'to cuGetProcAddress_v2.\n=========     Saved host backtrace up to driver entry point at error\n')
    frame = "=========         Host Frame:  [0x{:x}] in {}\n"
    assert sanitize.is_cuda_python_lookup(headline + frame.format(0xd4a2, "cydriver.cpython-312-x86_64-linux-gnu.so")
                                          + frame.format(0x4e93fd, "driver.cpython-312-x86_64-linux-gnu.so"))
    assert sanitize.is_cuda_python_lookup(headline)  # no backtrace printed
    assert not sanitize.is_cuda_python_lookup(headline + frame.format(0x10, "libtorch_cuda.so")
                                              + frame.format(0xd4a2, "cydriver.cpython-312-x86_64-linux-gnu.so"))
    assert not sanitize.is_cuda_python_lookup(headline.replace("cuGetProcAddress_v2", "cuLaunchKernelEx")
                                              + frame.format(0xd4a2, "cydriver.cpython-312-x86_64-linux-gnu.so"))
