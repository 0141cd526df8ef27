"""What makes the host descriptors behave as Gluon's ``@dataclass`` descriptors do.

Gluon 3.9's ``TensorDescriptor`` and ``TensorDescriptorIm2Col`` are dataclasses: host code
calls ``dataclasses.replace(desc, layout=...)`` and ``dataclasses.fields(desc)``, reads and
assigns fields and compares descriptors with ``==``.  gluonkit's are dataclasses with the
same fields; this base class adds the two things a plain dataclass lacks here:

* assigning a field after construction validates the descriptor again and refreshes its
  derived state (address, dtype, TMA box, encoded tensor map), so the launch path can trust
  that state without checking anything per launch; a rejected value is rolled back.
  Fields that only make sense together (``shape`` and ``strides``) change together through
  ``dataclasses.replace``.
* ``==`` compares ``base`` by identity (the same memory object) and every other field by
  value.  Gluon's generated ``__eq__`` compares the field tuples, where Python compares the
  same base object by identity too but distinct tensors elementwise, which raises an
  "ambiguous truth value" error; here distinct bases are simply unequal.  Like Gluon's,
  descriptors are unhashable.
"""

from __future__ import annotations

import dataclasses

__all__ = ["DescriptorRecord"]


class DescriptorRecord:
    """Base of the host descriptor dataclasses; subclasses define ``_validate()``, which checks
    the fields, normalizes them and sets the derived (non-field) attributes."""

    _ready = False  # set on the instance once __post_init__ has validated it

    def __post_init__(self) -> None:
        self._validate()
        self.__dict__["_ready"] = True

    def __setattr__(self, name: str, value) -> None:
        state = self.__dict__
        if not self._ready or name not in self.__dataclass_fields__:
            state[name] = value
            return
        old = state[name]
        state[name] = value
        try:
            self._validate()
        except BaseException:
            state[name] = old
            self._validate()
            raise

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        if self.base is not other.base:
            return False
        return all(getattr(self, f.name) == getattr(other, f.name) for f in dataclasses.fields(self)
                   if f.name != "base")

    __hash__ = None  # mutable, like Gluon's dataclasses
