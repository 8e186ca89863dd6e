"""Float scatters with the same bits in any thread order: 64-bit fixed point (AMBER's SPFP).

A GPU's float atomics add in the order the threads arrive, so their last bits change from
run to run. Integer adds are associative: a task whose racing float adds (`f[j] += v`,
`f[j] -= v`, races_on_device) are its only effects beyond its own iteration becomes three
grid-wide tasks, each with the same result in any order:

1. *bound*: the body once more, its field writes dropped; every contribution v to f[j] adds
   1 to count[j] and takes max[j] = max(max[j], |v|) (integer add, float max: any order);
2. *accumulate*: the body, each contribution added as the integer round(v * s) to acc[j],
   with s the largest power of two at most 2**62 / (max[j] * count[j]) (and 2**960), so
   that no partial sum in any order can pass 2**63. The pass counts its contributions too
   (count's high half; finish checks both counts agree), and each |q| is checked against
   that limit
   (with 2**-10 to spare: the two passes are compiled apart, and fast math may contract
   them differently in the last bits); a contribution beyond it (the body gave another
   value than in pass 1: a race on what it reads) fails the launch;
3. *finish*: for every entry, f[j] = f[j] + acc[j] / s in f64, rounded once to f's type, and
   max, count, acc set back to 0 (they stay zero between launches: no upload, no clear).

Accuracy, per entry j with c contributions v_i, m = max |v_i|, S = the old f[j] + sum v_i
exactly and u = 2**-53: |f[j] - S| <= 2u sum|v_i| + c*c*m*2**-61, plus the one rounding of
S to f's type (v * s is exact; each round() errs by half a unit, a unit being 1/s <=
2 m c 2**-62; the f64 conversion of acc rounds once). The CPU's own f64 sum in any order
promises (c-1) u sum|v_i|; the second term is below that where m*c <= 256 sum|v_i| (the
largest contribution at most 256 times the mean magnitude), so an f64 field is as accurate
as the CPU's worst case, and an f32 field gets its exact sum rounded once, far better than
an f32 sum. A contribution that is not finite (or |v| >= 2**1000) makes the entry NaN. The
bound pass costs the body once more; tasks that write what they read, draw random numbers,
print, assert, use the autodiff stack, read a value an atomic returns or add into a
kernel-wide local stay on one GPU thread (runtime/cuda.py).
"""

from __future__ import annotations

import copy
import math

from .codegen.schedule import owned_fields
from .fields import Field
from .ir import builder as B
from .ir import nodes as ir_nodes
from .ir.nodes import (
    AssertStmt,
    Assign,
    Atomic,
    For,
    If,
    Load,
    Print,
    Random,
    StackPop,
    StackPush,
    Store,
    Task,
    Var,
    VarRef,
    While,
    walk,
)
from .ir.ops import Op
from .types import ALL as ALL_TYPES
from .types import f64, i32, i64

HEADROOM = 2.0 ** 62  # |sum of c contributions| stays below 2**63 (see the module's text)
MAX_SCALE = 2.0 ** 960  # m tiny or zero: no overflow of the scaled value's exponent
LIMIT = HEADROOM * (1 + 2.0 ** -10)  # c |q| at most this (+ c): no sum of c |q| reaches 2**63
COUNTED = 1 << 32  # count's high half: the accumulate pass's contributions (the low: pass 1's)
HUGE = 2.0 ** 1000  # |v| at or above it (inf, NaN): the entry's result is NaN
OVERFLOW = ("the fixed-point sum of a reproducible GPU scatter got a contribution larger than "
            "its bound pass measured (it could overflow): the loop's values changed between its two passes (it "
            "reads something another iteration writes?). Run with --no-reproducible "
            "(ti.init(deterministic=False)), or report it.")


def racing_atomics(task) -> list | None:
    """The task's racing float add/sub atomics, where fixed point can take them all and the
    task's other effects allow a second pass over the body; None where it cannot."""
    if task.kind != "range":
        return None
    owned = owned_fields(task)
    racing, written, read = [], set(), set()
    for s in walk(task.body):
        if isinstance(s, (Random, Print, StackPush, StackPop, AssertStmt)):
            return None
        if isinstance(s, Atomic) and s.result is not None:
            return None
        if isinstance(s, Load):
            read.add(id(s.field))
        if isinstance(s, Atomic) and s.field.dtype.is_float and id(s.field) not in owned:
            if s.op not in (Op.ADD, Op.SUB) or not _plain_field(s.field):
                return None
            racing.append(s)
        elif isinstance(s, (Store, Atomic)):
            written.add(id(s.field))
    if not racing or (written | {id(s.field) for s in racing}) & read:
        return None
    return racing


