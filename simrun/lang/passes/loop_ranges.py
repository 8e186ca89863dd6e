"""A check, not a transform: refuse a field access that a parallel loop makes on every
iteration at the loop's own index (plus a constant) and that falls outside the field for
some of the loop's indices.

Why: without ``debug`` no index is checked, so such an access reads or writes the memory
next to the field at every launch and yields a wrong number silently (a loop over a
32 x 32 target reading a 24 x 24 height field). Where the loop's range and the field's
shape are compiled in, this is decidable for the accesses every iteration makes, so it is
an error at compile time, at the access's line. Anything less certain (an access under an
``if``, an index computed otherwise) is left to ``debug``'s run-time checks: the pass
never refuses a kernel that could stay in range.

Only an access past the whole field is refused (see _check_access). Pre: frontend IR. Post: the IR unchanged.
"""

from __future__ import annotations

import math

from ..errors import FieldRangeError
from ..ir.nodes import (
    AssertStmt,
    Assign,
    Atomic,
    Break,
    Const,
    Continue,
    For,
    If,
    KernelIR,
    Load,
    OpExpr,
    Return,
    Store,
    Task,
    VarRef,
    While,
    walk,
)
from ..ir.ops import Op

_ACCESS = {Load: "reads", Store: "writes", Atomic: "updates"}
_EXITS = (Break, Continue, Return, AssertStmt)


def run(kir: KernelIR) -> KernelIR:
    for task in kir.tasks:
        if task.kind == "range":
            _check_task(task, kir.name)
    return kir


def _loop_ranges(task: Task) -> dict | None:
    """{index Var: (first, last)} of a range task whose bounds are constants, None else."""
    if task.grid:
        pairs = zip(task.index_vars, task.grid)
        bounds = [(v, lo, extent) for v, (lo, extent) in pairs]
        if not all(isinstance(lo, Const) and isinstance(n, Const) for _, lo, n in bounds):
            return None
        return {v: (lo.value, lo.value + n.value - 1) for v, lo, n in bounds}
    if isinstance(task.begin, Const) and isinstance(task.end, Const) and task.var is not None:
        return {task.var: (task.begin.value, task.end.value - 1)}
    return None


def _check_task(task: Task, kernel: str) -> None:
    ranges = _loop_ranges(task)
    if not ranges or any(last < first for first, last in ranges.values()):
        return  # bounds known only at run time, or a loop that runs no iteration
    head = len(task.index_exprs)  # ndrange: the body starts by assigning each index
    assigned = [s.var for s in walk(task.body[head:]) if isinstance(s, Assign)]
    ranges = {v: r for v, r in ranges.items() if v not in assigned}  # reassigned: not known
    for stmt in task.body[head:]:
        if isinstance(stmt, _EXITS) or isinstance(stmt, (If, For, While)) and \
                any(isinstance(s, _EXITS) for s in walk([stmt])):
            return  # what follows may be skipped for some iterations
        if type(stmt) in _ACCESS and getattr(stmt.field, "shape", None) is not None:
            _check_access(stmt, ranges, task, kernel)


def _index_range(index, ranges: dict) -> tuple[int, int, str, object] | None:
    """(smallest, largest, how, loop index Var or None) of an index over the loop: a
    constant, or a loop index plus or minus a constant; None for anything else."""
    if isinstance(index, Const) and isinstance(index.value, int):
        return index.value, index.value, str(index.value), None
    if isinstance(index, VarRef) and index.var in ranges:
        first, last = ranges[index.var]
        return first, last, index.var.name, index.var
    if isinstance(index, OpExpr) and index.op in (Op.ADD, Op.SUB) and len(index.args) == 2:
        a, b = index.args
        if index.op is Op.ADD and isinstance(a, Const):
            a, b = b, a
        if isinstance(a, VarRef) and a.var in ranges and isinstance(b, Const) \
                and isinstance(b.value, int):
            shift = b.value if index.op is Op.ADD else -b.value
            first, last = ranges[a.var]
            how = f"{a.var.name} {'+-'[shift < 0]} {abs(shift)}"
            return first + shift, last + shift, how, a.var
    return None


def _check_access(stmt, ranges: dict, task: Task, kernel: str) -> None:
    """Refuse the access where, over the loop, it reaches a cell before the field's first or
    past its last. An index past one axis but inside the field is left alone: Taichi's
    nesting makes some of those meaningful (tests/test_lang_snode_axes.py), and debug's
    checks report them."""
    field = stmt.field
    shape = tuple(field.shape)
    if len(stmt.indices) != len(shape) or not shape or getattr(field, "runtime_rows", False):
        return  # a row count only known at run time
    known = [_index_range(index, ranges) for index in stmt.indices]
    if any(k is None for k in known):
        return
    loop_vars = [k[3] for k in known if k[3] is not None]
    if len(set(loop_vars)) != len(loop_vars):
        return  # one loop index on two axes: not every combination is visited
    strides = getattr(field, "cell_strides", None) or tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))
    first = sum(k[0] * s for k, s in zip(known, strides))
    last = sum(k[1] * s for k, s in zip(known, strides))
    cells = math.prod(shape)
    if 0 <= first and last < cells:
        return
    at = tuple(k[1] if last >= cells else k[0] for k in known)
    where = "past its last cell" if last >= cells else "before its first cell"
    line = f" at line {task.span.line}" if task.span else ""
    loop = ", ".join(f"{v.name} in {a}..{b}" for v, (a, b) in ranges.items())
    index = ", ".join(k[2] for k in known)
    raise FieldRangeError(
        f"on every iteration of the loop{line} ({loop}) this line {_ACCESS[type(stmt)]} field "
        f"'{field.name}' of shape {shape} at [{index}], which at {list(at)} lies {where}: "
        "a wrong number without debug. Loop over the smaller field, give the fields one "
        "shape (a scene's grids: one `shape:`), or guard the access with an `if`",
        stmt.span, kernel)
