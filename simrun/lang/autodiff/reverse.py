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
from ..ir import builder
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
from ..ir.ops import Op
from .analysis import kernel_access, used_vars
from .normalize import normalize
from .races import check_races
from .recompute import loop_defs, recomputable, recompute_body
from .rules import partials


def has_grad(f) -> bool:
    return getattr(f, "grad", None) is not None and getattr(f, "role", "primal") == "primal"


class TaskReverser:
    def __init__(self, task: Task, replay_fields: set, kernel_name: str, slot_vars: set,
                 stopped: frozenset = frozenset(), written: frozenset = frozenset()):
        self.task = task
        self.written = written  # fields any statement of the kernel writes
        self.stopped = stopped  # ti.stop_grad fields: their loads take no adjoint
        self.replay = replay_fields
        self.kernel_name = kernel_name
        self.slot_vars = slot_vars
        self.adj: dict = {}
        self.multi: set = set()
        self.used = set()
        self.recompute: set = set()  # loops reversed by re-running their body (recompute.py)
        self.in_recompute = False  # inside such a loop: no per-statement push or pop

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
        for s in walk(body):
            if isinstance(s, For) and recomputable(s, self.written, protected):
                self.recompute.add(s)

    def error(self, message: str, span) -> AutodiffError:
        return AutodiffError(message, span, self.kernel_name)

    # ------------------------------------------------------------ forward sweep
    def forward(self, body) -> list:
        out = []
        for s in body:
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
                if s.field in self.replay:
                    out.append(s)
                elif s.result is not None and s.result in self.used:
                    raise self.error(
                        f"the value returned by ti.atomic_{s.op} on field '{s.field.name}' is "
                        "used, but replaying the atomic in the gradient kernel would repeat its "
                        "side effect; read the field in this kernel or move the atomic into a "
                        "kernel outside the differentiated region", s.span)
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
            if isinstance(s, Assign):
                g = self.take_adjoint(s.var, out)
                if self.saves(s.var):
                    out.append(StackPop(s.var))
                if g is not None:
                    self.backprop(s.value, g, out)
            elif isinstance(s, Load):
                g = self.take_adjoint(s.var, out)
                if self.saves(s.var):
                    out.append(StackPop(s.var))
                if g is not None and has_grad(s.field) and s.field not in self.stopped:
                    out.append(Atomic("add", s.field.grad, s.comp, s.indices, g, span=s.span))
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
                body = [Assign(s.var, s.end - 1 - VarRef(rv))]
                if s in self.recompute:
                    with self.recomputing():
                        body += recompute_body(s.body) + self.reverse(s.body)
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
                raise self.error(f"the old value returned by ti.atomic_{s.op} on field "
                                 f"'{s.field.name}' is differentiated; simrun cannot "
                                 "differentiate through an atomic's return value", s.span)
        if not has_grad(s.field) or not s.field.dtype.is_float:
            return
        if s.op not in ("add", "sub"):
            raise self.error(
                f"ti.atomic_{s.op} (or `{s.op}=`) on field '{s.field.name}', which needs a "
                "gradient: its derivative depends on which write wins and simrun will not "
                "guess it (Taichi silently treats it as an add); compute the "
                f"{s.op} in a local variable, or store into a field without needs_grad", s.span)
        t = Var("ga", s.field.dtype)
        out.append(Load(t, s.field.grad, s.comp, s.indices, span=s.span))
        g = VarRef(t) if s.op == "add" else -VarRef(t)
        self.backprop(s.value, g, out)

    # ------------------------------------------------------------ whole task
    def run(self) -> Task:
        check_races(self.task, self.kernel_name)
        body = normalize(self.task.body)
        self.used = used_vars(body)
        self.find_multi(body, False, {})
        self.multi -= {v for v in self.multi if v in self.slot_vars and self.task.kind == "range"}
        self.find_recomputable(body)
        fwd = self.forward(body)
        rev = self.reverse(body)
        init = [Assign(a, builder.const(0, a.dtype)) for v, a in self.adj.items()
                if v not in self.slot_vars]
        return dataclasses.replace(self.task, body=init + fwd + rev)


def reverse_kernel(kir: KernelIR) -> KernelIR:
    access = kernel_access(kir)
    replay = access.reads & access.writes
    slot_vars = set(kir.extra.get("top_level_vars", []))
    tasks = []
    adj_slots: dict = {}
    for task in reversed(kir.tasks):
        rv = TaskReverser(task, replay, kir.name, slot_vars,
                          frozenset(kir.extra.get("stop_grad", ())), frozenset(access.writes))
        rv.adj = adj_slots
        tasks.append(rv.run())
    used_later = _slot_vars_used_across(kir, slot_vars)
    prologue = []
    for task in kir.tasks:
        if task.kind == "serial" and any(v in used_later for s in walk(task.body)
                                         for v in _defs(s)):
            prologue.append(Task("serial", [s for s in _pure_replay(task.body)], span=task.span))
    zero = [Assign(a, builder.const(0, a.dtype)) for v, a in adj_slots.items() if v in slot_vars]
    if zero:
        prologue.append(Task("serial", zero, span=kir.span))
    extra = dict(kir.extra)
    extra["top_level_vars"] = list(slot_vars) + [a for v, a in adj_slots.items()
                                                 if v in slot_vars]
    extra["n_prologue"] = len(prologue)
    extra["cross_task_locals"] = bool(used_later)
    return KernelIR(kir.name + "_grad", prologue + tasks, kir.arg_vars, [], kir.span, extra)


def _same(a, b) -> bool:
    """The same value: one expression object, or reads of one local."""
    return a is b or (isinstance(a, VarRef) and isinstance(b, VarRef) and a.var is b.var)


def _defs(s):
    if isinstance(s, (Assign, Load, Random)):
        yield s.var


def _slot_vars_used_across(kir, slot_vars) -> set:
    used = set()
    for _k, task in enumerate(kir.tasks):
        defined = {v for s in walk(task.body) for v in _defs(s)}
        for s in walk(task.body):
            for e in _exprs(s):
                for v in expr_vars(e):
                    if v in slot_vars and v not in defined:
                        used.add(v)
        if task.begin is not None:
            for e in (task.begin, task.end):
                used |= {v for v in expr_vars(e) if v in slot_vars}
    return used


def _exprs(s):
    from ..codegen.layout import _stmt_exprs

    return _stmt_exprs(s)


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
