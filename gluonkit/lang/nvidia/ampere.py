"""Gluon's Ampere namespace: ``from gluonkit.lang.nvidia.ampere import async_copy, mbarrier``.

The names of ``triton.experimental.gluon.language.nvidia.ampere`` that gluonkit implements:
``async_copy`` (:mod:`gluonkit.lang.nvidia.async_copy`, cp.async) and ``mbarrier``
(:mod:`gluonkit.sync.mbarrier`).
"""

from ...sync import mbarrier
from . import async_copy

__all__ = ["async_copy", "mbarrier"]
