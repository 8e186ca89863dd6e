"""How a range task is split: a static cost estimate of one iteration, the inline-vs-parallel
decision, chunk sizes, and the reductions that get per-chunk partial sums.

The estimate is in rough "cost units" (about one scalar ALU op each): loads and stores a few,
an atomic (a lock-prefixed instruction or a compare-and-swap loop) about twenty, division and
square roots a handful, transcendentals a few dozen. Inner loops multiply their body by their
trip count, which the probe call evaluates at launch time when the bounds are loop-invariant
(constants, kernel arguments, top-level locals the task does not write), or bounds affine in
the task's own loop index (`for j in range(i)`, `range(i + 1, n)`: a triangular pair loop),
which the probe evaluates at the first and the last index and takes the larger trip count
(an affine trip count is largest at an end); an inner loop whose trip count is not known
before the launch (`while`, bounds computed in the body) makes the body "heavy": it is split
over the threads whenever it has more than one iteration.

A launch whose estimated work (iterations x cost of one iteration) is at most INLINE_WORK runs
inline on the calling thread, in one chunk: waking a worker thread costs tens of microseconds,
more than such a loop takes. Inline, atomics are plain read-modify-writes (no other thread
runs), so the inline estimate counts them as such: a float atomic add by compare-and-swap
costs ~10x a plain one (a gradient kernel scattering into neighbours: bench/README.md). A
flat body (no branches, loops, atomics or calls) counts a quarter, as LLVM vectorises it. A loop that scatters floats into a field with atomics (p2g,
gradient kernels) gets the larger SCATTER_INLINE_WORK: its threads contend for the same cache
lines, so splitting pays off later (bench/inline_threshold.py), and float adds from several
threads land in an order that changes from run to run, so a small scatter stays
bit-reproducible by running inline. A loop whose scatters stay atomic (no copy takes them:
racing_scatters) also stays inline, at any size, unless its estimate with atomics divided
by the thread count T is below its estimate with plain adds: compare-and-swap adds from two
threads made DiffTaichi's wave gradient 5x slower than one thread's plain adds. This is the
only decision that depends on T, made only for loops whose atomic float scatters already
make a split launch's result depend on the schedule and that have no per-chunk partial sums
(whose results must not depend on T); the deterministic mode runs them on one thread and
probes them with T = 1. A larger launch is cut into chunks of about CHUNK_WORK
units (at most MAX_CHUNKS chunks), and the chunks into one contiguous range per thread: each
thread takes chunks from its own range's atomic counter, then from the other ranges'
(chunks.build_range).

A field the task only adds floats to, at indices other iterations may share (a p2g grid, the
`x.grad[j]` of a pair-energy gradient), is privatised over a fixed partition: the chunks are
cut into G contiguous groups, G a function of the trip count, the cost estimate and the
copies' size only (never of the thread count: `groups`). A thread claims a whole group and
runs its chunks in order, adding with plain adds into the group's zeroed copy (group 0 adds
into the field itself). Once every chunk is done, the threads take slices of the field from a
shared counter and add the groups' copies into the slice they took in group order, so each
slice has one writer and every sum is the same bits on any number of threads, in any
schedule (on one thread too: it runs the groups one after the other). G is kept small enough
that zeroing and merging the copies costs a few per cent of the launch (GROUP_RATIO); a
launch with G = 1 runs inline.

Chunk sizes depend only on the trip count and the cost estimate, never on the thread count:
reductions (`total += ...` on a top-level local, `s[None] += ...` on a 0-d field) sum each
chunk into a partial, and the thread that completes the last chunk adds the partials in chunk
order, so their results are the same for every thread count and every schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..ir.access import write_counts
from ..ir.nodes import (
    AssertStmt,
    Assign,
    Atomic,
    Const,
    For,
    If,
    Load,
    OpExpr,
    Print,
    Random,
    Return,
    StackPop,
    StackPush,
    Store,
    VarRef,
    While,
    expr_vars,
    walk,
)
from ..ir.ops import OPS, Op
from ..ir.reductions import field_reductions, hoistable_fields, index_key, var_reductions

INLINE_WORK = 1 << 18   # estimated units a launch may take and still run inline (~60 us)
SCATTER_INLINE_WORK = 1 << 21  # the same for a loop with float atomic scatters (~0.5 ms)
CHUNK_WORK = 1 << 15    # estimated units per chunk (~8 us): the counter's atomic is noise
MAX_CHUNKS = 256        # chunks per launch at most; also the capacity of the partial sums
CHUNK_ALIGN = 16        # chunks of more iterations than this are a multiple of it
VECTOR_DISCOUNT = 4     # a flat body runs ~4x faster per iteration than its unit count says

PRIVATE_BYTES = 1 << 20  # a group's copies of scatter targets, per task, at most (L2-sized)
MERGE_SLICES = 64        # slices a privatised field's merge is cut into, at most
MERGE_MIN_SLICE = 1024   # elements per slice at least
MAX_GROUPS = 16          # fixed groups of chunks of a task with copies (one copy each, listed
                         # in the context): how many threads such a task can keep busy
GROUP_RATIO = 32         # a group's copies (scalars) cost at most 1/GROUP_RATIO of its work
HEAVY_UNITS = 256        # the work an iteration of a heavy body (unknown trip counts) counts

SPIN_ROUNDS = 1 << 12   # bounds the calling thread's wait for the workers' last chunks (~0.1 ms)
MAX_RANGES = 16         # per-thread ranges of chunks, each with its own counter
RANGE_STRIDE = 8        # slots (64 bytes) between two ranges' counters: one cache line each
# context slots: chunks done (atomic), chunk size, range count; then the ranges' counters
SCHED_SLOTS = RANGE_STRIDE * (1 + MAX_RANGES)

# cost units of one op (float pow, floordiv and mod: see expr_cost); every op has an entry
COSTS: dict[Op, int] = {op: info.cost for op, info in OPS.items()}  # ir/ops.py
# ops whose code is a call or a long sequence LLVM does not vectorise
_CALLS = frozenset(op for op, c in COSTS.items() if c > 1) - {Op.SQRT, Op.TRUEDIV} | {Op.POW}
_LOAD, _STORE, _ATOMIC, _RANDOM, _STACK, _PRINT = 2, 2, 20, 16, 6, 32
# a float atomic is a compare-and-swap loop (x86 has no float atomic add), far dearer than
# the units above make it beside a stencil's or an MPM transfer's loads and index arithmetic:
# DiffTaichi's g2p gradient (18 scattered adds a particle) used 4.7x the CPU time on two
# threads with compare-and-swap than on one with plain adds, smoke's compute_p gradient
# (4 a cell) ~10x one thread's plain adds (bench/README.md, issue 21)
_FLOAT_ATOMIC = 160


@dataclass
class Cost:
    """Cost of one iteration: a constant plus inner loops whose trip counts are known at launch.

    loops holds (begin, end, Cost of one inner iteration), begin/end being IR expressions the
    probe can evaluate; heavy is set by an inner loop whose trip count it cannot.
    """

    const: float = 0.0
    loops: list = field(default_factory=list)
    heavy: bool = False

    def add(self, other: Cost) -> None:
        self.const += other.const
        self.loops += other.loops
        self.heavy |= other.heavy

    def scaled(self, k: float) -> Cost:
        return Cost(self.const * k, [(b, e, c.scaled(k)) for b, e, c in self.loops], self.heavy)


def expr_cost(e, seen: set | None = None) -> float:
    """Operations in an expression tree (a subtree shared by several parents counts once)."""
    if seen is None:
        seen = set()
    if not isinstance(e, OpExpr) or id(e) in seen:
        return 0.0
    seen.add(id(e))
    own = COSTS[e.op]
    if e.op is Op.POW and e.dtype.is_float:
        own = 40
    if e.op in (Op.FLOORDIV, Op.MOD) and e.dtype.is_float:
        own = 8
    return own + sum(expr_cost(a, seen) for a in e.args)


def _const_int(e):
    return int(e.value) if isinstance(e, Const) and not e.dtype.is_float else None


def iteration_cost(task, invariant, alone: bool = False) -> Cost:
    """Cost of one iteration of a range task, loop overhead included. A flat body (no
    branches, loops, atomics, calls or random numbers) is vectorised by LLVM: a quarter.
    Atomics on owned or privatised fields are plain read-modify-writes, and so is every
    atomic when the launch runs alone (inline: statements.atomic_update). Inner loop
    bounds may also be affine in the task's loop index (see varies_with_index)."""
    plain = owned_fields(task) | {id(f) for f in private_scatters(task)}
    if alone:
        plain |= {id(s.field) for s in walk(task.body) if isinstance(s, Atomic)}
    writes = write_counts(task.body)
    index = TaskIndex(task.var, {s.var: s.value for s in task.body if isinstance(s, Assign)
                                 and writes[s.var] == 1}) \
        if len(task.grid) < 2 and task.var not in writes else None
    cost = body_cost(task.body, invariant, plain, index)
    cost.const += 2
    if _vectorisable(task.body):
        cost.const /= VECTOR_DISCOUNT
    return cost


