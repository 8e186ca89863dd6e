"""Which serial loops the reverse pass may recompute instead of saving every local on a stack.

Saving each local of an inner loop on the autodiff stack costs a push and a pop per value
per iteration: for an O(N^2) pair energy that is most of the gradient's run time.  A loop
qualifies for recomputation when re-running its body at the start of each reverse iteration
rebuilds exactly the values the forward iteration had:

- straight-line code and ifs only (no nested loop, break, random draw or atomic result);
- loads only from fields no statement of the kernel writes (their values cannot change), or
  from elements no write reaches (wave's p[t - 1] where the kernel writes p[t]);
- each local assigned once in the body (so "before" and "after" a statement agree on every
  other local), or once in each branch of one if (`a if c else b`), outside any if unless
  it is read only inside that same branch; or an integer local assigned more than once
  (`j = i - 1; if j < 0: j = n - 1`, a periodic neighbour) that every statement whose
  reversal reads it (an assignment's reversal reads only its partials) follows its last
  assignment;
- a local read before its assignment in an iteration (carried across iterations) is a pure
  accumulator: read only by its own update `v = v + e` / `v = e + v` / `v = v - e`, whose
  derivative needs no value of v.  Its recomputed value is garbage, and nothing reads it.

The loop's locals are saved once around the whole loop instead, so the code before and after
it reverses as before.
"""

from __future__ import annotations

from ..ir.access import stmt_reads
from ..ir.nodes import (
    AssertStmt,
    Assign,
    Atomic,
    For,
    If,
    Load,
    OpExpr,
    Print,
    Return,
    Store,
    expr_vars,
    walk,
)
from ..ir.reductions import accumulation
from .rules import partials

_ALLOWED = (Assign, Load, Store, Atomic, If, AssertStmt, Print, Return)


def loop_defs(body) -> list:
    """Locals assigned in a loop body, in order of first assignment."""
    seen: dict = {}
    for s in walk(body):
        if isinstance(s, (Assign, Load)):
            seen.setdefault(s.var, None)
    return list(seen)


def _is_accumulation(s, v) -> bool:
    """`v = v + e`, `v = e + v` or `v = v - e` with e free of v (its derivative needs no v)."""
    if not isinstance(s, Assign) or s.var is not v:
        return False
    delta = accumulation(s)
    return delta is not None and v not in set(expr_vars(delta))


def recomputable(loop: For, written_fields: set, protected: set,
                 unwritten=lambda load: False) -> bool:
    """Whether `loop`'s reverse may re-run its body instead of popping saved values.

    `protected` are locals the loop must not own (kernel-level locals shared across tasks);
    `unwritten(load)` says a load from a written field reads elements no write reaches.
    """
    body = loop.body
    stmts = list(walk(body))
    if not all(isinstance(s, _ALLOWED) for s in stmts):
        return False
    if any(isinstance(s, Atomic) and s.result is not None for s in stmts):
        return False
    if any(isinstance(s, Load) and s.field in written_fields and not unwritten(s)
           for s in stmts):
        return False
    defs = [s.var for s in stmts if isinstance(s, (Assign, Load))]
    owned = set(defs)
    pairs = _branch_pairs(stmts, defs)
    reassigned = {v for v in owned if defs.count(v) > 1} - pairs
    if owned & protected or not all(_settled_before_use(stmts, v) for v in reassigned):
        return False
    if owned & {v for e in (loop.begin, loop.end) for v in expr_vars(e)}:
        return False
    carried: dict = {}
    if not _scan(body, set(), owned, carried):
        return False
    if reassigned & set(carried):
        return False
    for v, readers in carried.items():
        if not all(_is_accumulation(s, v) for s in readers):
            return False
        if any(v in set(stmt_reads(s)) for s in stmts if not _is_accumulation(s, v)):
            return False
    return True


def _settled_before_use(stmts: list, v) -> bool:
    """An integer local assigned more than once (dec_index's `j = i - 1; if j < 0: j = n - 1`)
    whose every read, except by integer assignments (their reversal reads nothing), comes
    after its last assignment: the reversal then reads the value the forward statement read.
    `stmts` is the body in program order (an if before its branches)."""
    if v.dtype.is_float:
        return False
    writes = [k for k, s in enumerate(stmts) if isinstance(s, (Assign, Load)) and s.var is v]
    if any(isinstance(stmts[k], Load) for k in writes):
        return False
    last = max(writes)
    return all(k > last for k, s in enumerate(stmts) if v in _reversal_reads(s))


def _reversal_reads(s) -> set:
    """The locals the reversal of s reads: for an assignment, those in the partial
    derivatives of its value (reverse.backprop's walk; `rw = cx - left_ix` needs no
    left_ix, an integer assignment needs nothing); for any other statement, all it reads."""
    if isinstance(s, Assign):
        return _partial_reads(s.value) if s.var.dtype.is_float else set()
    return set(stmt_reads(s))


def _partial_reads(e) -> set:
    if not isinstance(e, OpExpr) or not e.dtype.is_float:
        return set()
    out: set = set()
    for a, p in zip(e.args, partials(e)):
        if p is not None:
            out |= set(expr_vars(p)) | _partial_reads(a)
    return out


def _branch_pairs(stmts: list, defs: list) -> set:
    """Locals assigned exactly twice, once at the top level of each branch of one if (what
    `a if c else b` lowers to): one value per iteration, like a single assignment."""
    twice = {v for v in defs if defs.count(v) == 2}
    pairs = set()
    for s in stmts:
        if isinstance(s, If):
            then = {t.var for t in s.then if isinstance(t, Assign)}
            pairs |= twice & then & {t.var for t in s.orelse if isinstance(t, Assign)}
    return pairs


def _scan(body, defined: set, owned: set, carried: dict) -> bool:
    """Record reads of owned locals not yet assigned in this iteration (program order)."""
    for s in body:
        for v in stmt_reads(s):
            if v in owned and v not in defined:
                carried.setdefault(v, []).append(s)
        if isinstance(s, (Assign, Load)):
            defined.add(s.var)
        elif isinstance(s, If):
            then_defined, else_defined = set(defined), set(defined)
            if not (_scan(s.then, then_defined, owned, carried)
                    and _scan(s.orelse, else_defined, owned, carried)):
                return False
            defined |= then_defined & else_defined
    return True


def order_free(loop: For) -> bool:
    """Whether a recomputed loop's reverse iterations may run in the forward's order.

    Each reverse iteration of a recomputed loop starts from recomputed locals and only adds:
    into the adjoints of locals from before the loop, into accumulators' adjoints (which it
    leaves as they were) and into field gradients. Sums do not care about order (to
    rounding), so the reverse may walk k = begin, begin + 1, ... as the forward did; that is
    measurably faster on x86 (a neighbour row read and scattered into in ascending order:
    LJ's pair gradient 370 -> 255 ns per atom at 32,000 atoms). A store's reversal reads
    and clears its element's gradient, so two iterations storing one element must be
    reversed last first: a loop with a store keeps the reversed order."""
    return not any(isinstance(s, Store) for s in walk(loop.body))


def recompute_body(body, writes: bool = False) -> list:
    """The loop body's local computations only: what re-running an iteration needs; with
    `writes`, also its atomics (a value_reverse kernel adds U where it recomputes it)."""
    out = []
    for s in body:
        if isinstance(s, (Assign, Load)) or (writes and isinstance(s, Atomic)):
            out.append(s)
        elif isinstance(s, If):
            then, orelse = recompute_body(s.then, writes), recompute_body(s.orelse, writes)
            if then or orelse:
                out.append(If(s.cond, then, orelse, span=s.span))
    return out
