"""Source of user functions: AST with real file line numbers, plus globals and closure values."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import CompileError, Span


@dataclass
class FuncSource:
    name: str
    file: str
    tree: ast.FunctionDef
    lines: list
    globals: dict
    closure: dict
    first_line: int

    def span(self, node) -> Span:
        line = getattr(node, "lineno", self.first_line)
        col = getattr(node, "col_offset", 0)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Span(self.file, line, col, text)

    def lookup(self, name: str):
        if name in self.closure:
            return True, self.closure[name]
        if name in self.globals:
            return True, self.globals[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None


@functools.lru_cache(maxsize=None)
def _parse(file: str, first_line: int, text: str) -> ast.FunctionDef:
    tree = ast.parse(text)
    ast.increment_lineno(tree, first_line - 1)
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CompileError("a kernel or ti.func must be a plain `def` function")
    return node


def get_source(func) -> FuncSource:
    try:
        file = inspect.getsourcefile(func) or "<unknown>"
        raw, first_line = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise CompileError(
            f"cannot read the source of '{func.__qualname__}': kernels must be defined in a file "
            "(not typed into an interactive prompt)"
        ) from exc
    text = textwrap.dedent("".join(raw))
    tree = _parse(file, first_line, text)
    try:
        with open(file) as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    closure = {}
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    return FuncSource(func.__name__, file, tree, lines, func.__globals__, closure, first_line)
