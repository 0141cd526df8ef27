"""``interpreter_on()``: run the launches inside a ``with`` block in the CPU interpreter.

Sets ``GLUONKIT_INTERPRET=1`` for the block and restores the previous value (or its
absence) afterwards, so tests that mix GPU launches and interpreter launches stay isolated.
"""

import os
from contextlib import contextmanager


@contextmanager
def interpreter_on():
    saved = os.environ.get("GLUONKIT_INTERPRET")
    os.environ["GLUONKIT_INTERPRET"] = "1"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["GLUONKIT_INTERPRET"]
        else:
            os.environ["GLUONKIT_INTERPRET"] = saved
