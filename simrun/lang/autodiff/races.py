"""Reject parallel loops whose iterations may read what other iterations write, or store to
one element of a differentiated field.

The gradient of such a loop depends on the order the iterations ran in, which the reverse
sweep cannot know, so it would be silently wrong.  A field that a parallel loop both reads
and writes (stores or atomics) passes only if every access to it is provably owned by its
iteration: some index positions hold the same expression in every access, and those
expressions are the loop's own indices plus loop-invariant offsets (`x[i]`, `x[i + 1, k]`),
so distinct iterations touch distinct elements; a flattened pair (p // n, p - n * (p // n))
or (p // n, p % n) stands for p.  Reads that no write of the loop can reach, because some
index position is one loop-invariant value plus different constants (p[t, i] written,
p[t - 1, i + 1] read), are left out of that test.  Index locals are looked through where they
are assigned once in the loop body; a local assigned twice (`j = i - 1 ... j = i`)
is never trusted.  Everything else (`x[j]` with `j` loaded, `s[None]`, `x[i // 2]`) is an
error naming the field, kernel and source line.  The same test applies to the plain stores
of a field with a gradient that the loop only writes: the reversal of a store takes the
element's adjoint, which belongs to whichever iteration's value survived.
"""

from __future__ import annotations

from ..errors import AutodiffError
from ..fields import grad_of
from ..ir.nodes import (
    Assign,
    Atomic,
    Const,
    For,
    Load,
    OpExpr,
    Random,
    Store,
    Task,
    VarRef,
    walk,
)
from ..ir.ops import Op
from .analysis import used_vars


def check_races(task: Task, kernel_name: str) -> None:
    if task.kind != "range":
        return
    if isinstance(task.begin, Const) and isinstance(task.end, Const) and \
            task.end.value - task.begin.value <= 1:
        return  # `for _ in range(1):`, the usual way to run serial code: no other iteration
    canon = _Canonical(task)
    used = used_vars(task.body)
    reads, writes, accesses = set(), set(), {}
    for s in walk(task.body):
        if isinstance(s, (Load, Store, Atomic)):
            (reads if isinstance(s, Load) else writes).add(s.field)
            if isinstance(s, Atomic) and s.result in used:
                reads.add(s.field)
            accesses.setdefault(s.field, []).append(s)
    for f in writes - reads:
        stores = [s for s in accesses[f] if isinstance(s, Store)]
        if stores and grad_of(f) is not None and f.dtype.is_float and \
                not _owned(stores, canon):
            raise AutodiffError(
                f"this parallel loop stores into field '{f.name}' at an index that is not "
                "provably its own iteration's (e.g. y[idx[i]], y[0], y[j] in an inner loop), "
                "so two iterations may store to one element: which value survives depends on "
                "the schedule, and so would the gradient. If every iteration stores to a "
                "different element (a permutation), add instead (y[idx[i]] += ...) into a "
                "zeroed field; otherwise put ti.loop_config(serialize=True) before the loop",
                stores[0].span, kernel_name)
    for f in reads & writes:
        elsewhere = [s for s in accesses[f] if isinstance(s, Load) and all(
            canon.disjoint(s, w) for w in accesses[f] if not isinstance(w, Load))]
        if not _owned([s for s in accesses[f] if not any(s is r for r in elsewhere)], canon):
            span = next((s.span for s in accesses[f] if not isinstance(s, Load)),
                        accesses[f][0].span)
            raise AutodiffError(
                f"this parallel loop both reads and writes field '{f.name}', and simrun cannot "
                "prove that each iteration touches only its own elements (every access must "
                "index it by the loop's own indices, e.g. x[i] or x[i, j + 1]); one iteration "
                "may read what another writes, so the gradient would be wrong. Split the reads "
                "and the writes into two kernels (or two loops), or put "
                "ti.loop_config(serialize=True) before the loop", span, kernel_name)


