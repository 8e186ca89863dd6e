"""Which serial loops may run their iterations in any order: a scatter through a neighbour
row. LLVM cannot see that ``x.grad[nb[i, k + 1]] += ...`` never hits one element twice in
a row's loop, so it keeps the pair gradient's loop scalar; a field flagged
``distinct_rows`` (NeighborList's: row i's entries 1..row[i, 0] are distinct) says so,
and a loop proven to touch its written fields only there, one element per iteration, gets
``llvm.loop.parallel_accesses`` (its field accesses join an access group, statements.py).
The vectoriser then gathers and scatters lane by lane; results change only by the
reassociation the fast-math flags already allow, and the same at any thread count.
"""

from __future__ import annotations

from llvmlite import ir

from ..ir.nodes import Assign, Atomic, Const, For, If, Load, OpExpr, Store, VarRef, walk
from ..ir.ops import Op


class _Distinct(ir.values.MDValue):
    """A ``distinct`` metadata node (llvmlite uniques nodes; access groups must not be)."""

    def descr(self, buf):
        super().descr(buf)
        buf[-2] = "distinct " + buf[-2]

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


def parallel_group(module: ir.Module) -> ir.values.MDValue:
    return _Distinct(module, [], name=str(len(module.metadata)))


def parallel_loop_id(module: ir.Module, group) -> ir.values.MDValue:
    """The latch's ``llvm.loop`` node: its accesses in ``group`` carry no dependence."""
    prop = _Distinct(module, [ir.MetaDataString(module, "llvm.loop.parallel_accesses"),
                              group], name=str(len(module.metadata)))
    loop = _Distinct(module, [], name=str(len(module.metadata)))
    loop.operands = (loop, prop)
    return loop


def _defs(stmts) -> dict:
    """var -> the statements that assign it, anywhere in stmts."""
    out: dict = {}
    for s in walk(stmts):
        var = s.var if isinstance(s, (Assign, Load)) else getattr(s, "result", None)
        if isinstance(s, For):
            var = s.var
        if var is not None:
            out.setdefault(var, []).append(s)
    return out


class _Loop:
    """Symbolic values of a loop's expressions: ("const", v), ("var", var) for values
    fixed during the loop, ("iv",) for the loop variable, ("load", field, indices),
    (op, a, b) for add and sub; None where unknown."""

    def __init__(self, loop: For, task_body: list) -> None:
        self.loop = loop
        self.inner, self.outer = _defs(loop.body), _defs(task_body)
        self.order = {id(s): n for n, s in enumerate(walk(loop.body))}
        self.top = {id(s) for s in loop.body}
        self.written_anywhere = {id(s.field) for s in walk(task_body)
                                 if isinstance(s, (Store, Atomic))}

    def value(self, e, depth: int = 0):
        if depth > 32:
            return None
        if isinstance(e, Const):
            return ("const", e.value)
        if isinstance(e, OpExpr) and e.op in (Op.ADD, Op.SUB) and len(e.args) == 2:
            a, b = (self.value(x, depth + 1) for x in e.args)
            return None if a is None or b is None else (e.op.name.lower(), a, b)
        if isinstance(e, VarRef):
            return self.var(e.var, depth + 1)
        return None

    def var(self, v, depth: int):
        if v is self.loop.var:
            return ("iv",) if v not in self.inner else None
        if v in self.inner:
            defs = self.inner[v]
            first_use = min((self.order[id(s)] for s in walk(self.loop.body)
                             if _uses(s, v)), default=None)
            d = defs[0]
            if len(defs) != 1 or id(d) not in self.top or (
                    first_use is not None and first_use <= self.order[id(d)]):
                return None
            return self._defined(d, depth)
        defs = self.outer.get(v, [])
        if not defs:
            return ("var", v)  # the task's index or a kernel argument
        if len(defs) != 1 or isinstance(defs[0], For):
            return None
        return self._defined(defs[0], depth) or ("var", v)

    def _defined(self, d, depth: int):
        if isinstance(d, Assign):
            return self.value(d.value, depth)
        if isinstance(d, Load):
            indices = tuple(self.value(i, depth) for i in d.indices)
            return None if None in indices else ("load", id(d.field), d.field, indices)
        return None


def _uses(s, v) -> bool:
    exprs = [getattr(s, k, None) for k in ("value", "cond", "begin", "end")]
    exprs += list(getattr(s, "indices", ()))
    return any(_mentions(e, v) for e in exprs if e is not None)


def _mentions(e, v) -> bool:
    if isinstance(e, VarRef):
        return e.var is v
    return isinstance(e, OpExpr) and any(_mentions(a, v) for a in e.args)


def _invariant(val) -> bool:
    if val is None or val == ("iv",):
        return False
    if val[0] in ("const", "var"):
        return True
    if val[0] == "load":
        return all(_invariant(i) for i in val[3])
    return _invariant(val[1]) and _invariant(val[2])


def _row_partner(sym: _Loop, val) -> bool:
    """val is F[a..., k + 1] with F distinct_rows, a fixed, and k running over a subrange
    of [0, F[a..., 0]): one of row a's listed partners, a different one each iteration."""
    if val is None or val[0] != "load" or not getattr(val[2], "distinct_rows", False) \
            or val[1] in sym.written_anywhere:
        return False
    *fixed, pos = val[3]
    if not all(_invariant(a) for a in fixed) or pos[:1] != ("add",) or pos[2] != ("const", 1):
        return False
    count = ("load", val[1], val[2], (*fixed, ("const", 0)))
    lo, hi = sym.value(sym.loop.begin), sym.value(sym.loop.end)
    k = pos[1]
    if k == ("iv",):  # for k in range(lo, count)
        return _nonnegative(lo) and hi == count
    if k[:1] == ("add",) and k[2] == ("iv",) and lo == ("const", 0):
        start = k[1]  # k = start + r, r in [0, count - start): the reverse pass's loop
        return _nonnegative(start) and hi == ("sub", count, start)
    return False


def _nonnegative(val) -> bool:
    return val is not None and val[0] == "const" and val[1] >= 0


def parallel_loop(loop: For, task_body: list, plain) -> bool:
    """Whether every field the loop writes is touched only at one row partner (the same
    one) per iteration, with nothing else in the loop that could order iterations. Only
    where ``plain(field)`` for each: no atomic path beside the plain one (one thread's
    vectorised loop and two threads' scalar one would round differently)."""
    body = list(walk(loop.body))
    if not all(isinstance(s, (Assign, Load, Store, Atomic, If)) for s in body):
        return False
    writes = [s.field for s in body if isinstance(s, (Store, Atomic))]
    written = {id(f) for f in writes}
    if not written or not all(plain(f) for f in writes):
        return False
    sym = _Loop(loop, task_body)
    target = None
    for s in body:
        if isinstance(s, (Load, Store, Atomic)) and id(s.field) in written:
            if len(s.indices) != 1 or not isinstance(s.indices[0], VarRef):
                return False
            val = sym.value(s.indices[0])
            if target is None and not _row_partner(sym, val):
                return False
            if target is not None and val != target:
                return False
            target = val
    return True
