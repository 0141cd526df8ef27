"""The user tree is Gluon 3.9's: every public name resolves, with Gluon's parameters.

``tests/data/gluon39_names.json`` lists the public names of Gluon 3.9's NVIDIA modules
(written by ``scripts/gen_gluon_names.py`` from an installed Triton 3.9).  A Gluon kernel
ports by rewriting ``triton.experimental.gluon`` to ``gluonkit`` in its imports, so:

* each name of ``triton.experimental.gluon.X`` resolves in ``gluonkit.X`` (never an
  ``AttributeError``), a feature gluonkit has not built being a stub that raises
  :class:`~gluonkit.lang.unsupported.UnsupportedFeatureError` when used;
* each callable gluonkit implements takes Gluon's parameters: the same names, kinds and
  defaults in the same order (a builtin's trailing ``_semantic``/``_generator`` aside), and
  so do the public static methods of classes (``TensorDescriptor.from_tensor`` …).  Two
  things count as the same: a dataclass's ``default_factory`` (an empty list) and a
  default of ``None``, ``[]`` or ``()``; Triton's ``PROPAGATE_NAN.NONE`` and gluonkit's
  ``"none"`` (:data:`SAME_DEFAULT`).  gluonkit may accept further keyword-only parameters
  with defaults after Gluon's (every Gluon call still binds the same way).

Differences are allowed only where :data:`EXCEPTIONS` lists them, each with its reason.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os

import pytest

from gluonkit.lang.unsupported import is_unsupported

DATA = os.path.join(os.path.dirname(__file__), "data", "gluon39_names.json")
with open(DATA) as _f:
    GLUON = json.load(_f)["modules"]

HIDDEN = ("_semantic", "_generator")

# Gluon's default (as the JSON records it) -> gluonkit defaults that mean the same.
SAME_DEFAULT = {
    json.dumps({"repr": "<factory>"}): [{"value": None}, {"value": []}],
    json.dumps({"repr": "PROPAGATE_NAN.NONE"}): [{"value": "none"}],
}

# (module, name or name.static_method) -> why gluonkit's parameters differ from Gluon's.
_MADE_BY_GLUONKIT = "constructed by gluonkit itself (from IR values or types), never by a kernel or host script"
_IR_TYPE = "gluonkit's IR type under Gluon's name; kernels read its attributes, they do not construct it"
_NOT_ALIGNED = "not aligned with Gluon 3.9 yet; see docs/porting.rst"
EXCEPTIONS = {
    ("", "GluonJITFunction"): _MADE_BY_GLUONKIT,
    ("language", "tensor"): _MADE_BY_GLUONKIT,
    ("language", "shared_memory_descriptor"): _MADE_BY_GLUONKIT,
    ("language.nvidia.hopper", "warpgroup_mma_accumulator"): _MADE_BY_GLUONKIT,
    ("language.nvidia.hopper.tma", "tensor_descriptor"): _MADE_BY_GLUONKIT,
    ("language.nvidia.blackwell.tma", "tensor_descriptor"): _MADE_BY_GLUONKIT,
    ("language.nvidia.hopper.tma", "tensor_descriptor_im2col"): _MADE_BY_GLUONKIT,
    ("language", "dtype"): "gluonkit's dtypes are the fixed instances gl.int32, gl.float16 …, not made by name",
    ("language", "dtype.is_dtype"): "a Triton-internal predicate on type names",
    ("language", "dtype.is_void"): "gluonkit has no void dtype (gl.void is a stub)",
    ("language", "dtype.is_block"): "gluonkit's dtypes are never blocks: a tensor's block type is its .type",
    ("language", "dtype.is_const"): "gluonkit has no const pointers",
    ("language", "dtype.is_ptr"): "an instance method in gluonkit (x.dtype.is_ptr() works in both)",
    ("language", "pointer_type"): _IR_TYPE + "; gl.pointer_type(element) has no address space or constness",
    ("language", "block_type"): _IR_TYPE + ": block_type(shape, element), what desc.block_type answers",
    ("language", "distributed_type"): _IR_TYPE,
    ("language", "shared_memory_descriptor_type"): _IR_TYPE,
    ("language.nvidia.blackwell", "tensor_memory_descriptor"): _MADE_BY_GLUONKIT,
    ("language.nvidia.blackwell", "tensor_memory_descriptor_type"): _IR_TYPE,
    ("language.nvidia.rubin", "tensor_memory_descriptor"): _MADE_BY_GLUONKIT,
    ("language.nvidia.rubin", "tensor_memory_descriptor_type"): _IR_TYPE,
    ("language.nvidia.hopper.tma", "tensor_descriptor_type"): _IR_TYPE,
    ("language.nvidia.blackwell.tma", "tensor_descriptor_type"): _IR_TYPE,
    ("language.nvidia.hopper.tma", "tensor_descriptor_im2col_type"): _IR_TYPE,
    ("language.nvidia.ampere.mbarrier", "arrive"): "one mbarrier module for all: Hopper's arrive, which adds count=1",
    ("language.nvidia.rubin.mbarrier", "arrive"): "one mbarrier module for all: Hopper's arrive (no "
                                                  "multicast_cta yet)",
    ("language", "load"): _NOT_ALIGNED + " (cache_modifier, eviction_policy, volatile keyword-only; cache_policy)",
    ("language", "store"): _NOT_ALIGNED + " (cache_modifier, eviction_policy keyword-only; cache_policy)",
    ("language", "max"): _NOT_ALIGNED + " (return_indices, return_indices_tie_break_left)",
    ("language", "min"): _NOT_ALIGNED + " (return_indices, return_indices_tie_break_left)",
    ("language", "static_range"): _NOT_ALIGNED + " (Triton's arg1/arg2/step spelling and loop hints)",
    ("language.nvidia.rubin", "TensorMemoryScalesLayout"): "Blackwell's: gluonkit does not target Rubin",
}


def _gluonkit_module(rel: str):
    return importlib.import_module(f"gluonkit.{rel}" if rel else "gluonkit")


def _names():
    for rel, entries in GLUON.items():
        for name in entries:
            yield rel, name


def _visible(params):
    """Gluon's parameter records without the hidden trailing builtin parameters."""
    return [(p["name"], p["kind"], p.get("default")) for p in params if p["name"] not in HIDDEN]


