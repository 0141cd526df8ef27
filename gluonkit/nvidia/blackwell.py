"""Host-side Blackwell objects, at the path of Gluon's ``triton.experimental.gluon.nvidia.blackwell``:
the same :class:`~gluonkit.nvidia.hopper.TensorDescriptor` (TMA did not change)."""

from .hopper import TensorDescriptor

__all__ = ["TensorDescriptor"]