def _vectorisable(body) -> bool:
    for s in body:
        if not isinstance(s, (Assign, Load, Store)):
            return False
        exprs = [s.value] if isinstance(s, Assign) else list(s.indices)
        if isinstance(s, Store):
            exprs.append(s.value)
        if any(_has_call(e) for e in exprs):
            return False
    return True


def _has_call(e) -> bool:
    if not isinstance(e, OpExpr):
        return False
    if e.op in _CALLS:
        return True
    return any(_has_call(a) for a in e.args)


def body_cost(body, invariant, plain=frozenset(), index: TaskIndex | None = None) -> Cost:
    """Cost of running `body` once; invariant(var) says whether the probe may read var; plain:
    ids of fields whose atomics are emitted as plain read-modify-writes; index: the task's
    loop index, which inner loop bounds may use affinely (None: they may not)."""
    total = Cost()
    for s in body:
        total.add(_stmt_cost(s, invariant, plain, index))
    return total


@dataclass
class TaskIndex:
    """A range task's loop index and the locals the task assigns once, at its top level (a
    gradient kernel's `lo = i + 1; hi = n` before its reversed loop): inner loop bounds
    affine in the index directly or through those locals are known at launch."""

    var: object
    defs: dict

    def resolve(self, e, depth: int = 0):
        """e with each such local replaced by its definition: the probe runs before the task
        body assigns them."""
        if isinstance(e, VarRef) and e.var in self.defs and depth < 8:
            return self.resolve(self.defs[e.var], depth + 1)
        if isinstance(e, OpExpr):
            return OpExpr(e.op, tuple(self.resolve(a, depth) for a in e.args), e.dtype)
        return e


