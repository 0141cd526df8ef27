"""Helpers the kernel tests share: the ptxas skip marker, and the source line of a statement
that a test expects an error or a report to name."""

import inspect
import re

import pytest

from gluonkit.lower.backend.ptxas import find_ptxas

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")


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
