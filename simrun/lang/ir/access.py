"""What each statement reads and writes: the locals, expressions and fields it touches.

Every layer above the IR asks these questions (passes for liveness, autodiff for what to save
and replay, codegen for slots and schedules), so they live here, below all of them.
"""

from __future__ import annotations

import operator

from . import nodes
from .nodes import expr_vars, walk


def stmt_fields(s):
    """The field a statement loads from, stores to or updates atomically."""
    if isinstance(s, (nodes.Load, nodes.Store, nodes.Atomic)):
        yield s.field


def stmt_exprs(s):
    """The expressions a statement evaluates itself (not those of its nested bodies)."""
    if isinstance(s, nodes.Assign):
        yield s.value
    elif isinstance(s, (nodes.Load,)):
        yield from s.indices
    elif isinstance(s, nodes.Store):
        yield from s.indices
        yield s.value
    elif isinstance(s, nodes.Atomic):
        yield from s.indices
        yield s.value
    elif isinstance(s, nodes.If):
        yield s.cond
    elif isinstance(s, nodes.For):
        yield s.begin
        yield s.end
    elif isinstance(s, nodes.AssertStmt):
        yield s.cond
    elif isinstance(s, nodes.Print):
        yield from (x for x in s.items if not isinstance(x, str))
    elif isinstance(s, nodes.Return):
        yield from s.values


def stmt_reads(s):
    """The locals a statement reads (a push reads the local it saves)."""
    for e in stmt_exprs(s):
        yield from expr_vars(e)
    if isinstance(s, nodes.StackPush):
        yield s.var


def stmt_writes(s):
    """The locals a statement assigns."""
    if isinstance(s, (nodes.Assign, nodes.Load, nodes.Random, nodes.StackPop)):
        yield s.var
    elif isinstance(s, nodes.Atomic) and s.result is not None:
        yield s.result
    elif isinstance(s, nodes.For):
        yield s.var


def write_counts(body) -> dict:
    """How many statements of body (nested bodies included) write each local."""
    counts: dict = {}
    for s in walk(body):
        for v in stmt_writes(s):
            counts[v] = counts.get(v, 0) + 1
    return counts


def task_locals(task) -> set:
    """Every local a task reads or writes, its loop variables, bounds and index expressions
    included."""
    out = set(task.index_vars) | ({task.var} if task.var is not None else set())
    for s in walk(task.body):
        out.update(stmt_reads(s))
        out.update(stmt_writes(s))
    for e in (task.begin, task.end, *task.index_exprs):
        if e is not None:
            out.update(expr_vars(e))
    return out


def cell_offset(index, shape: tuple, cell_strides: tuple | None, mul=operator.mul,
                add=operator.add, zero=0):
    """Cells from a field's first to the one at ``index``: sum of index_k * cell_strides[k]
    when stored in Taichi's nesting order, row-major (Horner) otherwise. The one formula of
    both Python scope (ints) and codegen (``mul``/``add`` emit it; strides come as ints)."""
    offset = zero
    for k, i in enumerate(index):
        if cell_strides is not None:
            term = mul(i, cell_strides[k])
            offset = add(offset, term) if k else term
        else:
            offset = add(mul(offset, shape[k]), i) if k else i
    return offset
