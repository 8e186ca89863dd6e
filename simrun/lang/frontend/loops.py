"""For loops: static unrolling, serial counted loops, and the parallel outermost loop."""

from __future__ import annotations

import ast
import itertools

from .. import builtins as B
from ..fields import Field
from ..ir import builder
from ..ir.nodes import Assign, Const, For, Task, VarRef
from ..matrix import Matrix
from ..types import DType, i32, i64
from . import special
from .context import LocalMatrix, is_dynamic


def _iter_value(lw, node):
    """Evaluate a loop's iterable; (is_static, value)."""
    it = node.iter
    if isinstance(it, ast.Call):
        func = lw.expr(it.func)
        if func is special.static:
            return True, lw.expr(it.args[0])
    return False, lw.expr(it)


def _ranges(lw, value, node):
    """Normalise range / ndrange / grouped / field iteration to ([(lo, hi)], grouped, step);
    only a one-dimensional range may have a step other than 1."""
    grouped = False
    if isinstance(value, special.Grouped):
        grouped, value = True, value.inner
    if isinstance(value, special.KRange):
        return [(value.lo, value.hi)], grouped, value.step
    if isinstance(value, special.NDRange):
        return list(value.bounds), grouped, 1
    if isinstance(value, Field) or hasattr(value, "shape") and hasattr(value, "_require_placed"):
        return [(0, n) for n in value.shape], grouped, 1
    if isinstance(value, range):
        return [(value.start, value.stop)], grouped, value.step
    raise lw.error("kernels loop over range(...), ti.ndrange(...), ti.grouped(...), a field, "
                   "or ti.static(...) of a Python iterable", node)


def index_dtype(bounds) -> DType:
    """A loop variable's type: i32 as in Taichi, but i64 where a bound is 64-bit (or u32), so
    range(2**32 + 3) runs 2**32 + 3 iterations instead of wrapping to 3."""
    for bound in bounds:
        for v in bound:
            dt = builder.as_expr(v).dtype
            if dt.is_int and (dt.bits > 32 or dt.bits == 32 and dt.kind == "u"):
                return i64
    return i32


