"""``gluonkit.language.nvidia``: the NVIDIA hardware units, one subpackage per architecture
as in Gluon (:mod:`.ampere`, :mod:`.hopper`, :mod:`.blackwell`, :mod:`.rubin`)."""

from . import ampere, blackwell, hopper, rubin

__all__ = ["ampere", "blackwell", "hopper", "rubin"]
