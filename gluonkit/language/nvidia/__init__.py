"""``gluonkit.language.nvidia``: the NVIDIA hardware units, one subpackage per architecture
as in Gluon (:mod:`.hopper`)."""

from . import hopper

__all__ = ["hopper"]
