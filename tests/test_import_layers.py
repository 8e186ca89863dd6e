"""simrun.lang's packages import each other without a cycle, counting imports inside functions.

Every import statement in simrun/lang is read with ast (module level, inside functions and
methods alike). A unit is a subpackage (ir, passes, autodiff, codegen, runtime, frontend, gui)
or a top-level module (types, builtins, matrix, fields, api, ...); an import from one unit of
another is an edge. The graph must have no cycle, so each unit only uses the ones below it.
No module of simrun may reach itself through imports either, package __init__s counted
(`test_no_import_circle_between_modules`), and an import inside a function must say in a
comment why it is lazy: start-up time or an optional dependency
(`test_every_import_inside_a_function_says_why`).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
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


def modules_of(root: Path = SIMRUN, package: str = "simrun") -> dict[str, Path]:
    """Every module under `root`, a package under its own name (its __init__.py)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join([package, *parts])] = path
    return modules


def imported_modules(node: ast.AST, module: str, is_package: bool, modules) -> set[str]:
    """The modules an import statement runs: each one it names (`from p import m` names p.m
    where that is a module, else p) and the packages above it, except the importer's own
    packages, which have started already (a sibling module is no use of their names)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = _targets(node, module, is_package, "")[0]
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                 for a in node.names]
    else:
        return set()
    parts = module.split(".")
    own = {".".join(parts[:i]) for i in range(1, len(parts) + (1 if is_package else 0))}
    found = set()
    for name in names:
        steps = name.split(".")
        for i in range(1, len(steps) + 1):
            step = ".".join(steps[:i])
            if step in modules and step != module and (step == name or step not in own):
                found.add(step)
    return found


def module_graph(root: Path = SIMRUN, package: str = "simrun") -> dict[str, dict[str, list[str]]]:
    """module -> {module it runs: ["file:line", ...]}, for every module under `root` (packages
    too), counting imports inside functions."""
    graph: dict[str, dict[str, list[str]]] = {}
    modules = modules_of(root, package)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in imported_modules(node, module, path.name == "__init__.py", modules):
                where = f"{path.relative_to(root.parent)}:{node.lineno}"
                seen = graph.setdefault(module, {}).setdefault(target, [])
                if where not in seen:
                    seen.append(where)
    return graph


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


def describe_circles(graph: dict[str, dict[str, list[str]]]) -> str:
    """Each circle as one cycle through it, with the file:line of each of its imports."""
    text = []
    for circle in circles(graph):
        cycle = find_cycle({a: {b: w for b, w in graph.get(a, {}).items() if b in circle}
                            for a in circle}) or []
        text.append("import circle " + " -> ".join(cycle))
        text += [f"  {a} -> {b}: {', '.join(graph[a][b])}" for a, b in zip(cycle, cycle[1:])]
    return "\n".join(text)


def test_no_import_circle_between_modules():
    """No module of simrun reaches itself through imports, counting imports inside functions
    and package __init__s (ARCHITECTURE.md, habit 7: pass the dependency in, or move the
    shared piece into a third file; never an import inside a function)."""
    report = describe_circles(module_graph())
    assert not report, report


def _write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_module_walk_finds_a_circle_inside_a_package(tmp_path):
    """Two modules of one folder that import each other, one of them inside a function."""
    _write_package(tmp_path, {"p/__init__.py": "", "p/x.py": "from pkg.p.y import f\n",
                              "p/y.py": "def f():\n    from pkg.p import x\n"})
    assert find_cycle(module_graph(tmp_path, "pkg")) in (
        ["pkg.p.x", "pkg.p.y", "pkg.p.x"], ["pkg.p.y", "pkg.p.x", "pkg.p.y"])


def test_the_module_walk_counts_a_package_init(tmp_path):
    """A module that reads a name its package's __init__ defines, where that __init__ imports
    the module, is a circle; importing a sibling module through the package is not."""
    _write_package(tmp_path, {"p/__init__.py": "from .x import f\nVERSION = 1\n",
                              "p/x.py": "def f():\n    from pkg.p import VERSION\n"})
    assert describe_circles(module_graph(tmp_path, "pkg")).startswith("import circle ")
    (tmp_path / "p" / "x.py").write_text("from pkg.p import y\n")
    (tmp_path / "p" / "y.py").write_text("")
    assert describe_circles(module_graph(tmp_path, "pkg")) == ""


# A function imports lazily for one of two reasons only, which a comment on the import, or
# on the comments and imports just above it, must name: start-up time, or an optional
# dependency (ARCHITECTURE.md, habit 7). Any other lazy import hides a circle or is needless.
LAZY_REASON = re.compile(r"start-up|optional", re.IGNORECASE)


def _comments(source: str) -> dict[int, str]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def unexplained_lazy_imports(root: Path = SIMRUN) -> list[str]:
    """"file:line: statement" of each import inside a function whose comment gives no reason."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        comments, lines = _comments(source), source.splitlines()
        lazy = {node for scope in ast.walk(ast.parse(source, str(path)))
                if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
                for node in ast.walk(scope) if isinstance(node, (ast.Import, ast.ImportFrom))}
        in_imports = {line for node in lazy for line in range(node.lineno, node.end_lineno + 1)}
        for node in sorted(lazy, key=lambda node: node.lineno):
            line = node.end_lineno
            while line >= 1 and not LAZY_REASON.search(comments.get(line, "")) and (
                    line in in_imports or lines[line - 1].strip() in ("", "#")
                    or lines[line - 1].lstrip().startswith("#")):
                line -= 1
            if line < 1 or not LAZY_REASON.search(comments.get(line, "")):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: "
                             f"{lines[node.lineno - 1].strip()}")
    return found


def test_every_import_inside_a_function_says_why():
    """Move the import to the top of its module; where it must stay lazy, say why in a
    comment: `# start-up: ...` (what it keeps from loading) or `# optional dependency: ...`."""
    found = unexplained_lazy_imports()
    assert not found, "imports inside functions without a reason:\n" + "\n".join(found)


def test_a_lazy_import_needs_a_reason_above_or_beside_it(tmp_path):
    _write_package(tmp_path / "pkg", {
        "bare.py": "def f():\n    import json\n",
        "beside.py": "def f():\n    import json  # start-up: only f writes json\n",
        "above.py": "def f():\n    # optional dependency: pyarrow\n    import pyarrow\n"
                    "    import pyarrow.parquet\n",
        "apart.py": "def f():\n    # start-up: far away\n    x = 1\n    import json\n"})
    found = unexplained_lazy_imports(tmp_path / "pkg")
    assert found == ["pkg/apart.py:4: import json", "pkg/bare.py:2: import json"]


# simrun's packages, top to bottom: each imports only packages below it (ARCHITECTURE.md;
# the KEY grammar and table are simrun.keys, under every job; adjoint never imports ensemble;
# the jobs, one library function each, sit above what they run and below batch, api and cli).
# scene and outputs share a layer: they import each other today (scene files and run folders)
# kernels/ and scenes/ are the shipped examples: user code on top, which nothing in simrun imports
LAYERS = [{"kernels", "scenes"}, {"cli"}, {"api"}, {"batch"}, {"jobs"}, {"optimize"}, {"ensemble"}, {"adjoint"}, {"keys"}, {"stepper"},
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