def _plain_field(f) -> bool:
    return isinstance(f, Field) and not f.runtime_rows and f.shape is not None


def shadows(f: Field) -> tuple:
    """(max, count, acc) beside field f, zero between launches; made once per field."""
    held = getattr(f, "_fixed_point", None)
    if held is None:
        held = tuple(Field(dtype, f.shape, name=f"{f.name}.fixed_{what}",
                           elem_shape=f.elem_shape, role="fixed_point", primal=f)
                     for dtype, what in ((f64, "max"), (i64, "count"), (i64, "acc")))
        f._fixed_point = held
    return held


def _scale(m, c, out: list):  # c: the count, as f64
    """The largest power of two at most 2**62 / (m c) (and 2**960), 1 where nothing was
    added (m = 0), as a local whose assignments are appended to out. A power of two:
    v * s and acc / s are exact. The exponent by binary search, with exact products (the
    IR has no bit casts), none of which can overflow for 2**-1000 <= t <= 2**960."""
    t = Var("fixed_t", f64)
    p = Var("fixed_scale", f64)
    out += [Assign(t, B.make(Op.MIN, B.make(Op.TRUEDIV, B.const(HEADROOM, f64),
                                            B.make(Op.MUL, m, c)),
                             B.const(MAX_SCALE, f64))),
            Assign(p, B.const(2.0 ** -1000, f64))]
    for k in (1023, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1):
        up = B.make(Op.MUL, VarRef(p), B.const(2.0 ** k, f64))
        out.append(Assign(p, B.select(B.make(Op.GE, VarRef(t), up), up, VarRef(p))))
    out.append(Assign(p, B.select(B.make(Op.GT, m, B.const(0.0, f64)), VarRef(p),
                                  B.const(1.0, f64))))
    return VarRef(p)


def _magnitude(s: Atomic):
    return B.make(Op.ABS, B.cast(s.value, f64))


def _bound(s: Atomic) -> list:
    mx, count, _ = shadows(s.field)
    a = Var("fixed_abs", f64)
    return [Assign(a, _magnitude(s), span=s.span),
            Atomic(Op.MAX, mx, s.comp, s.indices,
                   B.make(Op.MIN, VarRef(a), B.const(HUGE, f64)), span=s.span),
            Atomic(Op.ADD, count, s.comp, s.indices, B.const(1, i64), span=s.span)]


def _accumulate(s: Atomic) -> list:
    mx, count, acc = shadows(s.field)
    m, counts, v = Var("fixed_max", f64), Var("fixed_counts", i64), Var("fixed_v", f64)
    c = B.cast(B.make(Op.BIT_AND, VarRef(counts), B.const(COUNTED - 1, i64)), f64)
    value = B.cast(s.value, f64)
    q = Var("fixed_q", f64)
    add: list = []
    add += [Assign(q, B.make(Op.ROUND, B.make(Op.MUL, VarRef(v), _scale(VarRef(m), c, add)))),
            AssertStmt(B.make(Op.LOGICAL_AND, B.make(Op.GT, c, B.const(0.0, f64)),
                              B.make(Op.LE, B.make(Op.MUL, B.make(Op.ABS, VarRef(q)), c),
                                     B.make(Op.ADD, B.const(LIMIT, f64), c))),
                       OVERFLOW, span=s.span),
            Atomic(Op.ADD, acc, s.comp, s.indices, B.cast(VarRef(q), i64), span=s.span)]
    return [Load(m, mx, s.comp, s.indices, span=s.span),
            Load(counts, count, s.comp, s.indices, span=s.span),
            Atomic(Op.ADD, count, s.comp, s.indices, B.const(COUNTED, i64), span=s.span),
            Assign(v, B.make(Op.NEG, value) if s.op is Op.SUB else value, span=s.span),
            If(B.make(Op.LT, VarRef(m), B.const(HUGE, f64)), add, [], span=s.span)]


