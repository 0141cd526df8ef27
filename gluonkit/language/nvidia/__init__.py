"""``gluonkit.language.nvidia``: the NVIDIA hardware units, one subpackage per architecture
as in Gluon (:mod:`.ampere`, :mod:`.hopper`)."""

from . import ampere, hopper

__all__ = ["ampere", "hopper"]