def _ours(fn):
    """The same records for a gluonkit callable (``None`` where it cannot be introspected)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.name in HIDDEN:
            continue
        default = None
        if p.default is not inspect.Parameter.empty:
            v = p.default
            default = {"value": list(v) if isinstance(v, tuple) else v} \
                if v is None or isinstance(v, (bool, int, float, str, tuple)) else {"repr": repr(v)}
        out.append((p.name, p.kind.name.lower(), default))
    return out


def test_the_name_list_covers_the_nvidia_tree():
    assert GLUON["nvidia.hopper"].keys() >= {"TensorDescriptor", "TensorDescriptorIm2Col"}
    assert "async_load" in GLUON["language.nvidia.hopper.tma"]
    assert "amd" not in GLUON[""] and "amd" not in GLUON["language"]
    assert sum(len(v) for v in GLUON.values()) > 250


@pytest.mark.parametrize("rel,name", list(_names()), ids=lambda v: v or "gluonkit")
def test_name_resolves(rel, name):
    module = _gluonkit_module(rel)
    assert hasattr(module, name), f"gluonkit.{rel}.{name} is missing (Gluon 3.9 has it)"
    entry = GLUON[rel][name]
    if entry["kind"] == "module":
        value = getattr(module, name)
        assert inspect.ismodule(value)
        full = f"{module.__name__}.{name}"
        if f"{rel}.{name}" in GLUON:  # one of the user tree's own submodules: exactly that one
            assert value is importlib.import_module(full)


def _signature_cases():
    """Every implemented callable and public static method (a stub's parameters come with its feature)."""
    for rel, name in _names():
        entry = GLUON[rel][name]
        if is_unsupported(getattr(_gluonkit_module(rel), name, None)):
            continue
        if "params" in entry and (rel, name) not in EXCEPTIONS:
            yield rel, name, None, entry["params"]
        for method, params in entry.get("static_methods", {}).items():
            if params is not None and (rel, f"{name}.{method}") not in EXCEPTIONS:
                yield rel, name, method, params


def _mismatch(rel, name, method, params):
    """How gluonkit's ``rel.name[.method]`` differs from Gluon's ``params``, or ``None`` if it does not."""
    obj = getattr(_gluonkit_module(rel), name)
    if method is not None:
        if not hasattr(obj, method):
            return f"gluonkit.{rel}.{name}.{method} is missing"
        obj = getattr(obj, method)
    ours = _ours(obj)
    if ours is None:
        return f"cannot introspect gluonkit.{rel}.{name}"
    theirs = _visible(params)
    extra = ours[len(theirs):]
    if not all(kind == "keyword_only" and default is not None for _, kind, default in extra):
        return f"gluonkit adds parameters that are not keyword-only with defaults: {extra}"
    ours = [(n, k, d if d == t or d not in SAME_DEFAULT.get(json.dumps(t), []) else t)
            for (n, k, d), (_, _, t) in zip(ours, theirs)]
    if ours != theirs:
        return f"gluonkit.{rel}.{name}{'.' + method if method else ''}: {ours} != {theirs}"
    return None


@pytest.mark.parametrize("rel,name,method,params", list(_signature_cases()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_parameters_match_gluon(rel, name, method, params):
    problem = _mismatch(rel, name, method, params)
    assert problem is None, problem


def test_every_exception_names_a_real_gluon_name():
    for rel, name in EXCEPTIONS:
        assert name.split(".")[0] in GLUON[rel], (rel, name)


@pytest.mark.parametrize("rel,name", list(EXCEPTIONS), ids=lambda v: v or "gluonkit")
def test_every_exception_is_still_a_difference(rel, name):
    """An exception whose name now matches Gluon is stale: delete it so the name is checked again."""
    base, _, method = name.partition(".")
    entry = GLUON[rel][base]
    params = entry["static_methods"].get(method) if method else entry.get("params")
    if params is not None:
        assert _mismatch(rel, base, method or None, params) is not None, f"{rel}.{name} matches Gluon 3.9 now"
