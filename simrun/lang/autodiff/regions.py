"""Which part of each field a launch can write, so snapshots copy that part only.

DiffTaichi-style programs keep whole trajectories in time-indexed fields (`x[t, p]`) and
write one time slice per launch (`x[t + 1, p] = ...`).  Saving the whole field before every
launch would cost O(T) per step and O(T^2) per trajectory.  Where every write to a field
indexes a dimension by the same expression of the kernel's scalar arguments and constants,
the launch's values of those arguments pin that dimension, and the snapshot is one slice.
"""

from __future__ import annotations

from ..ir.nodes import Atomic, Const, OpExpr, Store, VarRef, walk
from ..ir.ops import OPS, Op
from .races import _Canonical


class WriteRegions:
    """Per written field: for each index dimension, an argument expression or None (all)."""

    def __init__(self, kir):
        self.args = list(kir.arg_vars)
        arg_set = set(self.args)
        self.dims: dict = {}
        for task in kir.tasks:
            canon = _Canonical(task)
            for s in walk(task.body):
                if not isinstance(s, (Store, Atomic)):
                    continue
                pinned = []
                for e in s.indices:
                    e = _resolve(e, canon.defs)
                    ok = e is not None and e.dtype.kind in "iu" and _vars(e) <= arg_set
                    pinned.append((canon.key(e), e) if ok else None)
                old = self.dims.get(s.field)
                if old is not None:
                    pinned = [a if a is not None and b is not None and a[0] == b[0] else None
                              for a, b in zip(old, pinned)]
                self.dims[s.field] = pinned

    def index(self, f, flat_args):
        """The numpy index of what this launch may write in f (Ellipsis: all of it)."""
        dims = self.dims.get(f)
        if not dims or all(d is None for d in dims) or len(flat_args) != len(self.args):
            return Ellipsis
        values = dict(zip(self.args, flat_args))
        out = []
        for d, n in zip(dims, f.shape):
            if d is None:
                out.append(slice(None))
                continue
            try:
                k = int(_evaluate(d[1], values))
            except (ArithmeticError, TypeError, ValueError):
                return Ellipsis
            if not 0 <= k < n:
                return Ellipsis
            out.append(slice(k, k + 1))
        return tuple(out)


def _resolve(e, defs, depth: int = 0):
    """e with once-assigned locals replaced by their definitions (None if too deep)."""
    if depth > 32:
        return None
    if isinstance(e, VarRef) and e.var in defs:
        return _resolve(defs[e.var], defs, depth + 1)
    if isinstance(e, OpExpr):
        args = tuple(_resolve(a, defs, depth + 1) for a in e.args)
        if any(a is None for a in args):
            return None
        return OpExpr(e.op, args, e.dtype)
    return e


def _vars(e) -> set:
    if isinstance(e, VarRef):
        return {e.var}
    if isinstance(e, OpExpr):
        return set().union(*(_vars(a) for a in e.args))
    return set()


def _evaluate(e, values):
    if isinstance(e, Const):
        return e.value
    if isinstance(e, VarRef):
        return values[e.var]
    if e.op is Op.CAST and e.args[0].dtype.kind not in "iu":
        raise TypeError("a float cast in an index")
    return OPS[e.op].ref(*(_evaluate(a, values) for a in e.args))
