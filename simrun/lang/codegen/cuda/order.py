"""Which tasks' results depend on the order a GPU's threads run in.

On the CPU, sums get per-chunk partials and most scatters per-group copies, added in a fixed
order; what is left (racing_scatters) runs on one thread under ti.init(deterministic=True).
The device has neither: every float add that several iterations make into one place (a
scatter, `s[None] += ...`, `total += ...`) is an atomic, and atomics from many threads land
in an order that changes from run to run. Under deterministic=True such a task runs on one
GPU thread (runtime/cuda.py), where the grid-stride loop visits its iterations in order.
Integer adds and float min/max give the same value in any order and stay parallel.
"""

from __future__ import annotations

from ...ir.nodes import Assign, Atomic, walk
from ...ir.ops import Op
from ...ir.reductions import accumulation
from ..schedule import owned_fields

ORDERED_OPS = (Op.ADD, Op.SUB, Op.MUL)  # float atomics whose result depends on the order


def races_on_device(task, var_slot) -> bool:
    """Whether a task's float results depend on its threads' order on a GPU: a range task
    that updates, with atomics, floats that other iterations update too (var_slot: the
    layout's slots of the kernel's shared locals)."""
    if task.kind != "range":
        return False
    owned = owned_fields(task)  # updated by their own iteration alone: plain adds
    for s in walk(task.body):
        if isinstance(s, Atomic) and s.field.dtype.is_float and s.op in ORDERED_OPS \
                and id(s.field) not in owned:
            return True
        if isinstance(s, Assign) and s.var in var_slot and s.var.dtype.is_float \
                and accumulation(s) is not None:
            return True
    return False
