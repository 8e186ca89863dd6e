"""Reverse mode on the IR: each grad task re-runs its forward sweep, then walks it backwards.

Locals overwritten inside the task (assigned twice, or inside a loop) are pushed on a growable
per-thread stack before each overwrite and popped on the way back, so no fixed stack size
limits loop trip counts.  Inner loops whose iterations can be rebuilt from their inputs
(recompute.py: the typical energy loop `acc += e(x[i], x[j])`) instead re-run their body at
the start of each reverse iteration and save their locals once around the whole loop.  Global loads' adjoints go to field.grad atomically; a store's adjoint
reads and clears field.grad.  Writes are replayed in the forward sweep only for fields the
kernel also reads (the runtime restores those fields' pre-launch values first).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager

from ..errors import AutodiffError
from ..fields import grad_of
from ..ir import builder
from ..ir.access import stmt_reads, task_locals
from ..ir.nodes import (
    AssertStmt,
    Assign,
    Atomic,
    Break,
    For,
    If,
    KernelIR,
    Load,
    Print,
    Random,
    Return,
    StackPop,
    StackPush,
    Store,
    Task,
    Var,
    VarRef,
    While,
    expr_vars,
    walk,
)
from ..ir.ops import ATOMIC_NAMES, Op
from ..ir.reductions import accumulation, var_reductions
from .analysis import kernel_access
from .normalize import normalize
from .races import _Canonical, check_races
from .recompute import loop_defs, order_free, recomputable, recompute_body
from .rules import partials
from .seeds import hoist_seed_loads
from .value import refuse_value


def has_grad(f) -> bool:
    return grad_of(f) is not None and getattr(f, "role", "primal") == "primal"


class TaskReverser:
    def __init__(self, task: Task, replay_fields: set, kernel_name: str, slot_vars: set,
                 stopped: frozenset = frozenset(), written: frozenset = frozenset(),
                 with_value: bool = False):
        self.task = task
        self.with_value = with_value  # also make the kernel's own writes (value_reverse)
        self.written = written  # fields any statement of the kernel writes
        self.write_stmts: dict = {}  # field -> the kernel's stores and atomics into it
        self.stopped = stopped  # ti.stop_grad fields: their loads take no adjoint
        self.replay = replay_fields
        self.kernel_name = kernel_name
        self.slot_vars = slot_vars
        self.adj: dict = {}
        self.multi: set = set()
        self.used = set()
        self.recompute: set = set()  # loops reversed by re-running their body (recompute.py)
        self.in_recompute = False  # inside such a loop: no per-statement push or pop
        self.reductions: set = set()  # top-level locals this parallel loop only adds to

    # ------------------------------------------------------------ analysis
    def find_multi(self, body, in_loop: bool, counts: dict) -> None:
        for s in body:
            targets = []
            if isinstance(s, (Assign, Load, Random)):
                targets = [s.var]
            elif isinstance(s, Atomic) and s.result is not None:
                targets = [s.result]
            for v in targets:
                counts[v] = counts.get(v, 0) + 1
                if in_loop or counts[v] > 1:
                    self.multi.add(v)
            if isinstance(s, If):
                self.find_multi(s.then, in_loop, counts)
                self.find_multi(s.orelse, in_loop, counts)
            elif isinstance(s, (For, While)):
                self.find_multi(s.body, True, counts)

    def adjoint(self, v: Var) -> Var:
        a = self.adj.get(v)
        if a is None:
            a = Var(f"adj_{v.name}", v.dtype)
            self.adj[v] = a
        return a

    def saves(self, v: Var) -> bool:
        """Whether a statement assigning v pushes the old value (and its reversal pops it)."""
        return v in self.multi and not self.in_recompute

    @contextmanager
    def recomputing(self):
        self.in_recompute = True
        try:
            yield
        finally:
            self.in_recompute = False

    def find_recomputable(self, body) -> None:
        protected = set(self.slot_vars)
        unwritten = self._unwritten_test(body)
        for s in walk(body):
            if isinstance(s, For) and recomputable(s, self.written, protected, unwritten):
                self.recompute.add(s)

    def _unwritten_test(self, body):
        """load -> whether no write of the kernel can reach its elements: every write to its
        field is in this parallel loop and provably elsewhere (races.py's disjoint)."""
        if self.task.kind != "range":
            return lambda load: False
        canon = _Canonical(self.task)
        mine = {id(s) for s in walk(body) if isinstance(s, (Store, Atomic))}
        return lambda load: all(id(w) in mine and canon.disjoint(load, w)
                                for w in self.write_stmts.get(load.field, ()))

    def error(self, message: str, span) -> AutodiffError:
        return AutodiffError(message, span, self.kernel_name)

    # ------------------------------------------------------------ forward sweep
    def forward(self, body) -> list:
        out = []
        for s in body:
            if isinstance(s, Assign) and s.var in self.reductions:
                continue  # its reversal needs no value of the total
            if isinstance(s, (Assign, Load, Random)):
                if self.saves(s.var):
                    out.append(StackPush(s.var))
                out.append(s)
            elif isinstance(s, Store):
                if s.field in self.replay:
                    out.append(s)
            elif isinstance(s, Atomic):
                if s.result is not None and self.saves(s.result):
                    out.append(StackPush(s.result))
                if s.field in self.replay or (self.with_value and not self.in_recompute):
                    out.append(s)  # a recomputed loop adds in its reverse iterations instead
                elif s.result is not None and s.result in self.used:
                    raise self.error(
                        f"the value returned by ti.atomic_{ATOMIC_NAMES[s.op]} on field "
                        f"'{s.field.name}' is used, but replaying the atomic in the gradient "
                        "kernel would repeat its side effect; read the field in this kernel or "
                        "move the atomic into a kernel outside the differentiated region", s.span)
            elif isinstance(s, If):
                out.append(If(s.cond, self.forward(s.then), self.forward(s.orelse), span=s.span))
            elif isinstance(s, For) and s in self.recompute:
                out += [StackPush(v) for v in loop_defs(s.body)]
                with self.recomputing():
                    out.append(For(s.var, s.begin, s.end, self.forward(s.body), span=s.span))
            elif isinstance(s, For):
                out.append(For(s.var, s.begin, s.end, self.forward(s.body), span=s.span))
            elif isinstance(s, While):
                inner = self.forward(s.body[:s.inner_len])
                loop = While(inner + s.body[s.inner_len:], span=s.span)
                out.append(loop)
            elif isinstance(s, Break):
                out.append(s)
            elif isinstance(s, (AssertStmt, Print, Return)):
                continue
            else:
                raise self.error(f"cannot differentiate {type(s).__name__}", s.span)
        return out

    # ------------------------------------------------------------ reverse sweep
    def backprop(self, e, g, out: list) -> None:
        if not e.dtype.is_float:
            return
        if isinstance(e, VarRef):
            v = e.var
            # a top-level local read by a parallel loop: every iteration adds to its adjoint
            # (`a = a + g` is a reduction the code generator gives per-thread partials)
            a = self.adjoint(v)
            out.append(Assign(a, VarRef(a) + builder.cast(g, v.dtype)))
            return
        if not hasattr(e, "op"):
            return
        ps = partials(e)
        if e.op is Op.MUL and ps[0] is not None and _same(e.args[0], e.args[1]):
            # x * x: one adjoint add of 2 x g, not two of x g (half the adds, and LLVM can
            # fold the 2 into a constant factor of g, such as sqrt's 0.5)
            self.backprop(e.args[0], builder.cast(g * (2.0 * e.args[0]), e.args[0].dtype), out)
            return
        live = [(a, p) for a, p in zip(e.args, ps) if p is not None]
        if len(live) > 1 and not isinstance(g, VarRef):
            t = Var("g", g.dtype)
            out.append(Assign(t, g))
            g = VarRef(t)
        for a, p in live:
            self.backprop(a, builder.cast(g * p, a.dtype), out)

    def take_adjoint(self, v: Var, out: list):
        """Read and clear v's adjoint; None when v carries no gradient."""
        if not v.dtype.is_float or v not in self.adj:
            return None
        a = self.adj[v]
        t = Var(f"t_{v.name}", v.dtype)
        out.append(Assign(t, VarRef(a)))
        out.append(Assign(a, builder.const(0, v.dtype)))
        return VarRef(t)

    def reverse(self, body) -> list:
        out: list = []
        for s in reversed(body):
            if isinstance(s, Assign) and s.var in self.reductions:
                # `total += e` in a parallel loop: total's adjoint reaches every e unchanged;
                # every iteration reads it, none clears it (a shared slot)
                self.backprop(accumulation(s), VarRef(self.adjoint(s.var)), out)
            elif isinstance(s, Assign):
                g = self.take_adjoint(s.var, out)
                if self.saves(s.var):
                    out.append(StackPop(s.var))
                if g is not None:
                    self.backprop(s.value, g, out)
            elif isinstance(s, Load):
                g = self.take_adjoint(s.var, out)
                if self.saves(s.var):
                    out.append(StackPop(s.var))
                if g is not None and has_grad(s.field) and not s.no_grad and \
                        s.field not in self.stopped:
                    out.append(Atomic(Op.ADD, s.field.grad, s.comp, s.indices, g, span=s.span))
            elif isinstance(s, Random):
                if self.saves(s.var):
                    out.append(StackPop(s.var))
            elif isinstance(s, Store):
                if has_grad(s.field) and s.value.dtype.is_float:
                    t = Var("gs", s.field.dtype)
                    out.append(Load(t, s.field.grad, s.comp, s.indices, span=s.span))
                    out.append(Store(s.field.grad, s.comp, s.indices,
                                     builder.const(0, s.field.dtype), span=s.span))
                    self.backprop(s.value, VarRef(t), out)
            elif isinstance(s, Atomic):
                self.reverse_atomic(s, out)
            elif isinstance(s, If):
                out.append(If(s.cond, self.reverse(s.then), self.reverse(s.orelse), span=s.span))
            elif isinstance(s, For):
                rv = Var("rev", s.var.dtype)
                n = s.end - s.begin
                if s in self.recompute and order_free(s):
                    body = [Assign(s.var, s.begin + VarRef(rv))]
                else:
                    body = [Assign(s.var, s.end - 1 - VarRef(rv))]
                if s in self.recompute:
                    with self.recomputing():
                        body += recompute_body(s.body, self.with_value) + self.reverse(s.body)
                else:
                    body += self.reverse(s.body)
                out.append(For(rv, builder.const(0, s.var.dtype), n, body, span=s.span))
                if s in self.recompute:
                    out += [StackPop(v) for v in reversed(loop_defs(s.body))]
            elif isinstance(s, While):
                rv = Var("rev", s.counter.dtype)
                body = self.reverse(s.body[:s.inner_len])
                out.append(For(rv, builder.const(0, rv.dtype), VarRef(s.counter), body,
                               span=s.span))
        return out

    def reverse_atomic(self, s: Atomic, out: list) -> None:
        if s.result is not None:
            g = self.take_adjoint(s.result, out)
            if self.saves(s.result):
                out.append(StackPop(s.result))
            if g is not None and has_grad(s.field):
                raise self.error(f"the old value returned by ti.atomic_{ATOMIC_NAMES[s.op]} on "
                                 f"field '{s.field.name}' is differentiated; simrun cannot "
                                 "differentiate through an atomic's return value", s.span)
        if not has_grad(s.field) or not s.field.dtype.is_float:
            return
        if s.op not in (Op.ADD, Op.SUB):
            name = ATOMIC_NAMES[s.op]
            raise self.error(
                f"ti.atomic_{name} (or `{name}=`) on field '{s.field.name}', which needs a "
                "gradient: its derivative depends on which write wins and simrun will not "
                "guess it (Taichi silently treats it as an add); compute the "
                f"{name} in a local variable, or store into a field without needs_grad", s.span)
        t = Var("ga", s.field.dtype)
        out.append(Load(t, s.field.grad, s.comp, s.indices, span=s.span))
        g = VarRef(t) if s.op is Op.ADD else -VarRef(t)
        self.backprop(s.value, g, out)

    # ------------------------------------------------------------ whole task
    def run(self) -> Task:
        check_races(self.task, self.kernel_name)
        for st in self.task.body:
            for inner in _nested(st):
                if isinstance(inner, Return):
                    raise self.error(
                        "a `return` inside an if or a loop ends the kernel early, and the "
                        "gradient cannot tell which statements ran; assign the result to a "
                        "local and return it once, at the end of the kernel", inner.span)
        body = normalize(self.task.body)
        reads = [v for st in walk(body) for v in stmt_reads(st)]  # program order
        self.used = set(reads)
        self.find_multi(body, False, {})
        slot_writes = [st for st in walk(body) if any(v in self.slot_vars for v in _defs(st))]
        if self.task.kind == "range":
            self.multi -= self.slot_vars
            self.reductions = set(var_reductions(dataclasses.replace(self.task, body=body),
                                                 self.slot_vars))
            for st in slot_writes:
                if st.var not in self.reductions and st.var.dtype.is_float:
                    raise self.error(
                        f"the parallel loop assigns the kernel-level local '{st.var.name}' "
                        "(other than `+=`), so its value after the loop depends on which "
                        "iteration ran last; the gradient cannot follow it. Make the loop "
                        "serial with ti.loop_config(serialize=True), or keep the value in a "
                        "field", st.span)
        else:
            # a kernel-level local assigned here holds another loop's value before: saved,
            # so the reversal of `a = a * a` sees the old a
            self.multi |= {st.var for st in slot_writes}
        self.find_recomputable(body)
        # every float local that is read gets its adjoint before the walk: the walk meets a
        # loop-carried local's assignment (`prev = x[j]`, late in the body) before the read
        # that feeds it (`d = x[j] - prev`, earlier), and a lazily created adjoint would drop
        # what the next iteration's read sends back
        for v in reads:  # in program order, so the IR text (the cache key) stays stable
            if v.dtype.is_float:
                self.adjoint(v)
        fwd = self.forward(body)
        rev = self.reverse(body)
        init = [Assign(a, builder.const(0, a.dtype)) for v, a in self.adj.items()
                if v not in self.slot_vars]
        return dataclasses.replace(self.task, body=hoist_seed_loads(init + fwd + rev))


def _refuse_grad_reads(kir: KernelIR, access) -> None:
    """A kernel that reads a gradient (x.grad[i]) has no gradient itself: its adjoint would
    need second-order adjoints simrun does not keep, so it would come out silently as zero."""
    read = sorted(f.name for f in access.reads if getattr(f, "role", "primal") != "primal")
    if read:
        raise AutodiffError(f"kernel '{kir.name}' reads the gradient field '{read[0]}': Cannot "
                            "automatically differentiate through a grad tensor (Taichi's "
                            "words). Read gradients in kernels that are not differentiated, "
                            "or copy them into a plain field first")


def reverse_kernel(kir: KernelIR, with_value: bool = False) -> KernelIR:
    """The kernel's gradient; `with_value` (mode value_reverse): one launch that also makes
    the kernel's own adds, sharing the pair terms between U and dU/dx (see value.py)."""
    access = kernel_access(kir)
    _refuse_grad_reads(kir, access)
    replay = access.reads & access.writes
    if with_value:
        refuse_value(kir, replay)
    slot_vars = set(kir.extra.get("top_level_vars", []))
    prologue, snaps, crosses = _replay_top_level(kir, slot_vars)
    tasks: list = []
    adj_slots: dict = {}
    write_stmts: dict = {}
    for task in kir.tasks:
        for s in walk(task.body):
            if isinstance(s, (Store, Atomic)):
                write_stmts.setdefault(s.field, []).append(s)
    for k in reversed(range(len(kir.tasks))):
        if k in snaps:  # loop k is reversed on the kernel-level locals it started with
            tasks.append(Task("serial", [Assign(v, VarRef(snap)) for v, snap in snaps[k]],
                              span=kir.tasks[k].span))
        rv = TaskReverser(kir.tasks[k], replay, kir.name, slot_vars,
                          frozenset(kir.extra.get("stop_grad", ())), frozenset(access.writes),
                          with_value)
        rv.adj = adj_slots
        rv.write_stmts = write_stmts
        tasks.append(rv.run())
    zero = _zero_adjoints(tasks, [a for v, a in adj_slots.items() if v in slot_vars])
    if zero:
        prologue.append(Task("serial", zero, span=kir.span))
    extra = dict(kir.extra)
    extra["top_level_vars"] = list(slot_vars) + [a for v, a in adj_slots.items()
                                                 if v in slot_vars] + \
        [snap for k in sorted(snaps) for _, snap in snaps[k]]
    extra["n_prologue"] = len(prologue)
    extra["cross_task_locals"] = crosses
    suffix = "_value_grad" if with_value else "_grad"
    return KernelIR(kir.name + suffix, prologue + tasks, kir.arg_vars, [], kir.span, extra)


def _zero_adjoints(tasks: list, adjoints: list) -> list:
    """Kernel-level adjoints start at 0: in the serial task that first touches one (so a
    local of that task alone needs no context slot, see codegen/layout.py), else in a
    prologue task (returned: their assignments)."""
    first: dict = {}
    for k, task in enumerate(tasks):
        for v in task_locals(task):
            first.setdefault(v, k)
    prologue, at_start = [], {}
    for a in adjoints:
        zero = Assign(a, builder.const(0, a.dtype))
        k = first.get(a)
        if k is not None and tasks[k].kind == "serial":
            at_start.setdefault(k, []).append(zero)
        else:
            prologue.append(zero)
    for k, zeros in at_start.items():
        tasks[k] = dataclasses.replace(tasks[k], body=zeros + tasks[k].body)
    return prologue


def _replay_top_level(kir, slot_vars) -> tuple[list, dict, bool]:
    """The grad kernel's prologue: the forward's kernel-level locals rebuilt loop by loop
    (each loop replayed without its global writes), with a copy of what loop k reads taken
    before it where a later loop (or k itself) changes it; snaps[k] = [(local, copy)]; and
    whether any loop takes a kernel-level local from before it.

    Only the all-at-once gradient launch uses it: a kernel that reads fields it writes and
    passes locals between loops is refused (tape.py), so the fields hold what every loop
    read."""
    reads = [_entry_reads(t) & slot_vars for t in kir.tasks]
    writes = [{v for s in walk(t.body) for v in _defs(s)} & slot_vars for t in kir.tasks]
    prologue: list = []
    snaps: dict = {}
    for k, task in enumerate(kir.tasks):
        later = set().union(*writes[k:])
        keep = [v for v in sorted(reads[k], key=lambda v: v.name) if v in later]
        if keep:
            snaps[k] = [(v, Var(f"at{k}_{v.name}", v.dtype)) for v in keep]
            prologue.append(Task("serial", [Assign(c, VarRef(v)) for v, c in snaps[k]],
                                 span=task.span))
        if writes[k] & set().union(*reads[k + 1:]):
            prologue.append(dataclasses.replace(task, body=_pure_replay(task.body)))
    return prologue, snaps, any(reads)


def _entry_reads(task) -> set:
    """Locals the task may read before assigning them: the values it takes from before it.
    Conservative: an assignment inside an if or a loop does not count as made."""
    exposed = {v for e in (task.begin, task.end) if e is not None for v in expr_vars(e)}
    assigned: set = set()
    for s in task.body:
        exposed |= {v for t in walk([s]) for v in stmt_reads(t)} - assigned
        assigned |= set(_defs(s))
    return exposed


def _nested(s):
    """The statements inside s's branches or body (not s itself)."""
    if isinstance(s, If):
        return list(walk(s.then)) + list(walk(s.orelse))
    if isinstance(s, (For, While)):
        return list(walk(s.body))
    return []


def _same(a, b) -> bool:
    """The same value: one expression object, or reads of one local."""
    return a is b or (isinstance(a, VarRef) and isinstance(b, VarRef) and a.var is b.var)


def _defs(s):
    if isinstance(s, (Assign, Load, Random)):
        yield s.var


def _pure_replay(body):
    """A serial task's local computations without any global write (recomputes its locals)."""
    out = []
    for s in body:
        if isinstance(s, (Store, Print, AssertStmt, Return)):
            continue
        if isinstance(s, Atomic):
            if s.result is not None:
                out.append(Load(s.result, s.field, s.comp, s.indices, span=s.span))
            continue
        if isinstance(s, If):
            out.append(If(s.cond, _pure_replay(s.then), _pure_replay(s.orelse), span=s.span))
        elif isinstance(s, For):
            out.append(For(s.var, s.begin, s.end, _pure_replay(s.body), span=s.span))
        elif isinstance(s, While):
            out.append(While(_pure_replay(s.body), span=s.span))
        else:
            out.append(s)
    return out


__all__ = ["reverse_kernel", "has_grad", "Break"]
