"""Source of user functions: AST with real file line numbers, plus globals and closure values."""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import os
import textwrap
import weakref
from collections import ChainMap
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


@functools.lru_cache(maxsize=64)
def _module_defs(file: str, mtime: float) -> dict:
    """{first line (decorator or def): FunctionDef} for every function in a source file."""
    linecache.checkcache(file)
    tree = ast.parse("".join(linecache.getlines(file)))
    return {min([n.lineno] + [d.lineno for d in n.decorator_list]): n for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _find_def(func):
    """(file, FunctionDef) from one parse of the whole file, cached: much cheaper than
    inspect.getsourcelines, which tokenizes the file from the top on every call."""
    file = func.__code__.co_filename
    try:
        defs = _module_defs(file, os.stat(file).st_mtime)
    except (OSError, SyntaxError, ValueError):
        return None
    node = defs.get(func.__code__.co_firstlineno)
    return (file, node) if node is not None and node.name == func.__name__ else None


def get_source(func) -> FuncSource:
    found = _find_def(func) if hasattr(func, "__code__") else None
    if found is not None:
        (file, tree), first_line = found, func.__code__.co_firstlineno
    else:
        try:
            file = inspect.getsourcefile(func) or "<unknown>"
            raw, first_line = inspect.getsourcelines(func)
        except (OSError, TypeError) as exc:
            raise CompileError(
                f"cannot read the source of '{func.__qualname__}': kernels must be defined in a "
                "file (not typed into an interactive prompt)"
            ) from exc
        tree = _parse(file, first_line, textwrap.dedent("".join(raw)))
    lines = "".join(linecache.getlines(file)).splitlines()
    closure = {}
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    return FuncSource(func.__name__, file, tree, lines, func.__globals__, closure, first_line)


# ------------------------------------------------------------------ annotations
# With `from __future__ import annotations` (PEP 563) every annotation is a string such as
# "ti.f32" or "ti.types.vector(3, ti.f32)". They are evaluated once, on first use, in the
# function's closure, the locals of the scope that applied the decorator (a kernel built
# inside a function may name that function's locals only in annotations, which then are not
# closure variables) and the module globals, in that order.
_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_DECORATION_LOCALS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _has_string_annotations(func) -> bool:
    anns = getattr(func, "__annotations__", None) or {}
    return any(isinstance(a, str) for a in anns.values())


def remember_decoration_scope(func, frame) -> None:
    """Called by @ti.kernel / @ti.func with the decorating frame; keeps its locals only when
    string annotations may need them (a module-level decorator has no locals of its own)."""
    if frame is None or not _has_string_annotations(func):
        return
    scopes = []
    while frame is not None and frame.f_locals is not frame.f_globals:
        scopes.append(dict(frame.f_locals))
        # a class body (@ti.data_oriented methods): the function around the class too
        if "__module__" in frame.f_locals and "__qualname__" in frame.f_locals:
            frame = frame.f_back
            continue
        break
    if scopes:
        try:
            _DECORATION_LOCALS[func] = dict(ChainMap(*scopes))
        except TypeError:
            pass


def _annotation_span(func, name: str | None):
    """file:line of the annotation of parameter `name` (None: the return annotation)."""
    try:
        src = get_source(func)
    except CompileError:
        return None
    args = src.tree.args
    node = src.tree.returns if name is None else next(
        (a.annotation or a for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                     args.vararg, args.kwarg] if a is not None and a.arg == name),
        None)  # an unannotated parameter: the parameter itself
    return src.span(node if node is not None else src.tree)


def _evaluate(func, text: str, name: str | None, namespace):
    try:
        return eval(text, func.__globals__, namespace)  # noqa: S307 (the user's own source)
    except Exception as exc:
        what = f"parameter '{name}'" if name is not None else "return value"
        raise CompileError(
            f"cannot evaluate the annotation {text!r} of the {what} of "
            f"'{func.__qualname__}' ({type(exc).__name__}: {exc}); with `from __future__ "
            "import annotations` annotations are evaluated in the module's globals and the "
            "function's closure: define the names they use there",
            _annotation_span(func, name),
        ) from None


def signature_of(func) -> inspect.Signature:
    """inspect.signature with string annotations evaluated (see above); cached per function."""
    try:
        cached = _SIGNATURES.get(func)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    sig = inspect.signature(func)
    if _has_string_annotations(func):
        closure = {}
        if func.__closure__:
            for cname, cell in zip(func.__code__.co_freevars, func.__closure__):
                try:
                    closure[cname] = cell.cell_contents
                except ValueError:
                    pass
        namespace = ChainMap(closure, _DECORATION_LOCALS.get(func, {}))
        params = []
        for pname, p in sig.parameters.items():
            if isinstance(p.annotation, str):
                p = p.replace(annotation=_evaluate(func, p.annotation, pname, namespace))
            params.append(p)
        ret = sig.return_annotation
        if isinstance(ret, str):
            ret = _evaluate(func, ret, None, namespace)
        sig = sig.replace(parameters=params, return_annotation=ret)
    try:
        _SIGNATURES[func] = sig
    except TypeError:
        pass
    return sig
