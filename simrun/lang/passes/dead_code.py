"""Remove computations whose results nothing uses.

Reverse mode replays the forward sweep for every local it might need, and recomputes inner
loops (autodiff/recompute.py); most of that is dead in a given gradient kernel: the forward
loop of `acc += e(j)` is only needed for `acc`, which the adjoint never reads. LLVM cannot drop
it, because the replay also pushes values on the autodiff stack. Likewise `ti.atomic_add(g[i],
v)` returns the old value: when that value is unused, the atomic is a plain scatter that
codegen may privatise (codegen/schedule.py).

Pre: structured IR. Post: an assignment or load whose local is not live after it (backward
liveness through the kernel's tasks in order, loops to a fixpoint; a local is used by stores,
atomics, asserts, prints, returns, control flow and pushes) is gone; a local none of whose
pops is live loses all its pushes and pops together, so the stack stays balanced; atomics whose
old value is not live drop it; `if`s with nothing left in either branch and counted loops with
an empty body and a dead counter go. Random draws stay: a draw's number depends on the draws
before it.
"""

from __future__ import annotations

import copy
import dataclasses

from ..ir.access import stmt_reads
from ..ir.nodes import (
    Assign,
    Atomic,
    Break,
    Continue,
    For,
    If,
    KernelIR,
    Load,
    Random,
    Return,
    StackPop,
    StackPush,
    While,
    walk,
)


class _Liveness:
    """Backward liveness over structured IR; loops iterate to a fixpoint.

    Only the final pass over a loop body records what it sees (`recording`): the passes of a
    fixpoint iteration run with live sets that are still growing."""

    def __init__(self):
        self.recording = True
        self.needed: set = set()    # ids of assignments/loads whose local is live after them
        self.popped: set = set()    # locals some pop of which is live after it
        self.results: set = set()   # ids of atomics whose old value is live
        self.for_vars: set = set()  # ids of counted loops whose counter is live after them

    def block(self, body, live: set, head: set) -> set:
        """Live before `body` given live after it; head: live at the enclosing loop's head."""
        for s in reversed(body):
            live = self.stmt(s, live, head)
        return live

    def stmt(self, s, live: set, head: set) -> set:
        reads = set(stmt_reads(s))
        if isinstance(s, (Assign, Load)):
            if s.var not in live:
                return live
            if self.recording:
                self.needed.add(id(s))
            return (live - {s.var}) | reads
        if isinstance(s, StackPop):
            if s.var in live and self.recording:
                self.popped.add(s.var)
            return live - {s.var}
        if isinstance(s, Atomic) and s.result is not None:
            if s.result in live and self.recording:
                self.results.add(id(s))
            return (live - {s.result}) | reads
        if isinstance(s, Random):
            return live - {s.var}
        if isinstance(s, If):
            return self.block(s.then, live, head) | self.block(s.orelse, live, head) | reads
        if isinstance(s, For):
            if s.var in live and self.recording:
                self.for_vars.add(id(s))
            return self.loop(s.body, live | reads, s.var)
        if isinstance(s, While):
            return self.loop(s.body, live, None)
        if isinstance(s, (Break, Continue)):
            return set(head)  # a superset of what is live after the loop or at its head
        if isinstance(s, Return):
            return reads
        return live | reads  # push, store, atomic, assert, print

    def loop(self, body, head: set, var, carried=None) -> set:
        """Live before a loop whose head has at least `head` live; var: its counter. carried:
        the locals whose values pass from one iteration to the next (all of them when None)."""
        recording, self.recording = self.recording, False
        while True:
            entry = self.block(body, head, head) - {var}
            grown = head | (entry if carried is None else entry & carried)
            if grown == head:
                break
            head = grown
        self.recording = recording
        self.block(body, head, head)
        return head

    def kernel(self, tasks, shared: set) -> None:
        """Tasks run in order; a range task's iterations share only `shared`, the kernel's
        arguments and top-level locals (the others are private to an iteration)."""
        live: set = set()
        for task in reversed(tasks):
            if task.kind == "range":
                bounds = set(stmt_reads(For(task.var, task.begin, task.end, [])))
                live = self.loop(task.body, live & shared, task.var, shared) | bounds
            else:
                live = self.block(task.body, live, set())


def _sweep(body, seen: _Liveness) -> list:
    out = []
    for s in body:
        if isinstance(s, (Assign, Load)):
            if id(s) in seen.needed:
                out.append(s)
        elif isinstance(s, (StackPush, StackPop)):
            if s.var in seen.popped:
                out.append(s)
        elif isinstance(s, Atomic) and s.result is not None and id(s) not in seen.results:
            s = copy.copy(s)
            s.result = None
            out.append(s)
        elif isinstance(s, If):
            then, orelse = _sweep(s.then, seen), _sweep(s.orelse, seen)
            if then or orelse:
                out.append(If(s.cond, then, orelse, span=s.span))
        elif isinstance(s, For):
            inner = _sweep(s.body, seen)
            if inner or id(s) in seen.for_vars:
                out.append(For(s.var, s.begin, s.end, inner, span=s.span))
        elif isinstance(s, While):
            loop = copy.copy(s)
            loop.body = _sweep(s.body, seen)
            out.append(loop)
        else:
            out.append(s)
    return out


def _size(tasks) -> int:
    """Statements plus atomics' results: a sweep only ever lowers it."""
    return sum(1 + (getattr(s, "result", None) is not None) for t in tasks for s in walk(t.body))


def _unshared(body) -> list:
    """A copy of the statement tree: reverse mode puts one statement object in several places
    (a recomputed loop body), and liveness is recorded per statement object."""
    out = []
    for s in body:
        s = copy.copy(s)
        if isinstance(s, If):
            s.then, s.orelse = _unshared(s.then), _unshared(s.orelse)
        elif isinstance(s, (For, While)):
            s.body = _unshared(s.body)
        out.append(s)
    return out


def run(kir: KernelIR) -> KernelIR:
    shared = set(kir.arg_vars) | set(kir.extra.get("top_level_vars", ()))
    tasks = [dataclasses.replace(t, body=_unshared(t.body)) for t in kir.tasks]
    size = _size(tasks)
    while True:
        seen = _Liveness()
        seen.kernel(tasks, shared)
        tasks = [dataclasses.replace(t, body=_sweep(t.body, seen)) for t in tasks]
        if _size(tasks) == size:
            return dataclasses.replace(kir, tasks=tasks)
        size = _size(tasks)
