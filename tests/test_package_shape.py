"""The package's import graph: no module imports another that imports it back (directly or
through others, at module level or inside a function), and each folder imports only the
folders DESIGN.md allows."""

import ast
import os

import gluonkit

PACKAGE_DIR = os.path.dirname(gluonkit.__file__)

# folder -> folders it may import (besides itself); see docs/design.rst.
ALLOWED = {
    "layouts": set(),
    "ir": {"layouts"},
    "sync": {"ir", "layouts"},
    "lang": {"ir", "layouts", "sync"},
    "language": {"lang", "sync", "ir", "layouts"},
    "lower": {"ir", "layouts"},
    "interpret": {"ir", "layouts"},
    "runtime": {"layouts", "ir", "sync", "lang", "lower", "interpret", "nvidia", "_version"},
    "nvidia": {"layouts", "ir", "lang", "runtime"},  # the host API beside runtime (docs/design.rst)
}


def _module_files():
    for folder, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
                is_package = name == "__init__.py"
                yield (rel[: -len(".__init__")] if is_package else rel), path, is_package


def _import_graph():
    modules = {name: (path, is_pkg) for name, path, is_pkg in _module_files()}
    graph = {}
    for name, (path, is_pkg) in modules.items():
        package = name if is_pkg else name.rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    deps.add(target if target in modules else base)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles(_import_graph()) == []


def test_folders_import_only_what_the_design_allows():
    bad = []
    for module, deps in _import_graph().items():
        parts = module.split(".")
        if len(parts) < 2 or parts[1] not in ALLOWED:
            continue
        for dep in deps:
            dep_parts = dep.split(".")
            if len(dep_parts) < 2 or dep_parts[1] == parts[1]:
                continue
            if dep_parts[1] not in ALLOWED[parts[1]]:
                bad.append(f"{module} imports {dep}")
    assert bad == []
