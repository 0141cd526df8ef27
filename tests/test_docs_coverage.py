"""The docs cover what exists: every example has a gallery page, every name a user can import
is in the API reference (or its feature's page), and the kernels behind the Debugging page's
reports compute the right thing when their bug is left out (the docs build checks that the
reports themselves still appear)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys
import types

import numpy as np
import pytest

import gluonkit
from gluonkit.lang.unsupported import is_unsupported
from interpreting import interpreter_on

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
EXAMPLES = os.path.join(ROOT, "examples")


def _read(*parts) -> str:
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return f.read()


def _examples():
    """Every example script, relative to examples/ (helpers start with an underscore)."""
    found = []
    for folder, _, files in os.walk(EXAMPLES):
        found += [os.path.relpath(os.path.join(folder, f), EXAMPLES) for f in files
                  if f.endswith(".py") and not f.startswith("_")]
    return sorted(found)


@pytest.mark.parametrize("example", _examples())
def test_every_example_has_a_gallery_page_with_its_code(example):
    stem = os.path.splitext(os.path.basename(example))[0]
    page = os.path.join(DOCS, "gallery", f"{stem}.rst")
    assert os.path.isfile(page), f"docs/gallery/{stem}.rst is missing for examples/{example}"
    assert f".. literalinclude:: ../../examples/{example}" in _read(page)
    assert f":doc:`{stem}`" in _read(DOCS, "gallery", "index.rst")


# ----------------------------------------------------------------------------- the API reference
def _user_modules():
    """The modules users import, Gluon 3.9's tree: ``gluonkit``, every module of
    ``gluonkit.language`` and the host descriptor modules ``gluonkit.nvidia.hopper`` and
    ``gluonkit.nvidia.blackwell``."""
    modules = {name: importlib.import_module(name)
               for name in ("gluonkit", "gluonkit.language", "gluonkit.nvidia.hopper", "gluonkit.nvidia.blackwell")}
    language = modules["gluonkit.language"]
    for info in pkgutil.walk_packages(language.__path__, "gluonkit.language."):
        modules[info.name] = importlib.import_module(info.name)
    return modules


def _documented():
    """(modules documented with all their members, {module: listed members}, qualified names
    documented one by one, the text of the API reference and the porting guide)."""
    whole, listed, single = set(), {}, set()
    for page in os.listdir(DOCS):
        if not page.endswith(".rst"):
            continue
        text = _read(DOCS, page)
        for m in re.finditer(r"^\.\. automodule:: (\S+)\n((?:   :.*\n(?: {13}.*\n)*)*)", text, re.M):
            module, options = m.group(1), m.group(2)
            if ":no-members:" in options:
                continue
            members = re.search(r":members:(.*(?:\n {13}.*)*)", options)
            if members and members.group(1).strip():
                listed.setdefault(module, set()).update(n.strip() for n in members.group(1).split(",") if n.strip())
            else:
                whole.add(module)
        single.update(re.findall(r"^\.\. auto(?:function|class|data):: (\S+)", text, re.M))
    return whole, listed, single, _read(DOCS, "api.rst") + _read(DOCS, "porting.rst")


def _is_documented(name, obj, documented) -> bool:
    whole, listed, single, text = documented
    home, own = getattr(obj, "__module__", None), getattr(obj, "__name__", name)
    if home in whole:
        public = getattr(sys.modules[home], "__all__", None)
        if public is None or own in public:
            return True
    if own in listed.get(home, ()) or f"{home}.{own}" in single:
        return True
    return re.search(rf"``(\w+\.)*{re.escape(name)}``", text) is not None


def test_every_name_users_import_is_in_the_api_reference():
    documented = _documented()
    missing = set()
    for module_name, module in _user_modules().items():
        names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
        for name in names:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or is_unsupported(obj):  # stubs: porting.rst's list (tested)
                continue
            if not _is_documented(name, obj, documented):
                missing.add(f"{module_name}.{name} ({getattr(obj, '__module__', '?')})")
    assert not missing, "not in the API reference (docs/api.rst): " + ", ".join(sorted(missing))


# ----------------------------------------------------------------------------- the Debugging page
def test_the_debugging_pages_kernels_are_right_without_their_bugs():
    sys.path.insert(0, os.path.join(DOCS, "snippets"))
    try:
        import planted_bugs
    finally:
        sys.path.remove(os.path.join(DOCS, "snippets"))
    with interpreter_on():
        x, y = planted_bugs.run_ring("")
        a, b, c = planted_bugs.run_tmem("")
        planted_bugs.run_stages(1)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
