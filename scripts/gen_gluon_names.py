"""Write tests/data/gluon39_names.json: the public names of Gluon 3.9's NVIDIA module tree.

Run once, with the Python that has Triton 3.9 installed (a reference, never a gluonkit
dependency)::

    /work/tri39/bin/python scripts/gen_gluon_names.py [OUTPUT]

``tests/test_gluon_names.py`` checks that every name in the file resolves in the matching
``gluonkit`` module, and that the parameters of the callables gluonkit implements match.

What "public" means here (Gluon has no single rule: ``language`` has no ``__all__``, and
``nvidia.blackwell``'s ``__all__`` leaves out ``tcgen05_mma``, which every Blackwell kernel
imports from it), so a name of module ``M`` is public when it does not start with ``_`` and

* it is in ``M.__all__``, or
* it is defined in ``M`` itself (a function's or class's ``__module__`` is ``M``), or in a
  private implementation module of ``M`` (``M._core``, ``M._layouts`` …), or
* it is a submodule of ``M``, or
* ``M`` is a package without ``__all__`` and the value is one of Triton's own objects (its
  defining module, or for an instance its type's, starts with ``triton``): how ``language``
  re-exports ``triton.language``'s ``tensor``, ``constexpr``, dtypes and math functions.
  (A plain module without ``__all__``, like ``fpsan``, exports only what it defines.)

Helpers that modules merely import (``dataclass``, ``List``, ``ir``, ``knobs``, a module
imported under an alias like ``ttgl``) are therefore not public.  The AMD tree
(``language.amd``, ``gluon.amd``) is left out everywhere: gluonkit targets NVIDIA only, a
deliberate difference (docs/porting.rst).

For each callable the file records its parameters (name, kind, default): Gluon builtins
through their wrapped function (including the trailing ``_semantic``/``_generator``, which
the test ignores), ``@jit`` functions through ``.fn``, classes through their constructor,
plus the parameters of a class's public static methods (``TensorDescriptor.from_tensor``,
``MBarrierLayout.multicta`` …), which users call as constructors.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import types

import triton

PREFIX = "triton.experimental.gluon"

# The modules mirrored by gluonkit, relative to PREFIX ("" is the package itself).
MODULES = [
    "",
    "language",
    "language.nvidia",
    "language.nvidia.ampere",
    "language.nvidia.ampere.async_copy",
    "language.nvidia.ampere.mbarrier",
    "language.nvidia.hopper",
    "language.nvidia.hopper.cluster",
    "language.nvidia.hopper.mbarrier",
    "language.nvidia.hopper.tma",
    "language.nvidia.blackwell",
    "language.nvidia.blackwell.clc",
    "language.nvidia.blackwell.tma",
    "language.nvidia.rubin",
    "language.nvidia.rubin.mbarrier",
    "language.extra",
    "language.fpsan",
    "nvidia",
    "nvidia.hopper",
    "nvidia.blackwell",
]

EXCLUDED = {"amd"}  # gluonkit is NVIDIA-only


def _defined_in(value) -> str | None:
    """The module a function, class or ``@jit`` function was defined in (else None)."""
    if isinstance(value, (types.FunctionType, type)) or hasattr(value, "fn"):
        return getattr(value, "__module__", None)
    return None


def _is_own(defined: str | None, name: str) -> bool:
    """Whether ``defined`` is module ``name`` or one of its private implementation modules."""
    return defined is not None and (defined == name or defined.startswith(f"{name}._"))


def _origin(value) -> str:
    """Where a value comes from: its defining module, or for an instance its type's."""
    if isinstance(value, types.ModuleType):
        return value.__name__
    return getattr(value, "__module__", None) or type(value).__module__


def public_names(module) -> list[str]:
    name = module.__name__
    explicit = set(getattr(module, "__all__", ()))
    out = set()
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr in EXCLUDED:
            continue
        if attr in explicit:
            out.add(attr)
        elif isinstance(value, types.ModuleType):
            if value.__name__ == f"{name}.{attr}":
                out.add(attr)
        elif _is_own(_defined_in(value), name):
            out.add(attr)
        elif not hasattr(module, "__all__") and hasattr(module, "__path__") and _origin(value).startswith("triton"):
            out.add(attr)
    return sorted(out - EXCLUDED)


def _default(value):
    if value is inspect.Parameter.empty:
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    if isinstance(value, (tuple, list)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return {"value": list(value)}
    return {"repr": repr(value)}


def _signature(value):
    fn = value
    if hasattr(value, "fn") and callable(getattr(value, "fn")):  # a @jit function
        fn = value.fn
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = []
    for p in sig.parameters.values():
        entry = {"name": p.name, "kind": p.kind.name.lower()}
        default = _default(p.default)
        if default is not None:
            entry["default"] = default
        params.append(entry)
    return params


def _kind(value) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, type):
        return "class"
    if hasattr(value, "fn") and callable(getattr(value, "fn")):
        return "jit"
    if getattr(value, "__triton_builtin__", False):
        return "builtin"
    if callable(value):
        return "function"
    return "object"


def describe(module) -> dict:
    entries = {}
    for attr in public_names(module):
        value = getattr(module, attr)
        entry = {"kind": _kind(value)}
        if entry["kind"] in ("builtin", "function", "jit", "class"):
            params = _signature(value)
            if params is not None:
                entry["params"] = params
        if entry["kind"] == "class":
            static = {k: _signature(getattr(value, k)) for k, v in vars(value).items()
                      if isinstance(v, (staticmethod, classmethod)) and not k.startswith("_")}
            if static:
                entry["static_methods"] = static
        entries[attr] = entry
    return entries


def _dump(data) -> str:
    """JSON with one line per name, so a diff of a new Triton release reads name by name."""
    lines = ['{', f' "triton_version": {json.dumps(data["triton_version"])},', ' "modules": {']
    modules = list(data["modules"].items())
    for i, (module, entries) in enumerate(modules):
        lines.append(f'  {json.dumps(module)}: {{')
        items = sorted(entries.items())
        for j, (name, entry) in enumerate(items):
            comma = "," if j < len(items) - 1 else ""
            lines.append(f'   {json.dumps(name)}: {json.dumps(entry, sort_keys=True)}{comma}')
        lines.append("  }" + ("," if i < len(modules) - 1 else ""))
    lines += [" }", "}", ""]
    return "\n".join(lines)


def main(argv) -> int:
    out_path = argv[1] if len(argv) > 1 else "tests/data/gluon39_names.json"
    data = {"triton_version": triton.__version__, "modules": {}}
    for rel in MODULES:
        full = f"{PREFIX}.{rel}" if rel else PREFIX
        data["modules"][rel] = describe(importlib.import_module(full))
    with open(out_path, "w") as f:
        f.write(_dump(data))
    total = sum(len(v) for v in data["modules"].values())
    print(f"wrote {out_path}: {len(MODULES)} modules, {total} names (Triton {triton.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