class _Canonical:
    """Index expressions as comparable keys, looking through once-assigned top-level locals."""

    def __init__(self, task: Task):
        self.index_vars = set(task.index_vars)
        counts: dict = {}
        for s in walk(task.body):
            for v in _assigned(s):
                counts[v] = counts.get(v, 0) + 1
        self.assigned = set(counts)
        expected = {v: 0 if v is task.var else 1 for v in self.index_vars}
        if any(counts.get(v, 0) != n for v, n in expected.items()):
            self.index_vars = set()  # the body reassigns a loop index: trust nothing
        # a local assigned once (a ti.func's parameter, `a = k + t * n`) is its definition,
        # wherever it is assigned: Taichi's scoping keeps every use after that one assignment
        self.defs = {s.var: s.value for s in walk(task.body)
                     if isinstance(s, Assign) and counts.get(s.var) == 1
                     and s.var not in self.index_vars}

    def key(self, e):
        if isinstance(e, VarRef):
            if e.var in self.defs:
                return self.key(self.defs[e.var])
            return ("var", e.var.id)
        if isinstance(e, Const):
            return ("const", e.value)
        if isinstance(e, OpExpr):
            return (e.op.value,) + tuple(self.key(a) for a in e.args)
        return ("opaque", id(e))

    def invariant(self, k) -> bool:
        if k[0] == "var":
            return not any(v.id == k[1] for v in self.assigned | self.index_vars)
        if k[0] == "opaque":
            return False
        return k[0] == "const" or all(self.invariant(a) for a in k[1:])

    def split(self, k) -> tuple:
        """k as (base, integer offset): x + 1 - 3 is (x, -2), a constant is (None, c)."""
        if k[0] == "const" and isinstance(k[1], int):
            return None, k[1]
        if k[0] in (Op.ADD.value, Op.SUB.value):
            (base_a, off_a), (base_b, off_b) = self.split(k[1]), self.split(k[2])
            sign = 1 if k[0] == Op.ADD.value else -1
            if base_b is None:
                return base_a, off_a + sign * off_b
            if base_a is None and sign == 1:
                return base_b, off_a + off_b
        return k, 0

    def disjoint(self, a, b) -> bool:
        """Whether accesses a and b never touch one element, in any two iterations: in some
        index position both are one loop-invariant value plus different constants
        (p[t, i] and p[t - 1, j] with t a kernel argument)."""
        for ka, kb in zip(a.indices, b.indices):
            (base_a, off_a), (base_b, off_b) = self.split(self.key(ka)), self.split(self.key(kb))
            if base_a == base_b and off_a != off_b and (base_a is None or self.invariant(base_a)):
                return True
        return False

    def flattened(self, q, r):
        """The loop index that the pair (q, r) = (e // n, e - n * (e // n)) or (e // n, e % n)
        spells, e being a loop index plus an offset and n loop-invariant, else None: the pair
        determines e = n * q + r, so distinct iterations give distinct pairs."""
        if q[0] != Op.FLOORDIV.value or not self.invariant(q[2]):
            return None
        e, n = q[1], q[2]
        if r[0] == Op.MOD.value and r[1] == e and r[2] == n and n[0] == "const" and n[1]:
            return self.loop_index(e)
        if r[0] == Op.SUB.value and r[1] == e and r[2] in ((Op.MUL.value, n, q),
                                                             (Op.MUL.value, q, n)):
            return self.loop_index(e)
        return None

    def loop_index(self, k):
        """The loop index that k is (plus an invariant offset), else None."""
        if k[0] == "var":
            return next((v for v in self.index_vars if v.id == k[1]), None)
        if k[0] == Op.CAST.value:
            return self.loop_index(k[1])
        if k[0] in (Op.ADD.value, Op.SUB.value):
            a, b = k[1], k[2]
            if self.invariant(b):
                return self.loop_index(a)
            if k[0] == Op.ADD.value and self.invariant(a):
                return self.loop_index(b)
        return None


def _owned(accesses: list, canon: _Canonical) -> bool:
    """Whether every access indexes by the loop's own indices in one shared position each."""
    keys = [tuple(canon.key(i) for i in s.indices) for s in accesses]
    if not canon.index_vars or len({len(k) for k in keys}) != 1:
        return False
    shared = [k for pos, k in enumerate(keys[0]) if len({ks[pos] for ks in keys}) == 1]
    covered = {canon.loop_index(k) for k in shared}
    covered |= {canon.flattened(q, r) for q in shared for r in shared}
    return covered - {None} == canon.index_vars


def _assigned(s):
    if isinstance(s, (Assign, Load, Random)):
        yield s.var
    elif isinstance(s, Atomic) and s.result is not None:
        yield s.result
    elif isinstance(s, For):
        yield s.var
