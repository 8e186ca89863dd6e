"""Which part of each field a launch can write, and read, so snapshots copy that part only,
and only when it was read.

DiffTaichi-style programs keep whole trajectories in time-indexed fields (`x[t, p]`) and
write one time slice per launch (`x[t + 1, p] = ...`).  Saving the whole field before every
launch would cost O(T) per step and O(T^2) per trajectory.  Where every write to a field
indexes a dimension by the same expression of the kernel's scalar arguments and constants,
the launch's values of those arguments pin that dimension, and the snapshot is one slice.

Reads are pinned the same way, each distinct load pattern on its own (`p[t - 1]` and
`p[t - 2]` are two slices). A Tape keeps the union of what its launches read (RegionSet):
a slice that no launch on the tape has read before it is overwritten needs no snapshot,
since no gradient kernel reads it (the fresh `x[t + 1]` of each step: the copies were a
fifth of diffmpm_simple's iteration).
"""

from __future__ import annotations

from ..ir.nodes import Atomic, Const, Load, OpExpr, Store, VarRef, walk
from ..ir.ops import OPS, Op
from .analysis import used_vars
from .races import _Canonical


class WriteRegions:
    """Per written field: for each index dimension, an argument expression or None (all);
    per read field, the same for each distinct load pattern."""

    def __init__(self, kir):
        self.args = list(kir.arg_vars)
        arg_set = set(self.args)
        self.dims: dict = {}
        self.read_dims: dict = {}  # field -> {pattern key: pinned dims}
        self._memo: dict = {}
        for task in kir.tasks:
            canon = _Canonical(task)
            used = used_vars(task.body)
            for s in walk(task.body):
                reads = isinstance(s, Load) or isinstance(s, Atomic) and s.result in used
                if not isinstance(s, (Store, Atomic)) and not reads:
                    continue
                pinned = _pins(s, canon, arg_set)
                if reads:
                    key = tuple(p[0] if p is not None else None for p in pinned)
                    self.read_dims.setdefault(s.field, {})[key] = pinned
                if not isinstance(s, (Store, Atomic)):
                    continue
                old = self.dims.get(s.field)
                self.dims[s.field] = pinned if old is None else _merge([old, pinned])
        for f, patterns in self.read_dims.items():
            if len(patterns) > MAX_READ_PATTERNS:  # a field read at many constant indices
                merged = _merge(list(patterns.values()))
                self.read_dims[f] = {None: merged}

    def index(self, f, flat_args):
        """The numpy index of what this launch may write in f (Ellipsis: all of it)."""
        return self._cached(("w", f, tuple(flat_args)),
                            lambda: self._index(f, self.dims.get(f), flat_args))

    def read_indices(self, f, flat_args) -> list:
        """The numpy indices of what this launch may read in f ([Ellipsis]: all of it)."""
        patterns = self.read_dims.get(f)
        if not patterns:
            return [Ellipsis]
        return self._cached(("r", f, tuple(flat_args)), lambda: [
            self._index(f, dims, flat_args) for dims in patterns.values()])

    def read_pins(self, f, flat_args) -> list:
        """read_indices as RegionSet takes them: (pinned dimensions, their values) each."""
        return self._cached(("p", f, tuple(flat_args)), lambda: [
            pins_of(index) for index in self.read_indices(f, flat_args)])

    def _cached(self, key, compute):
        """A step loop launches each kernel with the same few arguments every iteration:
        evaluating the index expressions once per distinct arguments keeps a Tape's
        bookkeeping off the launch's critical path."""
        out = self._memo.get(key)
        if out is None:
            if len(self._memo) > 1 << 16:
                self._memo.clear()
            out = self._memo[key] = compute()
        return out

    def _index(self, f, dims, flat_args):
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


MAX_READ_PATTERNS = 4  # distinct load patterns kept per field; more are merged into one


def _merge(patterns: list) -> list:
    """One pattern covering all: a dimension stays pinned where every pattern pins it to
    the same expression."""
    first = patterns[0]
    return [a if a is not None and all(p[k] is not None and p[k][0] == a[0] for p in patterns)
            else None for k, a in enumerate(first)]


def pins_of(index) -> tuple:
    """(pinned dimensions, their values) of a WriteRegions index; () for all of a field."""
    if index is Ellipsis:
        return (), ()
    dims = tuple(k for k, s in enumerate(index) if s != slice(None))
    return dims, tuple(index[k].start for k in dims)


def _pins(s, canon, arg_set) -> list:
    """Per index of access s: (canonical key, expression) when it is an integer expression
    of the kernel's scalar arguments and constants only, else None."""
    pinned = []
    for e in s.indices:
        e = _resolve(e, canon.defs)
        ok = e is not None and e.dtype.kind in "iu" and _vars(e) <= arg_set
        pinned.append((canon.key(e), e) if ok else None)
    return pinned


class RegionSet:
    """A union of a field's regions, each an index from WriteRegions (Ellipsis, or a slice
    of one element or all of it per dimension): what a Tape's launches have read."""

    def __init__(self) -> None:
        self.everything = False
        self.by_dims: dict = {}  # pinned dimensions -> {their values}
        # (pinned dimensions, positions among them) -> {values at those positions}: the
        # lookups of regions that pin fewer dimensions, kept up to date by add()
        self.projections: dict = {}

    def add(self, index) -> None:
        self.add_pinned(*pins_of(index))

    def add_pinned(self, dims: tuple, value: tuple) -> None:
        if not dims:
            self.everything = True
            return
        values = self.by_dims.setdefault(dims, set())
        if value in values:
            return
        values.add(value)
        for (d, at), seen in self.projections.items():
            if d == dims:
                seen.add(tuple(value[j] for j in at))

    def overlaps(self, index) -> bool:
        """Whether the region `index` shares an element with the union (a set lookup per
        pattern of pinned dimensions: a tape records thousands of launches)."""
        if self.everything or index is Ellipsis:
            return self.everything or bool(self.by_dims)
        pinned = {k: s.start for k, s in enumerate(index) if s != slice(None)}
        for dims, values in self.by_dims.items():
            at = tuple(j for j, k in enumerate(dims) if k in pinned)
            want = tuple(pinned[dims[j]] for j in at)
            if len(at) == len(dims):
                if want in values:
                    return True
                continue
            seen = self.projections.get((dims, at))
            if seen is None:
                seen = self.projections[(dims, at)] = {tuple(v[j] for j in at)
                                                       for v in values}
            if want in seen:
                return True
        return False


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
