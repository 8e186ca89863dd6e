"""Reduction patterns in the IR: `v += e` on locals, result-free atomic adds (or maxima,
minima) into 0-d fields.

Autodiff (adjoints of accumulations), passes (hoisting atomics out of loops) and codegen
(per-chunk partial sums, per-row sums) all recognise the same shapes, from here.
"""

from __future__ import annotations

from . import builder
from .access import stmt_reads, stmt_writes
from .nodes import Assign, Atomic, Const, Load, OpExpr, Store, VarRef, expr_vars, walk
from .ops import Op


def index_key(e):
    """A structural identity for an index expression."""
    if isinstance(e, Const):
        return ("c", e.value, e.dtype)
    if isinstance(e, VarRef):
        return ("v", id(e.var))
    if isinstance(e, OpExpr):
        return (e.op, e.dtype) + tuple(index_key(a) for a in e.args)
    return ("?", id(e))


def hoistable_fields(body) -> set:
    """Fields that body only ever touches with result-free atomic add/sub."""
    touched, blocked = set(), set()
    for s in walk(body):
        if isinstance(s, (Load, Store)):
            blocked.add(id(s.field))
        elif isinstance(s, Atomic):
            touched.add(id(s.field))
            if s.result is not None or s.op not in (Op.ADD, Op.SUB):
                blocked.add(id(s.field))
    return touched - blocked


def accumulation(s):
    """The increment e when s is `v = v + e` (what `v += e` lowers to), `v = e + v` or
    `v = v - e`, else None."""
    v = _uncast(s.value)
    if not (isinstance(v, OpExpr) and v.op in (Op.ADD, Op.SUB)):
        return None
    own = [isinstance(_uncast(a), VarRef) and _uncast(a).var is s.var for a in v.args]
    if own[0]:
        delta = builder.cast(v.args[1], s.var.dtype)
        return delta if v.op is Op.ADD else -delta
    if own[1] and v.op is Op.ADD:
        return builder.cast(v.args[0], s.var.dtype)
    return None


def _uncast(e):
    return e.args[0] if isinstance(e, OpExpr) and e.op is Op.CAST else e


REDUCTION_KINDS = {Op.ADD: Op.ADD, Op.SUB: Op.ADD, Op.MAX: Op.MAX, Op.MIN: Op.MIN}


def field_reductions(task) -> dict:
    """(id(field), comp) -> (field, kind) for 0-d fields the task only updates one way:
    adds (`s[None] += e`, kind ADD), or only ti.atomic_max (MAX) or only atomic_min (MIN),
    with the result unused."""
    accessed_other = set()
    candidates: dict = {}
    for s in walk(task.body):
        if isinstance(s, Atomic) and s.op in REDUCTION_KINDS and s.result is None \
                and s.field.shape == ():
            key, kind = (id(s.field), s.comp), REDUCTION_KINDS[s.op]
            if candidates.setdefault(key, (s.field, kind))[1] is not kind:
                accessed_other.add(id(s.field))  # mixed kinds: plain atomics
        elif isinstance(s, (Load, Store, Atomic)):
            accessed_other.add(id(s.field))
    return {k: fk for k, fk in candidates.items() if k[0] not in accessed_other}


def var_reductions(task, var_slot) -> list:
    """Top-level locals touched only as `v += e` in this loop, in a fixed order."""
    accumulated, disqualified = [], set()
    for s in walk(task.body):
        delta = accumulation(s) if isinstance(s, Assign) else None
        if delta is not None and s.var in var_slot:
            if s.var not in accumulated:
                accumulated.append(s.var)
            disqualified |= set(expr_vars(delta))
        else:
            disqualified |= set(stmt_reads(s)) | set(stmt_writes(s))
    for e in (task.begin, task.end):
        disqualified |= set(expr_vars(e))
    return [v for v in accumulated if v not in disqualified]
