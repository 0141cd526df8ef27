"""``interpreter_on(seed=None)``: run the launches inside a ``with`` block in the CPU
interpreter, with ``GLUONKIT_INTERPRET_SEED`` set to ``seed`` when one is given;
``launch_interpreted(kernel, grid, *args)`` does that for one launch.

The variables get their previous values (or their absence) back afterwards, so tests that
mix GPU launches and interpreter launches stay isolated.
"""

import os
from contextlib import contextmanager

_NAMES = ("GLUONKIT_INTERPRET", "GLUONKIT_INTERPRET_SEED")


@contextmanager
def interpreter_on(seed=None):
    saved = {name: os.environ.get(name) for name in _NAMES}
    os.environ["GLUONKIT_INTERPRET"] = "1"
    if seed is not None:
        os.environ["GLUONKIT_INTERPRET_SEED"] = str(seed)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def launch_interpreted(kernel, grid, *args, seed=None, **kwargs):
    """``kernel[grid](*args, **kwargs)`` in the CPU interpreter (see :func:`interpreter_on`)."""
    with interpreter_on(seed):
        kernel[grid](*args, **kwargs)
