"""Helpers of the bad-input catalogue (``test_bad_input_catalogue.py``, ``test_bad_input_blackwell.py``).

A case is a kernel with one mistake on the line marked ``# CASE:<name>`` (selected by its
``CASE`` constexpr) and a *runner* that does what a user would do with it: build the IR,
compile it for a target, or launch it in the CPU interpreter.  :func:`check_names_line_and_fix`
runs it and checks that the error is a gluonkit :class:`~gluonkit.CompilationError` (never an
internal exception from inside gluonkit), that its message holds the expected words, and that
it names the file and line of the marked statement.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from gluonkit import CompilationError
from interpreting import interpreter_on
from kernel_checks import marked_line

#: What a bug inside gluonkit raises; a gluonkit error must never be caused by one of them.
INTERNAL = (AssertionError, KeyError, IndexError, AttributeError, TypeError)


def as_case(fn, case):
    """``fn`` (a runner) tagged with its case's ``CASE`` value, whose line is marked ``# CASE:<case>``."""
    fn.case = case
    return fn


def build(kernel, types, num_warps=4, **constexprs):
    """Build the kernel's IR (the frontend and the verifier) for argument ``types``."""
    return as_case(lambda: kernel.build_ir(types, constexprs, num_warps, {}), constexprs.get("CASE"))


def compiled(kernel, *args, target="sm_90a", **kwargs):
    """``kernel.compile(*args, target=target, **kwargs)``: frontend, inference, lowering and PTX."""
    return as_case(lambda: kernel.compile(*args, target=target, **kwargs), kwargs.get("CASE"))


def interpreted(kernel, *args, grid=(1,), **kwargs):
    """``kernel[grid](*args, **kwargs)`` in the CPU interpreter (with its protocol checker)."""
    def run():
        with interpreter_on():
            kernel[grid](*args, **kwargs)
    return as_case(run, kwargs.get("CASE"))


def scratch(n=256):
    """A float32 array for the kernels' ``p`` argument (random, so no run depends on zeros)."""
    return np.random.default_rng(0).standard_normal(n).astype(np.float32)


def check_names_line_and_fix(kernel, run, fragment, where=None) -> CompilationError:
    """Run ``run``; its error must be a gluonkit error holding ``fragment`` at the line of ``where``
    (default: ``kernel``) marked ``# CASE:<case>``.  Returns the error."""
    with pytest.raises(CompilationError) as info:
        run()
    error = info.value
    text, fn = str(error), where or kernel
    assert fragment in text, text
    assert not isinstance(error.__cause__, INTERNAL), repr(error.__cause__)
    line = marked_line(fn, f"CASE:{run.case}")
    assert f"{inspect.getsourcefile(fn.fn)}:{line}:" in text, text
    assert error.loc.line == line, (error.loc, line)
    return error
