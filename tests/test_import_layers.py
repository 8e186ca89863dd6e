"""simrun.lang's packages import each other without a cycle, counting imports inside functions.

Every import statement in simrun/lang is read with ast (module level, inside functions and
methods alike). A unit is a subpackage (ir, passes, autodiff, codegen, runtime, frontend, gui)
or a top-level module (types, builtins, matrix, fields, api, ...); an import from one unit of
another is an edge. The graph must have no cycle, so each unit only uses the ones below it.
Inside one package (a folder of simrun), modules must not import each other in a circle
either (`test_no_import_cycle_inside_a_package`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LANG = Path(__file__).resolve().parent.parent / "simrun" / "lang"
PACKAGE = "simrun.lang"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def _targets(node: ast.AST, module: str, is_package: bool, package: str = PACKAGE
             ) -> list[str]:
    """The modules of `package` an import statement names (a `from x import y` also names
    x.y, which may be a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith(package)]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    if not name.startswith(package):
        return []
    return [name] + [f"{name}.{a.name}" for a in node.names]


def _unit(module: str, root: Path) -> str | None:
    """The subpackage or top-level module of simrun.lang a module belongs to."""
    parts = module.split(".")
    if len(parts) < 3:
        return None  # simrun.lang itself: its __init__ re-exports everything
    unit = parts[2]
    return unit if (root / unit).is_dir() or (root / f"{unit}.py").exists() else None


