"""ti.func calls are inlined: arguments are copied (pass by value), returns become values."""

from __future__ import annotations

import ast
import inspect

from .. import builtins as B
from ..ir import builder
from ..ir.nodes import Assign, If, VarRef
from ..matrix import Matrix
from ..types import DType, MatrixType, template, to_dtype
from .context import LOWERERS, is_dynamic
from .source import get_source, signature_of


def _contains_return(stmts) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def _ends_with_return(stmts) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


def inline_call(lw, func, args, kwargs, node):
    pyfunc = func.pyfunc
    if getattr(func, "bound_self", None) is not None:
        args = [func.bound_self] + list(args)
    key = pyfunc
    if key in lw.func_stack:
        raise lw.error(f"ti.func '{pyfunc.__name__}' calls itself; recursion is not supported "
                       "in kernels (write a loop instead)", node)
    if len(lw.func_stack) > 64:
        raise lw.error("ti.func calls are nested more than 64 deep", node)
    src = get_source(pyfunc)
    sig = signature_of(pyfunc)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise lw.error(f"calling ti.func '{pyfunc.__name__}': {exc}", node) from None
    bound.apply_defaults()
    scope: dict = {}
    # the caller's own class lowers the body: this file sits below lower.py, which imports it
    sub = type(lw)(lw.em, src, scope, lw.func_stack + (key,))
    for name, value in bound.arguments.items():
        ann = sig.parameters[name].annotation
        if ann is not inspect.Parameter.empty and (ann is template or isinstance(ann, template)):
            scope[name] = value
            continue
        if isinstance(ann, DType) or ann in (float, int):
            value = B.cast(value, to_dtype(ann))
        elif isinstance(ann, MatrixType):
            value = ann(value.entries() if isinstance(value, Matrix) else value)
        if is_dynamic(value):
            sub.define(name, value, fresh=True)
        else:
            scope[name] = value
    ret_ann = sig.return_annotation
    result = _run(sub, list(src.tree.body), ret_ann)
    return result


def _run(sub, stmts, ret_ann, out=None):
    """Lower stmts; returns the function's value. `out` holds the result variables."""
    out = out if out is not None else {}
    for idx, s in enumerate(stmts):
        sub.em.span = sub.src.span(s)
        rest = stmts[idx + 1:]
        if isinstance(s, ast.Return):
            if rest and not all(isinstance(r, ast.Pass) for r in rest):
                raise sub.error("code after `return` in a ti.func is unreachable", rest[0])
            value = sub.expr(s.value) if s.value is not None else None
            return _deliver(sub, value, ret_ann, out)
        if isinstance(s, ast.If) and _contains_return([s]):
            cond = sub.expr(s.test)
            then = s.body + ([] if _ends_with_return(s.body) else rest)
            orelse = s.orelse + ([] if _ends_with_return(s.orelse) else rest)
            if not is_dynamic(cond):
                return _run(sub, then if cond else orelse, ret_ann, out)
            out["force"] = True  # both branches must write the same result variables
            sub.em.blocks.append([])
            sub.scopes.append({})
            _run(sub, then, ret_ann, out)
            sub.scopes.pop()
            then_block = sub.em.blocks.pop()
            sub.em.blocks.append([])
            sub.scopes.append({})
            _run(sub, orelse, ret_ann, out)
            sub.scopes.pop()
            else_block = sub.em.blocks.pop()
            sub.em.emit(If(builder.as_expr(cond), then_block, else_block))
            return _result(out)
        if isinstance(s, (ast.For, ast.While)) and _contains_return([s]):
            raise sub.error("`return` inside a loop of a ti.func is not supported; set a "
                            "variable and `break` instead", s)
        sub.stmt(s)
    return _result(out) if out else None


def _spec(value):
    """Structure of a return value: scalars, matrices and tuples of them."""
    if isinstance(value, tuple):
        return ("tuple", [_spec(v) for v in value])
    if isinstance(value, Matrix):
        return ("matrix", value.n, value.m, value.is_vector)
    if is_dynamic(value):
        return ("scalar",)
    return ("static", value)


def _flatten(value, keep_static: bool = False) -> list:
    if isinstance(value, tuple):
        return [x for v in value for x in _flatten(v, keep_static)]
    if isinstance(value, Matrix):
        return value.entries()
    return [value] if is_dynamic(value) or keep_static else []


def _materialized(spec):
    """The spec once every compile-time value is stored in a variable too."""
    if spec[0] == "tuple":
        return ("tuple", [_materialized(s) for s in spec[1]])
    return ("scalar",) if spec[0] == "static" else spec


def _unflatten(spec, refs: list):
    kind = spec[0]
    if kind == "tuple":
        return tuple(_unflatten(s, refs) for s in spec[1])
    if kind == "static":
        return spec[1]
    if kind == "scalar":
        return refs.pop(0)
    _, n, m, vec = spec
    out = Matrix.__new__(Matrix)
    out.rows = [[refs.pop(0) for _ in range(m)] for _ in range(n)]
    out.is_vector = vec
    return out


def _deliver(sub, value, ret_ann, out):
    if value is None:
        return None
    if isinstance(ret_ann, DType) or ret_ann in (float, int):
        value = B.cast(value, to_dtype(ret_ann))
    elif isinstance(ret_ann, MatrixType):
        value = ret_ann(value.entries() if isinstance(value, Matrix) else value)
    if isinstance(value, list) and value and all(isinstance(r, (list, tuple)) for r in value):
        value = Matrix(value)  # a nested list is a matrix (DiffTaichi's zero_matrix())
    elif isinstance(value, list):
        value = tuple(value)
    spec = _spec(value)
    if "vars" not in out:
        if spec[0] == "static" and not out.get("force"):
            return value
        spec = _materialized(spec)
        out["vars"] = [sub.em.fresh("ret", builder.as_expr(e).dtype)
                       for e in _flatten(value, True)]
        out["spec"] = spec
    for var, e in zip(out["vars"], _flatten(value, True)):
        sub.em.emit(Assign(var, builder.cast(builder.as_expr(e), var.dtype)))
    return _result(out)


def _result(out):
    if "vars" not in out:
        return None
    return _unflatten(out["spec"], [VarRef(v) for v in out["vars"]])


class Func:
    """@ti.func: inlined into the calling kernel."""

    def __init__(self, pyfunc, bound_self=None):
        self.pyfunc = pyfunc
        self.bound_self = bound_self
        self.is_bound_func = bound_self is not None

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return Func(self.pyfunc, obj)

    def __call__(self, *args, **kwargs):
        if not LOWERERS:
            raise RuntimeError(f"ti.func '{self.pyfunc.__name__}' can only be called from a "
                               "kernel or another ti.func")
        lw, node = LOWERERS[-1]
        return inline_call(lw, self, list(args), kwargs, node)
