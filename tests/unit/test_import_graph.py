"""The package's import graph has no circle: no module imports, at load time or lazily inside a function, a module
that imports it back, directly or through others; neither do its folders (``models/``, ``data/``, ...) taken as one
each. Only ``fairseq_joint/__init__.py`` loads modules by name (the plugin's models, criteria and tasks, to register
them), which no module imports."""

import ast
import os

import pytest

import fairseq_joint

PACKAGE = os.path.dirname(fairseq_joint.__file__)


def module_name(path: str) -> str:
    relative = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
    return relative[: -len(".__init__")] if relative.endswith(".__init__") else relative


def imports() -> dict:
    """``{module: {the package's modules it imports anywhere in its code}}``."""
    modules = {}
    for root, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    modules[module_name(path)] = (ast.parse(f.read()), os.path.basename(path) == "__init__.py")
    graph = {}
    for module, (tree, is_package) in modules.items():
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join(parts + ([base] if base else []))
                found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                             for alias in node.names)
        graph[module] = {m for m in found if m in modules and m != module and m != "fairseq_joint"}
    return graph


def circle(graph: dict):
    """One circle of ``graph`` as a list of its nodes, or None."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for after in sorted(graph.get(node, ())):
            if state.get(after) == "open":
                return path[path.index(after):] + [after]
            if after not in state:
                found = visit(after)
                if found:
                    return found
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def folder(module: str) -> str:
    """The room a module is in: its folder below the package (``fairseq_joint.models``), or the module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def test_the_graph_reads_the_imports_it_should():
    graph = imports()
    assert "fairseq_joint.options" in graph["fairseq_joint.checks"]
    assert "fairseq_joint.errors" in graph["fairseq_joint.options"] or "fairseq_joint.errors" in graph["fairseq_joint.checks"]
    # a lazy import inside a function counts
    assert "fairseq_joint.tasks.gile_classification" in graph["fairseq_joint.command_line"]


def test_no_module_imports_one_that_imports_it_back():
    assert circle(imports()) is None


def test_no_folder_imports_one_that_imports_it_back():
    rooms = {}
    for module, after in imports().items():
        rooms.setdefault(folder(module), set()).update(folder(m) for m in after if folder(m) != folder(module))
    assert circle(rooms) is None


@pytest.mark.parametrize("graph,expected", [({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
                                            ({"a": {"b"}, "b": {"c"}, "c": set()}, None)])
def test_circle_finds_one(graph, expected):
    assert circle(graph) == expected