def varies_with_index(e, index) -> bool:
    """Whether expression e reads the task's loop index `index` (the probe then evaluates it
    at both ends of the launch's range)."""
    return index is not None and index in expr_vars(e)


def _affine_in(e, index, invariant) -> bool:
    """Whether e is affine in `index` with launch-invariant coefficients: built from index,
    invariant variables and constants by +, -, negation, casts and products in which at most
    one factor reads index. Its value over a range of index is then largest (and smallest)
    at an end of the range."""
    if isinstance(e, Const):
        return True
    if isinstance(e, VarRef):
        return e.var is index or invariant(e.var)
    if not isinstance(e, OpExpr):
        return False
    if e.op in (Op.ADD, Op.SUB, Op.NEG, Op.CAST):
        return all(_affine_in(a, index, invariant) for a in e.args)
    if e.op is Op.MUL:
        return all(_affine_in(a, index, invariant) for a in e.args) and \
            sum(varies_with_index(a, index) for a in e.args) <= 1
    return not varies_with_index(e, index) and all(invariant(v) for v in expr_vars(e))


def _stmt_cost(s, invariant, plain, index: TaskIndex | None = None) -> Cost:
    ex = expr_cost
    if isinstance(s, Assign):
        return Cost(ex(s.value))
    if isinstance(s, Load):
        return Cost(_LOAD + sum(ex(i) for i in s.indices))
    if isinstance(s, Store):
        return Cost(_STORE + ex(s.value) + sum(ex(i) for i in s.indices))
    if isinstance(s, Atomic):
        # an add into a 0-d field without its old value is usually a reduction (a register add)
        own = 1 if s.field.shape == () and s.result is None else \
            _LOAD + 1 if id(s.field) in plain else \
            _FLOAT_ATOMIC if s.field.dtype.is_float else _ATOMIC
        return Cost(own + ex(s.value) + sum(ex(i) for i in s.indices))
    if isinstance(s, Random):
        return Cost(_RANDOM)
    if isinstance(s, (StackPush, StackPop)):
        return Cost(_STACK)
    if isinstance(s, Print):
        return Cost(_PRINT)
    if isinstance(s, AssertStmt):
        return Cost(1 + ex(s.cond))
    if isinstance(s, Return):
        return Cost(1 + sum(ex(v) for v in s.values))
    if isinstance(s, If):
        then = body_cost(s.then, invariant, plain, index)
        orelse = body_cost(s.orelse, invariant, plain, index)
        out = Cost(1 + ex(s.cond))
        if then.loops or orelse.loops or then.heavy or orelse.heavy:
            out.add(then)  # both branches, an upper bound, when either holds a loop
            out.add(orelse)
        else:
            out.const += max(then.const, orelse.const)
        return out
    if isinstance(s, For):
        inner = body_cost(s.body, invariant, plain, index)
        inner.const += 2  # counter and branch
        out = Cost(2 + ex(s.begin) + ex(s.end))
        lo, hi = _const_int(s.begin), _const_int(s.end)
        if lo is not None and hi is not None:
            out.add(inner.scaled(max(hi - lo, 0)))
        elif all(invariant(v) for e in (s.begin, s.end) for v in expr_vars(e)):
            out.loops.append((s.begin, s.end, inner))
        elif index is not None and all(_affine_in(index.resolve(e), index.var, invariant)
                                       for e in (s.begin, s.end)):
            out.loops.append((index.resolve(s.begin), index.resolve(s.end), inner))
        else:
            out.heavy = True
        return out
    if isinstance(s, While):
        return Cost(heavy=True)
    return Cost()  # Break, Continue


