"""The kernel context: one array of 8-byte slots shared by every task of a launch."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.access import stmt_fields, task_locals
from ..ir.nodes import (
    Random,
    walk,
)
from .schedule import (
    MAX_CHUNKS,
    MAX_GROUPS,
    SCHED_SLOTS,
    private_scatters,
    reduction_count,
)

ERR_SLOTS = 8
MERGE_STRIDE = 16  # a privatised field's merge counters: next slice, slices done (own lines)
STACK_BYTES = 24  # per thread: data pointer, size, capacity


@dataclass
class Layout:
    """Slot numbers for fields, arguments, cross-task locals, returns and runtime state."""

    fields: list = field(default_factory=list)          # Field-like objects, slot = index
    field_slot: dict = field(default_factory=dict)      # id(field) -> slot
    var_slot: dict = field(default_factory=dict)        # Var -> slot
    ret_slot: int = 0
    n_ret: int = 0
    err_slot: int = 0
    rng_slot: int = 0                                   # this launch's random key (u64)
    uses_random: bool = False
    stack_slot: int = 0
    sched_slot: int = 0                                 # range tasks' chunk scheduling state
    partial_slot: int = 0                               # per-chunk partial sums of reductions
    n_partials: int = 0                                 # reductions per chunk (max over tasks)
    merge_slot: int = 0                                 # per privatised field: merge counters
    copy_slot: int = 0                                  # per group and field: its copy
    n_copies: int = 0                                   # privatised fields per task, at most
    size: int = 0
    sites: list = field(default_factory=list)           # debug error sites

    def slot_of_field(self, f) -> int:
        return self.field_slot[id(f)]


def build_layout(kernel) -> Layout:
    lay = Layout()
    for task in kernel.tasks:
        for s in walk(task.body):
            lay.uses_random |= isinstance(s, Random)
            for f in stmt_fields(s):
                if id(f) not in lay.field_slot:
                    lay.field_slot[id(f)] = len(lay.fields)
                    lay.fields.append(f)
    slot = len(lay.fields)
    for v in kernel.arg_vars:
        lay.var_slot[v] = slot
        slot += 1
    for v in shared_top_level(kernel):
        if v not in lay.var_slot:
            lay.var_slot[v] = slot
            slot += 1
    lay.ret_slot, lay.n_ret = slot, len(kernel.ret_types)
    slot += max(1, lay.n_ret)
    lay.err_slot = slot
    slot += ERR_SLOTS
    lay.rng_slot = slot
    lay.stack_slot = slot + 1
    lay.sched_slot = slot + 2
    has_range = any(t.kind == "range" for t in kernel.tasks)
    lay.partial_slot = lay.sched_slot + (SCHED_SLOTS if has_range else 0)
    lay.n_partials = max([reduction_count(t, lay.var_slot) for t in kernel.tasks], default=0)
    lay.merge_slot = lay.partial_slot + MAX_CHUNKS * lay.n_partials
    lay.n_copies = max([len(private_scatters(t)) for t in kernel.tasks if t.kind == "range"],
                       default=0)
    lay.copy_slot = lay.merge_slot + MERGE_STRIDE * lay.n_copies
    lay.size = lay.copy_slot + MAX_GROUPS * lay.n_copies
    return lay


def shared_top_level(kernel) -> list:
    """The kernel's top-level locals that need a context slot: those a range task touches
    (Taichi's global temporaries, shared by the loop's iterations) or more than one task
    does. A local of one serial task alone lives in a register: a top level with thousands
    of them in slots (a 2,000-term sum) made LLVM's optimiser take half a minute."""
    users: dict = {}
    for task in kernel.tasks:
        for v in task_locals(task):
            users.setdefault(v, []).append(task.kind)
    return [v for v in kernel.extra.get("top_level_vars", [])
            if len(users.get(v, ())) > 1 or "range" in users.get(v, ())]


__all__ = ["MERGE_STRIDE", "Layout", "build_layout", "shared_top_level"]
