"""Autodiff's value_reverse mode: a kernel's own writes and its gradient in one launch.

A force evaluation wants U and dU/dx together; launched as the kernel, then its gradient,
each pass gathers the partners and computes the pair terms (square roots, divisions) anew.
In value_reverse the gradient kernel also makes the kernel's writes: in its forward sweep,
or, in a loop the reverse pass recomputes (recompute.py), in each recomputed iteration, so
U's terms come from the values the derivative uses (and passes/reciprocals.py divides by
a shared divisor once). Which kernels qualify is decided here.
"""

from __future__ import annotations

from ..errors import AutodiffError
from ..ir.nodes import Atomic, KernelIR, Store, walk
from ..ir.ops import Op


def refuse_value(kir: KernelIR, replay: set) -> None:
    """value_reverse makes the kernel's writes during its gradient: exact only where they are
    adds into fields the kernel never reads (an energy's `U[None] += ...`), whose order
    changes the sums by rounding alone and whose values nothing in the kernel sees."""
    if replay:
        raise AutodiffError(f"kernel '{kir.name}' reads the field "
                            f"'{sorted(f.name for f in replay)[0]}' it writes: its value and "
                            "gradient cannot share one launch; launch it, then its gradient")
    for task in kir.tasks:
        for s in walk(task.body):
            if isinstance(s, Store) or (isinstance(s, Atomic) and (
                    s.op not in (Op.ADD, Op.SUB) or s.result is not None)):
                raise AutodiffError(f"kernel '{kir.name}' writes '{s.field.name}' other "
                                    "than by an add: its value and gradient cannot share "
                                    "one launch; launch it, then its gradient", s.span)