def _own_positions(task):
    """A function: access -> where the iteration's own indices (the loop's indices, each
    assigned once) stand among its indices, as a tuple of positions, or None when one is
    missing. Two iterations differ in an own index, so accesses of a field that all have
    them at the same positions never touch an element another iteration touches, whatever
    the other indices are (`x.grad[f, p]` and `x.grad[f + 1, p]` in a time-stepped MPM)."""
    assigned = write_counts(task.body)
    own = tuple(task.index_vars) or (task.var,)
    if any(assigned.get(v, 0) > 1 for v in own):
        return lambda s: None
    alias = {v: v for v in own}  # locals that hold an own index: a ti.func's parameter copy
    for s in walk(task.body):
        if isinstance(s, Assign) and isinstance(s.value, VarRef) and s.value.var in alias \
                and assigned.get(s.var, 0) == 1:
            alias[s.var] = alias[s.value.var]

    def positions(s):
        vars_ = [alias.get(i.var) if isinstance(i, VarRef) else None for i in s.indices]
        found = tuple(vars_.index(v) if v in vars_ else None for v in own)
        return None if None in found else found

    return positions


def _owned_test(task):
    """A predicate: does an access index the field at the iteration's own indices (see
    _own_positions)? With every access of its field at the same positions, no other
    iteration of the launch reads or writes that element."""
    positions = _own_positions(task)
    return lambda s: positions(s) is not None


def owned_fields(task) -> set:
    """ids of fields the task accesses only at each iteration's own indices, always at the
    same index positions: their atomics need no atomicity (`x.grad[p] += ...`, or
    `F.grad[f, p] += ...`, in a gradient kernel)."""
    positions = _own_positions(task)
    where: dict = {}
    shared = set()
    for s in walk(task.body):
        if isinstance(s, (Load, Store, Atomic)):
            at = positions(s)
            if at is None or where.setdefault(id(s.field), at) != at:
                shared.add(id(s.field))
    return set(where) - shared


def _scatters(task) -> list:
    """Atomic float adds (subs, muls) into fields, other than the reductions that get per-chunk
    partials and adds at the iteration's own index (no other iteration adds there)."""
    reduced = field_reductions(task)
    owned = _owned_test(task)
    return [s for s in walk(task.body)
            if isinstance(s, Atomic) and s.field.dtype.is_float and s.op in (Op.ADD, Op.SUB, Op.MUL)
            and (id(s.field), s.comp) not in reduced and not owned(s)]


def row_sums(task) -> dict:
    """For an ndrange task (run as rows of its innermost dimension, chunks._grid_loop): the
    result-free atomic adds/subs whose target is the same all along a row (its indices read
    only outer indices and locals the task never writes), on fields the task touches no other
    way, as {id(stmt): key}; statements with one key add into one per-row sum, flushed once per
    row (the `x.grad[i]` of a pair-energy gradient over `ndrange(n, n)`)."""
    if len(task.grid) < 2:
        return {}
    writes = write_counts(task.body)
    outer = {v for v in task.index_vars[:-1] if writes.get(v, 0) == 1}
    fields = hoistable_fields(task.body)
    out = {}
    for s in walk(task.body):
        if isinstance(s, Atomic) and id(s.field) in fields and s.field.shape != () and all(
                v in outer or v not in writes for i in s.indices for v in expr_vars(i)):
            out[id(s)] = (id(s.field), s.comp) + tuple(index_key(i) for i in s.indices)
    return out


def scatters_floats(task) -> bool:
    """Whether the task adds floats into field entries other iterations may share (privatised
    or not): its split launches need the thread-independent schedule (schedule.py)."""
    return bool(_scatters(task))