def _rewrite(stmts: list, racing: set, on_racing, drop_writes: bool) -> list:
    out = []
    for s in stmts:
        if id(s) in racing:
            out.extend(on_racing(s))
        elif drop_writes and isinstance(s, (Store, Atomic)):
            continue
        elif isinstance(s, If):
            out.append(If(s.cond, _rewrite(s.then, racing, on_racing, drop_writes),
                          _rewrite(s.orelse, racing, on_racing, drop_writes), span=s.span))
        elif isinstance(s, (For, While)):
            twin = copy.copy(s)
            twin.body = _rewrite(s.body, racing, on_racing, drop_writes)
            out.append(twin)
        else:
            out.append(s)
    return out


def _fresh_copy(task: Task, keep: set) -> Task:
    """task with statements and locals of its own (a local two tasks share would get a
    context slot); fields and the kernel's shared locals (`keep`, ids) stay the same."""
    memo: dict = {id(t): t for t in ALL_TYPES}
    for s in walk(task.body):
        for f in (getattr(s, "field", None),):
            if f is not None:
                memo[id(f)] = f
    for obj in keep:
        memo[id(obj)] = obj
    twin = copy.deepcopy(task, memo)
    for v in {id(x): x for x in memo.values() if isinstance(x, Var)}.values():
        if v not in keep:
            v.id = next(ir_nodes._ids)
    return twin


def _finish(f: Field) -> Task:
    """For every entry of f: add acc / scale, then clear the three shadows."""
    mx, count, acc = shadows(f)
    n = math.prod(f.shape)
    k = Var("fixed_entry", i32)
    body, indices, rest = [], [], VarRef(k)
    for extent in reversed(f.shape):
        iv = Var("fixed_index", i32)
        body.append(Assign(iv, B.make(Op.MOD, rest, B.const(extent, i32))))
        rest = B.make(Op.FLOORDIV, rest, B.const(extent, i32))
        indices.insert(0, VarRef(iv))
    idx = tuple(indices)
    for comp in range(math.prod(f.elem_shape)):
        m, c, a, old = (Var("fixed_max", f64), Var("fixed_count", i64), Var("fixed_acc", i64),
                        Var("fixed_old", f.dtype))
        scaled: list = []
        n1 = B.make(Op.BIT_AND, VarRef(c), B.const(COUNTED - 1, i64))
        n2 = B.make(Op.SHR, VarRef(c), B.const(32, i64))
        total = B.make(Op.ADD, B.cast(VarRef(old), f64),
                       B.make(Op.TRUEDIV, B.cast(VarRef(a), f64),
                              _scale(VarRef(m), B.cast(n1, f64), scaled)))
        nan = B.const(math.nan, f.dtype)
        body += [Load(c, count, comp, idx), If(B.make(Op.NE, VarRef(c), B.const(0, i64)), [
            AssertStmt(B.make(Op.EQ, n1, n2), OVERFLOW),
            Load(m, mx, comp, idx), Load(a, acc, comp, idx), Load(old, f, comp, idx),
            *scaled, If(B.make(Op.LT, VarRef(m), B.const(HUGE, f64)),
               [Store(f, comp, idx, B.cast(total, f.dtype))], [Store(f, comp, idx, nan)]),
            Store(mx, comp, idx, B.const(0.0, f64)), Store(count, comp, idx, B.const(0, i64)),
            Store(acc, comp, idx, B.const(0, i64))], [])]
    return Task("range", body, k, B.const(0, i32), B.const(n, i32))


def extend(kir, shared_vars) -> dict:
    """Append to kir.tasks the fixed-point tasks of each task that can have them; returns
    {task index: (its tasks' indices in launch order)}. shared_vars: the kernel's locals that
    live in the context (layout.var_slot), which a task that assigns one cannot give up."""
    plans: dict = {}
    keep = set(shared_vars) | set(kir.arg_vars)
    for k, task in enumerate(list(kir.tasks)):
        racing = racing_atomics(task)
        if racing is None or any(isinstance(s, Assign) and s.var in shared_vars
                                 for s in walk(task.body)):
            continue
        ids = {id(s) for s in racing}
        bound = copy.copy(task)
        bound.body = _rewrite(task.body, ids, _bound, drop_writes=True)
        bound = _fresh_copy(bound, keep)
        accumulate = copy.copy(task)
        accumulate.body = _rewrite(task.body, ids, _accumulate, drop_writes=False)
        accumulate = _fresh_copy(accumulate, keep)
        fields = list({id(s.field): s.field for s in racing}.values())
        order = [len(kir.tasks), len(kir.tasks) + 1]
        kir.tasks += [bound, accumulate]
        for f in fields:
            order.append(len(kir.tasks))
            kir.tasks.append(_finish(f))
        plans[k] = tuple(order)
    return plans
