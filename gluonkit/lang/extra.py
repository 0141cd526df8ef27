"""Gluon's ``extra`` namespace (``libdevice``).

Not built: ``libdevice`` is a stub module whose every function raises
:class:`~gluonkit.lang.unsupported.UnsupportedFeatureError` (:mod:`gluonkit.lang.unsupported`).
"""

from .unsupported import EXTRA, install

__all__ = install(globals(), EXTRA)
