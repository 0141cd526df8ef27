"""``python -m gluonkit compile FILE.py:KERNEL``: every --emit kind, and clear errors for a bad
path, an unknown kernel, a bad signature and a missing tool."""

import os
import subprocess
import sys

import pytest

from gluonkit.lower.backend.cuda_tools import find_disassembler
from gluonkit.runtime.aot import main
from kernel_checks import needs_ptxas

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTOR_ADD = os.path.join(ROOT, "examples", "vector_add.py") + ":add_kernel"
SIGNATURE = "*fp32:16, *fp32:16, *fp32:16, i32:16, 1024, vector_add_layout(4)"


def run(capsys, *argv):
    status = main(["compile", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_emit_ptx_to_stdout_with_divisibility_and_constexprs(capsys):
    status, ptx, _ = run(capsys, VECTOR_ADD, "-s", SIGNATURE)
    assert status == 0
    assert ".visible .entry add_kernel(" in ptx and ".target sm_90a" in ptx
    assert "ld.global.v4.b32" in ptx  # :16 on the pointers and n, and the 4-wide layout: 128-bit loads
    status, ptx, _ = run(capsys, VECTOR_ADD, "-s", SIGNATURE.replace(":16", ""))
    assert status == 0 and "ld.global.v4.b32" not in ptx and "ld.global.b32" in ptx


@pytest.mark.parametrize("emit, expected", [("ir", "func @add_kernel("), ("llir", "define")])
def test_emit_ir_and_llir(capsys, emit, expected):
    status, text, _ = run(capsys, VECTOR_ADD, "-s", SIGNATURE, "--emit", emit)
    assert status == 0 and expected in text


def test_named_entries_and_an_expression_constexpr(capsys, tmp_path):
    out = tmp_path / "k.ptx"
    status, _, err = run(capsys, VECTOR_ADD, "--target", "sm_100a", "-o", str(out), "-s",
                         "*fp32, *fp32, *fp32, i32, layout=gl.BlockedLayout([2], [32], [4], [0]), BLOCK=256")
    assert status == 0 and f"wrote {out}" in err
    assert ".target sm_100a" in out.read_text()


@needs_ptxas
def test_emit_cubin_to_a_file(capsys, tmp_path):
    out = tmp_path / "k.cubin"
    status, _, err = run(capsys, VECTOR_ADD, "-s", SIGNATURE, "--emit", "cubin", "-o", str(out))
    assert status == 0 and "registers" in err
    assert out.read_bytes()[:4] == b"\x7fELF"


@needs_ptxas
def test_a_cubin_is_not_written_to_the_terminal(capsys):
    status, out, err = run(capsys, VECTOR_ADD, "-s", SIGNATURE, "--emit", "cubin")
    assert status == 1 and out == "" and "binary: give an output file with -o" in err


@needs_ptxas
def test_emit_sass_through_the_disassembler(capsys, tmp_path, monkeypatch):
    """The cubin goes to the disassembler found (here a stand-in that prints its arguments)."""
    fake = tmp_path / "cuobjdump"
    fake.write_text("#!/bin/sh\necho \"sass of $*\"\nhead -c 4 \"$2\" | od -c | head -1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("GLUONKIT_CUOBJDUMP", str(fake))
    status, out, _ = run(capsys, VECTOR_ADD, "-s", SIGNATURE, "--emit", "sass")
    assert status == 0 and out.startswith("sass of -sass ") and "E   L   F" in out


@needs_ptxas
def test_emit_real_sass(capsys):
    """With the toolchain extra (or a CUDA toolkit), the SASS of the kernel; in CI it must run."""
    if find_disassembler() is None:
        if os.environ.get("GLUONKIT_REQUIRE_PTXAS") == "1":
            pytest.fail("no cuobjdump/nvdisasm found: install the toolchain extra")
        pytest.skip("no cuobjdump/nvdisasm found")
    status, sass, _ = run(capsys, VECTOR_ADD, "-s", SIGNATURE, "--emit", "sass")
    assert status == 0 and "add_kernel" in sass and "STG.E.128" in sass


@pytest.mark.parametrize("argv, message", [
    (["examples/nope.py:k", "-s", "i32"], "'examples/nope.py': no such file"),
    (["examples/vector_add.py", "-s", "i32"], "expected FILE.py:KERNEL"),
    ([VECTOR_ADD.replace("add_kernel", "add_kernl"), "-s", "i32"],
     "has no kernel 'add_kernl'; its @gluonkit.jit functions: add_kernel"),
    ([VECTOR_ADD.replace("add_kernel", "add"), "-s", "i32"], "has function 'add', not a @gluonkit.jit kernel"),
    ([VECTOR_ADD, "-s", "*fp33, *fp32, *fp32, i32, 1024, vector_add_layout(4)"], "parameter 'x_ptr': type string "
     "'*fp33': unknown type 'fp33'"),
    ([VECTOR_ADD, "-s", "*fp32:8, *fp32, *fp32, i32, 1024, vector_add_layout(4)"], "the only divisibility hint is ':16'"),
    ([VECTOR_ADD, "-s", "*fp32, *fp32, *fp32, i32, 1024"], "gives no entry for 'layout' of add_kernel("),
    ([VECTOR_ADD, "-s", "*fp32, *fp32, *fp32, i32, i32, vector_add_layout(4)"], "parameter 'BLOCK' is gl.constexpr: "
     "give it a value"),
    ([VECTOR_ADD, "-s", "*fp32, *fp32, *fp32, i32, 1024, no_such_helper(4)"], "parameter 'layout': 'no_such_helper(4)' "
     "is neither a type string"),
    ([VECTOR_ADD, "-s", SIGNATURE + ", 7"], "more entries than add_kernel's 6 parameters"),
    ([VECTOR_ADD, "-s", "*fp32, *fp32, *fp32, i32, BLOCK=1024, 1"], "comes after a NAME=VALUE entry"),
    ([VECTOR_ADD, "-s", SIGNATURE + ", BLOCK=2"], "parameter 'BLOCK' is given twice"),
    ([VECTOR_ADD, "-s", SIGNATURE + ", BLOKC=2"], "add_kernel has no parameter 'BLOKC'"),
    ([VECTOR_ADD, "-s", SIGNATURE, "--target", "sm_80"], "unknown target 'sm_80'; known: sm_90a, sm_100a"),
    ([VECTOR_ADD, "-s", "*fp32, *fp32, *fp32, i32, 1000, vector_add_layout(4)"], "power of two"),
])
def test_bad_input_is_one_clear_line(capsys, monkeypatch, argv, message):
    monkeypatch.chdir(ROOT)
    status, out, err = run(capsys, *argv)
    assert status == 1 and out == ""
    assert err.startswith("gluonkit compile: error: ") and message in err, err
    assert "Traceback" not in err


def test_missing_ptxas_for_a_cubin_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.setattr("gluonkit.lower.compiler.find_ptxas", lambda: None)
    status, _, err = run(capsys, VECTOR_ADD, "-s", SIGNATURE, "--emit", "cubin", "-o", "unused.cubin")
    assert status == 1 and "--emit cubin needs ptxas: pip install 'gluonkit[toolchain]'" in err


def test_python_dash_m_gluonkit(tmp_path):
    """The module entry point runs the same command line (one subprocess, to check the wiring)."""
    proc = subprocess.run([sys.executable, "-m", "gluonkit", "compile", VECTOR_ADD, "-s", SIGNATURE, "--emit", "ir"],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr
    assert "func @add_kernel(" in proc.stdout