def racing_scatters(task, debug: bool = False) -> bool:
    """Whether a split launch's result depends on the schedule: float adds by atomics into
    shared entries that no per-group copy takes (all of them in debug mode, which makes no
    copies). Such a task runs on one thread in the deterministic mode."""
    copied = set() if debug else {id(f) for f in private_scatters(task)}
    return any(id(s.field) not in copied for s in _scatters(task))


def copy_scalars(task) -> int:
    """Scalars in one group's copies of the privatised fields (their zeroing and merging)."""
    return sum(f.ncomp * math.prod(f.shape) for f in private_scatters(task))


def private_scatters(task) -> list:
    """Fields to privatise per thread (see the module docstring): float fields that the task
    scatters into and touches only with result-free atomic adds/subs, smallest first while
    their copies fit in PRIVATE_BYTES together."""
    other = {id(s.field) for s in walk(task.body) if isinstance(s, (Load, Store, Atomic))
             and not (isinstance(s, Atomic) and s.op in (Op.ADD, Op.SUB) and s.result is None)}
    candidates = {id(s.field): s.field for s in _scatters(task)
                  if s.op in (Op.ADD, Op.SUB) and s.field.shape != ()
                  and not getattr(s.field, "is_ndarray_arg", False)}
    chosen, total = [], 0
    for f in sorted((f for k, f in candidates.items() if k not in other), key=field_bytes):
        if total + field_bytes(f) <= PRIVATE_BYTES or _per_iteration(task, f):
            chosen.append(f)
            total += field_bytes(f)
    return chosen


def _per_iteration(task, f) -> bool:
    """A field of no more elements than the task has iterations, scattered into from an
    inner loop (`x.grad[j]` of a pair loop over a neighbour list): its copy costs about one
    pass of the outer loop's own size to zero and merge, against inner loops' worth of
    atomics (compare-and-swap loops for floats on x86) saved; copied whatever its size."""
    end, begin = task.end, task.begin
    if not (isinstance(end, Const) and isinstance(begin, Const)):
        return False
    inner_loop = any(isinstance(s, (For, While)) for s in walk(task.body))
    return inner_loop and math.prod(f.shape) <= end.value - begin.value


def component_major(task, fields: list) -> list:
    """The privatised vector fields whose copies are laid out component by component (see
    the module docstring): those of a task that runs as rows, and those indexed by the
    counter of an inner loop (`x.grad[j]` in `for j in range(n)`), which LLVM vectorises."""
    vector = [f for f in fields if f.ncomp > 1]
    if task.grid or not vector:
        return vector
    along = set()
    _inner_loop_scatters(task.body, frozenset(), along)
    return [f for f in vector if id(f) in along]


def _inner_loop_scatters(stmts: list, varying: frozenset, out: set) -> frozenset:
    """Adds to out the ids of fields an atomic reaches at a last index that varies with an
    enclosing inner loop's counter; returns the variables that vary with it so far."""
    for s in stmts:
        if isinstance(s, Assign) and varying and set(expr_vars(s.value)) & varying:
            varying = varying | {s.var}
        elif isinstance(s, Atomic) and s.indices and set(expr_vars(s.indices[-1])) & varying:
            out.add(id(s.field))
        elif isinstance(s, If):
            varying = _inner_loop_scatters(s.then, varying, out) | \
                _inner_loop_scatters(s.orelse, varying, out)
        elif isinstance(s, (For, While)):
            inner = varying | {s.var} if isinstance(s, For) else varying
            _inner_loop_scatters(s.body, inner, out)
    return varying


def field_bytes(f) -> int:
    return f.ncomp * f.dtype.bits // 8 * math.prod(f.shape)


def reduction_count(task, var_slot) -> int:
    """How many partial sums one chunk of this range task leaves in the context."""
    if task.kind != "range":
        return 0
    return len(field_reductions(task)) + len(var_reductions(task, var_slot))


__all__ = ["CHUNK_ALIGN", "CHUNK_WORK", "COSTS", "Cost", "INLINE_WORK", "MAX_CHUNKS", "MAX_RANGES", "MAX_GROUPS", "GROUP_RATIO",
           "HEAVY_UNITS", "MERGE_SLICES",
           "MERGE_MIN_SLICE", "RANGE_STRIDE",
           "PRIVATE_BYTES", "SCATTER_INLINE_WORK", "SCHED_SLOTS", "SPIN_ROUNDS",
           "body_cost", "expr_cost", "field_bytes", "iteration_cost", "owned_fields",
           "private_scatters", "racing_scatters", "reduction_count", "row_sums",
           "scatters_floats", "copy_scalars"]
