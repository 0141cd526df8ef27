"""Gluon's Blackwell ``clc`` namespace (cluster launch control: ``try_cancel``, ``load_result``).

Not built yet: the names are stubs (:mod:`gluonkit.lang.unsupported`).
"""

from ..unsupported import CLC, install

__all__ = install(globals(), CLC)
