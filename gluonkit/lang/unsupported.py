"""Gluon 3.9 names whose feature gluonkit has not built yet, and names Gluon removed.

Every public name of Gluon's NVIDIA tree resolves in gluonkit (``tests/test_gluon_names.py``),
so a ported kernel fails at the line that *uses* a missing feature, with a message saying
so, rather than at its imports with an ``AttributeError``.  A stub made here:

* called in a kernel, raises :class:`UnsupportedFeatureError` at the user's line:
  ``"async_gather is not supported by gluonkit yet (tma_gather: TMA gather and scatter;
  issue 12; see docs/porting.rst)"``; called on the host, raises the same error;
* as a class, raises the same when constructed (and a static method looked up on it is a
  stub too); as a dtype, is refused with the same message where a dtype is required;
* answers :func:`is_unsupported`.

The tables below are the only place stubs are listed, one line per name.  A namespace
module (``gluonkit.lang``, ``lang.nvidia.hopper`` …) ends with ``install(globals(), TABLE)``,
which defines a stub only for names the module does not define itself: implementing a
feature is defining its names in the namespace (and deleting their lines here).
"""

from __future__ import annotations

import types
from typing import Dict, List, Optional, Tuple

from ..ir.diagnostics import CompilationError, UnsupportedFeatureError

__all__ = ["UnsupportedFeatureError", "FEATURES", "unsupported", "unsupported_class", "removed", "is_unsupported",
           "unsupported_message", "install", "refuse_parameter"]


# feature -> (what it is, the issue that builds it; None: not scheduled yet)
FEATURES: Dict[str, Tuple[str, Optional[int]]] = {
    "clusters": ("CTA clusters, multicast and cluster-scope barriers", 12),
    "tma_reduce": ("TMA reductions (async_atomic_*)", 12),
    "device_descriptors": ("tensor descriptors made inside a kernel", 10),
    "atomic_poll": ("spin-waiting on memory words", 10),
    "inline_asm": ("thread-wise inline assembly with explicit result types; inline_asm_elementwise works", 10),
    "cache_policy": ("cache policies", 10),
    "packed_arith": ("Rubin's packed four-lane arithmetic (Blackwell's two-lane add2 … work)", 10),
    "mma_v2": ("Ampere mma_v2", 10),
    "hints": ("these compiler hints and checks", 10),
    "dtypes": ("AMD and pre-Hopper fp8 formats and void", None),
    "type_classes": ("Gluon's value and type classes", 10),
    "fpsan": ("the floating-point sanitizer", None),
    "libdevice": ("libdevice", None),
    "compiler_api": ("Triton's compiler entry points", None),
}


def _message(name: str, feature: str) -> str:
    what, issue = FEATURES[feature]
    where = (f"issue {issue}; " if issue is not None else "") + "see docs/porting.rst"
    return f"{name} is not supported by gluonkit yet ({feature}: {what}; {where})"


def _fail(message: str, _semantic, error: type = UnsupportedFeatureError) -> None:
    """Raise ``error``: at the user's line when called from a kernel, plainly on the host."""
    if _semantic is not None:
        _semantic.error(message, error)
    raise error(message)


def _failing_builtin(name: str, message: str, error: type):
    """A kernel builtin called ``name`` whose every call raises ``error(message)``."""

    def stub(*args, _semantic=None, **kwargs):
        _fail(message, _semantic, error)

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = message
    stub.__gluonkit_builtin__ = True
    return stub


def unsupported(name: str, feature: str):
    """A kernel builtin ``name`` that raises :class:`UnsupportedFeatureError` when called."""
    message = _message(name, feature)
    stub = _failing_builtin(name.rsplit(".", 1)[-1], message, UnsupportedFeatureError)
    stub.__gluonkit_unsupported__ = message
    return stub