def _trip_count(lo, hi, step: int, dt: DType):
    """len(range(lo, hi, step)), as a constant when both bounds are."""
    lo, hi = builder.cast(lo, dt), builder.cast(hi, dt)
    if isinstance(lo, Const) and isinstance(hi, Const):
        return builder.const(len(range(lo.value, hi.value, step)), dt)
    span = hi - lo if step > 0 else lo - hi
    return B.max((span + (abs(step) - 1)) // abs(step), 0)


def _fixed(lw, lo, dt: DType):
    """The start of a stepped range, copied once: the body may reassign what it reads."""
    lo = builder.cast(lo, dt)
    return lo if isinstance(lo, Const) else lw.materialize(lo)


def _stepped_index(counter, lo, step: int):
    """The user's loop index for trip `counter` of range(lo, hi, step)."""
    return lo + VarRef(counter) * step


def _targets(lw, node, n_dims: int, grouped: bool):
    t = node.target
    if grouped:
        if not isinstance(t, ast.Name):
            raise lw.error("a ti.grouped loop binds one name (a vector of indices)", node)
        return [t.id]
    names = [e.id for e in t.elts] if isinstance(t, ast.Tuple) else [t.id]
    if len(names) != n_dims:
        raise lw.error(f"the loop iterates over {n_dims} dimension(s) but binds "
                       f"{len(names)} name(s)", node)
    return names


def _bind(lw, scope, names, grouped, vars_):
    if grouped:
        scope[names[0]] = LocalMatrix(Matrix([0] * len(vars_)), list(vars_))
    else:
        for n, v in zip(names, vars_):
            scope[n] = v


def is_parallel_candidate(lw, node) -> bool:
    it = node.iter
    if isinstance(it, ast.Call):
        func = lw.expr(it.func)
        if func is special.static:
            return False
    if lw.em.pending_serialize:
        return False
    return True


def plan_parallel_for(lw, node):
    """Evaluate the outermost loop's bounds while the kernel's serial block is still open,
    so that loads in them (`range(n[None])`) land in a serial task before the loop's."""
    _, value = _iter_value(lw, node)
    bounds, grouped, step = _ranges(lw, value, node)
    names = _targets(lw, node, len(bounds), grouped)
    dt = index_dtype(bounds)
    bounds = [(builder.cast(lo, dt), builder.cast(hi, dt)) for lo, hi in bounds]
    if step != 1:
        bounds = [(_fixed(lw, bounds[0][0], dt), bounds[0][1])]
    return bounds, grouped, step, names, dt


def lower_parallel_for(lw, node, plan) -> Task:
    em = lw.em
    bounds, grouped, step, names, dt = plan
    em.loop_kinds.append("parallel")
    em.blocks.append([])
    scope: dict = {}
    try:
        if len(bounds) == 1 and not grouped and step == 1:
            var = em.fresh(names[0], dt)
            begin, end = bounds[0]
            scope[names[0]] = var
            idx_vars, idx_exprs = [var], []
        else:
            var = em.fresh("flat", dt)
            begin = builder.const(0, dt)
            extents = [hi - lo for lo, hi in bounds] if step == 1 else \
                [_trip_count(bounds[0][0], bounds[0][1], step, dt)]
            end = extents[0] if extents else builder.const(1, dt)  # ti.grouped of a 0-D field
            for e in extents[1:]:
                end = end * e
            idx_vars, idx_exprs = [], []
            stride = None
            for d in reversed(range(len(bounds))):
                flat = VarRef(var)
                q = flat if stride is None else flat // stride
                if d > 0:
                    q = q % extents[d]
                iv = em.fresh(names[0] if grouped else names[d], dt)
                value = bounds[d][0] + q if step == 1 else _stepped_index(var, bounds[d][0], step)
                em.emit(Assign(iv, value))
                idx_vars.insert(0, iv)
                idx_exprs.insert(0, value)
                stride = extents[d] if stride is None else stride * extents[d]
            _bind(lw, scope, names, grouped, idx_vars)
        lw.scopes.append(scope)
        try:
            lw.body(node.body)
        finally:
            lw.scopes.pop()
    finally:
        em.loop_kinds.pop()
    body = em.blocks.pop()
    ndrange = len(idx_vars) > 1
    return Task("range", body, var, begin, end, span=lw.src.span(node),
                index_vars=tuple(idx_vars),
                grid=tuple((lo, hi - lo) for lo, hi in bounds) if ndrange else (),
                index_exprs=tuple(idx_exprs) if ndrange else ())


def lower_for(lw, node) -> None:
    if node.orelse:
        raise lw.error("for/else is not supported in kernels", node)
    is_static, value = _iter_value(lw, node)
    if is_static:
        _unroll(lw, node, value)
        return
    lw.em.pending_serialize = False
    bounds, grouped, step = _ranges(lw, value, node)
    names = _targets(lw, node, len(bounds), grouped)
    em = lw.em
    span = lw.src.span(node)
    dt = index_dtype(bounds)
    if step != 1:  # a counted loop: for k in range(trips): i = lo + k * step
        lo = _fixed(lw, bounds[0][0], dt)
        bounds = [(0, _trip_count(lo, bounds[0][1], step, dt))]
    vars_ = [em.fresh("idx" if grouped else names[d], dt) for d in range(len(bounds))]
    counters = vars_ if step == 1 else [em.fresh("trip", dt)]
    scope: dict = {}
    _bind(lw, scope, names, grouped, vars_)
    em.loop_kinds.append("serial")
    try:
        body = lw.block(node.body, scope)
    finally:
        em.loop_kinds.pop()
    if step != 1:
        body.insert(0, Assign(vars_[0], _stepped_index(counters[0], lo, step), span=span))
    for d in reversed(range(len(bounds))):
        lo_d, hi_d = bounds[d]
        body = [For(counters[d], builder.cast(lo_d, dt), builder.cast(hi_d, dt), body,
                    span=span)]
    for stmt in body:  # one For, or a ti.grouped 0-D field's body, run once
        em.emit(stmt)


def _static_items(lw, value, node):
    if isinstance(value, special.Grouped):
        bounds, _, _ = _ranges(lw, value.inner, node)
        return [Matrix(list(p)) for p in itertools.product(*[range(_int(lw, lo, node),
                _int(lw, hi, node)) for lo, hi in bounds])]
    if isinstance(value, special.KRange):
        return list(range(_int(lw, value.lo, node), _int(lw, value.hi, node), value.step))
    if isinstance(value, special.NDRange):
        return list(itertools.product(*[range(_int(lw, lo, node), _int(lw, hi, node))
                                        for lo, hi in value.bounds]))
    if isinstance(value, Matrix):
        return list(value)
    try:
        return list(value)
    except TypeError:
        raise lw.error("ti.static(...) in a for loop needs a Python iterable", node) from None


def _int(lw, v, node) -> int:
    if is_dynamic(v):
        if isinstance(v, Const):
            return int(v.value)
        raise lw.error("ti.static loop bounds must be compile-time constants", node)
    return int(v)


def _unroll(lw, node, value) -> None:
    items = _static_items(lw, value, node)
    t = node.target
    for item in items:
        scope: dict = {}
        if isinstance(t, ast.Name):
            scope[t.id] = item
        else:
            vals = list(item.entries()) if isinstance(item, Matrix) else list(item)
            if len(vals) != len(t.elts):
                raise lw.error("cannot unpack the static loop item", node)
            for e, v in zip(t.elts, vals):
                scope[e.id] = v
        lw.scopes.append(scope)
        try:
            for s in node.body:
                if isinstance(s, (ast.Break, ast.Continue)):
                    raise lw.error("break/continue in a ti.static loop is not supported", s)
                lw.stmt(s)
        finally:
            lw.scopes.pop()
