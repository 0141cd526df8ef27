"""Host-side NVIDIA objects at the import paths of Gluon's ``triton.experimental.gluon.nvidia``:
:mod:`gluonkit.nvidia.hopper` (``TensorDescriptor`` for TMA copies)."""

from . import hopper

__all__ = ["hopper"]
