"""Helpers the kernel tests share: the ptxas marker and check, and the source line of a statement
that a test expects an error or a report to name."""

import inspect
import os
import re

import pytest

from gluonkit.lower.backend.ptxas import find_ptxas

# Tests that assemble PTX; without ptxas they skip, or fail when GLUONKIT_REQUIRE_PTXAS=1
# (as in CI), through ``require_ptxas`` in conftest.py's setup hook.
needs_ptxas = pytest.mark.needs_ptxas

_MISSING = ("no ptxas found: install the toolchain extra (pip install -e '.[test]'), put ptxas on PATH "
            "or set GLUONKIT_PTXAS")


def have_ptxas() -> bool:
    """True when ptxas is found.  When it is not: False, or the test fails if
    ``GLUONKIT_REQUIRE_PTXAS=1`` (so that a CI run cannot go green without checking the PTX)."""
    if find_ptxas() is not None:
        return True
    if os.environ.get("GLUONKIT_REQUIRE_PTXAS") == "1":
        pytest.fail(f"{_MISSING} (GLUONKIT_REQUIRE_PTXAS=1 makes this a failure)", pytrace=False)
    return False


def require_ptxas() -> None:
    """Skip the running test when ptxas is not found, or fail it under ``GLUONKIT_REQUIRE_PTXAS=1``."""
    if not have_ptxas():
        pytest.skip(_MISSING)


def _source(fn):
    """The source lines of ``fn`` (a ``@gluonkit.jit`` function or a plain one) and its first line."""
    return inspect.getsourcelines(getattr(fn, "fn", fn))


def marked_line(fn, marker: str) -> int:
    """The file line of ``fn``'s first statement whose comment holds the word ``marker``
    (``x = gl.load(p)  # LOAD`` is marked ``LOAD``)."""
    lines, first = _source(fn)
    pattern = re.compile(rf"#.*(?<!\w){re.escape(marker)}(?!\w)")
    return first + next(i for i, text in enumerate(lines) if pattern.search(text))


def line_containing(fn, text: str) -> int:
    """The file line of the first source line of ``fn`` that contains ``text``."""
    lines, first = _source(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)