def import_graph(root: Path = LANG) -> dict[str, dict[str, list[str]]]:
    """unit -> {imported unit: ["file:line", ...]} for every import, in functions too."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_name(path, root)
        source = _unit(module, root)
        if source is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, path.name == "__init__.py"):
                dest = _unit(target, root)
                if dest is not None and dest != source:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    seen = graph.setdefault(source, {}).setdefault(dest, [])
                    if where not in seen:
                        seen.append(where)
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, {})):
            if state.get(v) == 1:
                return path[path.index(v):] + [v]
            if v not in state:
                found = visit(v)
                if found:
                    return found
        path.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state:
            found = visit(u)
            if found:
                return found
    return None


def test_no_import_cycle_between_units():
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle:
        edges = [f"  {a} -> {b}: {', '.join(graph[a][b])}" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle " + " -> ".join(cycle) + "\n" + "\n".join(edges))


def test_the_walk_sees_imports_inside_functions(tmp_path):
    """A cycle closed only by an import inside a function is still a cycle."""
    for name, text in {"a/__init__.py": "", "a/x.py": "from ..b import y\n",
                       "b/__init__.py": "", "b/y.py": "def f():\n    from ..a import x\n"}.items():
        (tmp_path / "lang" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "lang" / name).write_text(text)
    assert find_cycle(import_graph(tmp_path / "lang")) in (["a", "b", "a"], ["b", "a", "b"])


def test_low_layers_stay_low():
    """types imports nothing of simrun.lang; ir only errors and types; codegen nothing above
    ir (it emits LLVM IR, the runtime loads it)."""
    graph = import_graph()
    assert set(graph.get("types", {})) == set()
    assert set(graph.get("ir", {})) <= {"errors", "types"}
    assert set(graph.get("codegen", {})) <= {"errors", "types", "ir"}
    assert set(graph.get("passes", {})) <= {"errors", "types", "ir"}


SIMRUN = LANG.parent


def module_graph(root: Path = SIMRUN, package: str = "simrun") -> dict[str, dict[str, list[str]]]:
    """module -> {module of the same package (folder): ["file:line", ...]}, for every module
    under `root`, imports inside functions too (a package's __init__ is left out: it only
    re-exports)."""
    graph: dict[str, dict[str, list[str]]] = {}
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] != "__init__":
            modules[".".join([package, *parts])] = path
    for module, path in modules.items():
        folder = module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, False, package):
                if target in modules and target != module and \
                        target.rsplit(".", 1)[0] == folder:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    seen = graph.setdefault(module, {}).setdefault(target, [])
                    if where not in seen:
                        seen.append(where)
    return graph


# Circles inside simrun.lang's own packages, older than this test: each is a debt to pay
# (then delete its line here: the test below fails while a listed circle is gone, so the list
# only shrinks). Any other circle fails at once.
KNOWN_CIRCLES = {
    frozenset({"simrun.lang.autodiff.tape", "simrun.lang.autodiff.check"}),
    frozenset({"simrun.lang.frontend.special", "simrun.lang.frontend.loops",
               "simrun.lang.frontend.lower", "simrun.lang.frontend.inline"}),
    frozenset({"simrun.lang.ir.builder", "simrun.lang.ir.nodes", "simrun.lang.ir.emitter"}),
}


def circles(graph: dict[str, dict[str, list[str]]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(u: str) -> None:
        index[u] = low[u] = len(index)
        stack.append(u)
        for v in sorted(graph.get(u, {})):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in stack:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            part = []
            while not part or part[-1] != u:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(frozenset(part))

    for u in sorted(graph):
        if u not in index:
            visit(u)
    return found


def test_no_import_cycle_inside_a_package():
    """Within one folder (simrun/adjoint, simrun/stepper, ...) the modules import each other
    without a circle, counting imports inside functions (ARCHITECTURE.md, habit 7: pass the
    dependency in, or move the shared piece into a third file)."""
    graph = module_graph()
    found = circles(graph)
    new = [c for c in found if c not in KNOWN_CIRCLES]
    if new:
        cycle = find_cycle({a: {b: w for b, w in graph.get(a, {}).items() if b in new[0]}
                            for a in new[0]})
        edges = [f"  {a} -> {b}: {', '.join(graph[a][b])}" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import cycle " + " -> ".join(cycle) + "\n" + "\n".join(edges))
    gone = [sorted(c) for c in KNOWN_CIRCLES if c not in found]
    assert not gone, f"these circles are broken now: delete them from KNOWN_CIRCLES: {gone}"


def test_the_module_walk_finds_a_circle_inside_a_package(tmp_path):
    """Two modules of one folder that import each other, one of them inside a function."""
    for name, text in {"p/__init__.py": "", "p/x.py": "from pkg.p.y import f\n",
                       "p/y.py": "def f():\n    from pkg.p import x\n"}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert find_cycle(module_graph(tmp_path, "pkg")) in (
        ["pkg.p.x", "pkg.p.y", "pkg.p.x"], ["pkg.p.y", "pkg.p.x", "pkg.p.y"])

# simrun's packages, top to bottom: each imports only packages below it (ARCHITECTURE.md;
# ensemble reads the KEY grammar from adjoint.keys, and adjoint never imports ensemble).
# scene and outputs share a layer: they import each other today (scene files and run folders)
# kernels/ and scenes/ are the shipped examples: user code on top, which nothing in simrun imports
LAYERS = [{"kernels", "scenes"}, {"cli"}, {"api"}, {"batch"}, {"optimize"}, {"ensemble"}, {"adjoint"}, {"stepper"},
          {"render"}, {"scene", "outputs"}, {"md"}, {"lang"}]


def _layer(package: str) -> int:
    return next(i for i, group in enumerate(LAYERS) if package in group)


def package_graph(root: Path = LANG.parent) -> dict[str, dict[str, list[str]]]:
    """simrun package -> {package it imports: ["file:line", ...]}, in functions too."""
    graph: dict[str, dict[str, list[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts == ("__init__",):
            continue
        module = ".".join(("simrun",) + (parts[:-1] if parts[-1] == "__init__" else parts))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, module, path.name == "__init__.py", "simrun."):
                dest = target.split(".")[1]
                if dest != parts[0]:
                    seen = graph.setdefault(parts[0], {}).setdefault(dest, [])
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    if where not in seen:
                        seen.append(where)
    return graph


def test_simrun_packages_import_only_downward():
    graph = package_graph()
    known = set().union(*LAYERS)
    assert set(graph) <= known, f"add {set(graph) - known} to LAYERS"
    upward = [f"{a} -> {b}: {', '.join(where)}" for a, edges in graph.items()
              for b, where in edges.items()
              if b in known and _layer(b) < _layer(a)]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)
