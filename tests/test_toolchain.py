"""Finding the CUDA tools (env variable, NVIDIA wheels, PATH) and the CI rule that a test
needing ptxas fails, not skips, when ptxas is missing under ``GLUONKIT_REQUIRE_PTXAS=1``."""

import os
import sys

import pytest

import kernel_checks
from gluonkit.lower.backend import cuda_tools


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho fake\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def fake_wheels(tmp_path, monkeypatch):
    """A site directory whose ``nvidia`` namespace holds a CUDA 12 and a CUDA 13 ptxas, and a
    PATH directory with a third one; the environment's own wheels and PATH are hidden."""
    site = tmp_path / "site"
    cu12 = _executable(site / "nvidia" / "cuda_nvcc" / "bin" / "ptxas")
    cu13 = _executable(site / "nvidia" / "cu13" / "bin" / "ptxas")
    on_path = _executable(tmp_path / "path" / "ptxas")
    others = [p for p in sys.path if not os.path.isdir(os.path.join(p, "nvidia"))]  # real wheels hidden
    monkeypatch.setattr(sys, "path", [str(site), *others])
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.delenv("GLUONKIT_PTXAS", raising=False)
    real = sys.modules.pop("nvidia", None)  # the fake namespace must not outlive the test
    yield {"cu12": cu12, "cu13": cu13, "path": on_path, "site": site}
    sys.modules.pop("nvidia", None)
    if real is not None:
        sys.modules["nvidia"] = real


def test_the_newest_cuda_wheel_comes_before_path(fake_wheels):
    assert cuda_tools.find_tool("ptxas") == fake_wheels["cu13"]


def test_a_cuda12_wheel_is_found_too(fake_wheels):
    os.remove(fake_wheels["cu13"])
    assert cuda_tools.find_tool("ptxas") == fake_wheels["cu12"]


def test_path_serves_without_a_wheel(fake_wheels):
    os.remove(fake_wheels["cu13"])
    os.remove(fake_wheels["cu12"])
    assert cuda_tools.find_tool("ptxas") == fake_wheels["path"]


def test_the_environment_variable_wins_and_must_be_executable(fake_wheels, monkeypatch, tmp_path):
    mine = _executable(tmp_path / "mine" / "ptxas")
    monkeypatch.setenv("GLUONKIT_PTXAS", mine)
    assert cuda_tools.find_tool("ptxas") == mine
    monkeypatch.setenv("GLUONKIT_PTXAS", str(tmp_path / "typo"))
    with pytest.raises(FileNotFoundError, match="GLUONKIT_PTXAS=.*typo.*not an executable"):
        cuda_tools.find_tool("ptxas")


def test_missing_disassembler_is_a_clear_error(fake_wheels, monkeypatch):
    monkeypatch.delenv("GLUONKIT_CUOBJDUMP", raising=False)
    monkeypatch.delenv("GLUONKIT_NVDISASM", raising=False)
    assert cuda_tools.find_disassembler() is None
    with pytest.raises(FileNotFoundError, match=r"no SASS disassembler found: pip install 'gluonkit\[toolchain\]'"):
        cuda_tools.disassemble(b"\x7fELF")


def test_missing_ptxas_skips_or_fails_under_the_ci_flag(monkeypatch):
    monkeypatch.setattr(kernel_checks, "find_ptxas", lambda: None)
    monkeypatch.delenv("GLUONKIT_REQUIRE_PTXAS", raising=False)
    assert kernel_checks.have_ptxas() is False
    with pytest.raises(pytest.skip.Exception, match="no ptxas found"):
        kernel_checks.require_ptxas()
    monkeypatch.setenv("GLUONKIT_REQUIRE_PTXAS", "1")
    with pytest.raises(pytest.fail.Exception, match="GLUONKIT_REQUIRE_PTXAS=1 makes this a failure"):
        kernel_checks.have_ptxas()
    with pytest.raises(pytest.fail.Exception):
        kernel_checks.require_ptxas()


class _Item:
    """The part of a pytest item that conftest.py's setup hook reads."""

    def __init__(self, *markers):
        self.markers = markers

    def get_closest_marker(self, name):
        return next((m for m in self.markers if m.name == name), None)


def test_the_setup_hook_applies_the_rule_to_marked_tests_only(monkeypatch):
    import conftest

    monkeypatch.setattr(kernel_checks, "find_ptxas", lambda: None)
    monkeypatch.setenv("GLUONKIT_REQUIRE_PTXAS", "1")
    conftest.pytest_runtest_setup(_Item(pytest.mark.gpu.mark))  # not marked: runs
    with pytest.raises(pytest.fail.Exception, match="no ptxas found"):
        conftest.pytest_runtest_setup(_Item(kernel_checks.needs_ptxas.mark))


def test_no_test_checks_for_ptxas_on_its_own():
    """Every ptxas check in the tests goes through kernel_checks (needs_ptxas, require_ptxas,
    have_ptxas), so that GLUONKIT_REQUIRE_PTXAS=1 reaches it: a private ``find_ptxas()`` skip
    would let CI go green without assembling."""
    here = os.path.dirname(os.path.abspath(__file__))
    offenders = [name for name in sorted(os.listdir(here)) if name.endswith(".py")
                 and name not in ("kernel_checks.py", os.path.basename(__file__))
                 and "find_ptxas()" in open(os.path.join(here, name)).read()]
    assert offenders == [], f"use kernel_checks.needs_ptxas / require_ptxas / have_ptxas in {offenders}"
