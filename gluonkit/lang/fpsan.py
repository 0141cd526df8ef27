"""Gluon's ``fpsan`` namespace (the floating-point sanitizer's ``embed``/``unembed``).

Not built: the names are stubs (:mod:`gluonkit.lang.unsupported`).
"""

from .unsupported import FPSAN, install

__all__ = install(globals(), FPSAN)