class _StubClassMeta(type):
    """Looking up a public attribute on a stub class gives a stub (``Cls.from_tensor``)."""

    def __getattr__(cls, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return unsupported(f"{cls.__name__}.{attr}", cls.__gluonkit_feature__)


def unsupported_class(name: str, feature: str) -> type:
    """A class ``name`` that raises :class:`UnsupportedFeatureError` when constructed."""
    message = _message(name, feature)

    def __new__(cls, *args, _semantic=None, **kwargs):
        _fail(message, _semantic)

    return _StubClassMeta(name, (), {"__new__": __new__, "__doc__": message, "__gluonkit_builtin__": True,
                                     "__gluonkit_unsupported__": message, "__gluonkit_feature__": feature})


class _StubDType:
    """A dtype name gluonkit does not support: refused wherever a dtype is required."""

    def __init__(self, name: str, feature: str):
        self.name = name
        self.__gluonkit_unsupported__ = _message(f"gl.{name}", feature)

    def __repr__(self) -> str:
        return f"gl.{self.name} (unsupported)"


class _StubModule(types.ModuleType):
    """A module whose every public attribute is a stub (``gl.extra.libdevice.exp``)."""

    def __init__(self, name: str, feature: str):
        super().__init__(name, _message(name, feature))
        self.__gluonkit_unsupported__ = self.__doc__
        self.__gluonkit_feature__ = feature

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return unsupported(f"{self.__name__}.{attr}", self.__gluonkit_feature__)


def removed(name: str, replacement: str):
    """A builtin Gluon removed: calling it is an error naming ``replacement``, as in Gluon 3.9."""
    return _failing_builtin(name, f"{name} has been removed; call {replacement} instead", CompilationError)


def refuse_parameter(sem, owner: str, parameter: str, feature: str, fix: str) -> None:
    """Stop compilation at the user's line: ``owner``'s ``parameter`` needs ``feature``, not built yet.

    For parameters of implemented builtins (``cache_policy=``) that only a missing feature
    could honour; the message is a stub's, followed by ``fix``.
    """
    what = f"{owner}'s {parameter}"
    sem.error(f"{_message(what, feature)}: {fix}", UnsupportedFeatureError)


def is_unsupported(obj) -> bool:
    """Whether ``obj`` is a stub made here."""
    return isinstance(obj, (types.FunctionType, _StubClassMeta, _StubDType, _StubModule)) and \
        getattr(obj, "__gluonkit_unsupported__", None) is not None


def unsupported_message(obj) -> str:
    """The message of a stub (see :func:`is_unsupported`)."""
    return obj.__gluonkit_unsupported__


_MAKERS = {"fn": unsupported, "class": unsupported_class, "dtype": _StubDType, "module": _StubModule}


def install(namespace: dict, table: Dict[str, Tuple[str, str]]) -> List[str]:
    """Define a stub in ``namespace`` for each name of ``table`` it does not define; returns them.

    ``table`` maps a name to ``(kind, feature)``, kind one of ``fn``, ``class``, ``dtype``,
    ``module``.
    """
    added = []
    for name, (kind, feature) in table.items():
        if name not in namespace:
            namespace[name] = _MAKERS[kind](name, feature)
            added.append(name)
    return added


# ---------------------------------------------------------------------------- the stubs
GL = {  # gluonkit.language
    "CachePolicy": ("class", "cache_policy"),
    "atomic_poll": ("fn", "atomic_poll"),
    "inline_asm": ("fn", "inline_asm"),
    "expect_zero": ("fn", "hints"),
    "float8e4b15": ("dtype", "dtypes"),
    "float8e4b8": ("dtype", "dtypes"),
    "float8e5b16": ("dtype", "dtypes"),
    "void": ("dtype", "dtypes"),
    "base_type": ("class", "type_classes"),
    "base_value": ("class", "type_classes"),
    "tuple": ("class", "type_classes"),
    "tuple_type": ("class", "type_classes"),
}

TOP = {  # gluonkit
    "GluonASTSource": ("class", "compiler_api"),
}

AMPERE = {  # gluonkit.language.nvidia.ampere (also re-exported by hopper, blackwell, rubin)
    "CachePolicy": ("class", "cache_policy"),
    "FractionalEvictionPolicy": ("class", "cache_policy"),
    "mma_v2": ("fn", "mma_v2"),
}

HOPPER = {  # gluonkit.language.nvidia.hopper
    "async_store": ("fn", "clusters"),
    "warpgroup_mma_accumulator_type": ("class", "type_classes"),
}

CLUSTER = {  # gluonkit.language.nvidia.hopper.cluster
}

TMA = {  # gluonkit.language.nvidia.hopper.tma
    "async_atomic_add": ("fn", "tma_reduce"),
    "async_atomic_and": ("fn", "tma_reduce"),
    "async_atomic_max": ("fn", "tma_reduce"),
    "async_atomic_min": ("fn", "tma_reduce"),
    "async_atomic_or": ("fn", "tma_reduce"),
    "async_atomic_xor": ("fn", "tma_reduce"),
    "make_tensor_descriptor": ("fn", "device_descriptors"),
}

BLACKWELL = {  # gluonkit.language.nvidia.blackwell (rubin re-exports them)
}

RUBIN = {  # gluonkit.language.nvidia.rubin, besides blackwell's
    "add4": ("fn", "packed_arith"),
    "sub4": ("fn", "packed_arith"),
    "mul4": ("fn", "packed_arith"),
    "fma4": ("fn", "packed_arith"),
}

FPSAN = {  # gluonkit.language.fpsan
    "embed": ("fn", "fpsan"),
    "unembed": ("fn", "fpsan"),
}

EXTRA = {  # gluonkit.language.extra
    "libdevice": ("module", "libdevice"),
}
