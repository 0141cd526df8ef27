"""Gluon's Ampere namespace: ``from gluonkit.lang.nvidia.ampere import async_copy, mbarrier, mma_v2``.

The names of ``triton.experimental.gluon.language.nvidia.ampere``; features gluonkit has
not built (``mma_v2``, cache policies, ``cp.async``) are stubs
(:mod:`gluonkit.lang.unsupported`).  ``mbarrier`` is the one namespace
:mod:`gluonkit.lang.nvidia.mbarrier` (Gluon's Ampere ``arrive`` is Hopper's without ``count``).
"""

from . import async_copy, mbarrier  # noqa: F401 (attributes; the user tree has submodules of these names)
from ..unsupported import AMPERE, install

# ``async_copy`` and ``mbarrier`` are left out of __all__: the user tree
# (gluonkit.language.nvidia.ampere) has its own submodules of those names.
__all__ = install(globals(), AMPERE)
