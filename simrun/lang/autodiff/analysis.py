"""Which fields a kernel reads and writes, and which locals are ever read."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.access import stmt_reads
from ..ir.nodes import Atomic, Load, Store, VarRef, expr_vars, walk


@dataclass
class Access:
    reads: set = field(default_factory=set)
    writes: set = field(default_factory=set)


def kernel_access(kir) -> Access:
    acc = Access()
    for task in kir.tasks:
        for s in walk(task.body):
            if isinstance(s, Load):
                acc.reads.add(s.field)
            elif isinstance(s, Store):
                acc.writes.add(s.field)
            elif isinstance(s, Atomic):
                acc.writes.add(s.field)
                if s.result is not None and s.result in used_vars(task.body):
                    acc.reads.add(s.field)
    return acc


def used_vars(body) -> set:
    used = set()
    for s in walk(body):
        used.update(stmt_reads(s))
    return used


__all__ = ["kernel_access", "used_vars", "VarRef", "expr_vars"]
