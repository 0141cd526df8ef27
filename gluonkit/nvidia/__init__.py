"""Host-side NVIDIA objects at the import paths of Gluon's ``triton.experimental.gluon.nvidia``:
:mod:`gluonkit.nvidia.hopper` and :mod:`gluonkit.nvidia.blackwell` (``TensorDescriptor``
for TMA copies, ``TensorDescriptorIm2Col`` for im2col copies)."""

from . import blackwell, hopper

__all__ = ["hopper", "blackwell"]
