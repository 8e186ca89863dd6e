"""The pass order, in one place: frontend IR (checked by loop_ranges) -> autodiff for the
launch mode -> dead code removed -> atomics hoisted out of serial loops; compiler.py takes
it from there to LLVM.

Each pass is a function KernelIR -> KernelIR. `checks` run after every pass with its name
(tests register ir/verify.py's verify there, so every kernel the suite compiles is verified
after each pass).
"""

from __future__ import annotations

from collections.abc import Callable

from .autodiff import transform
from .ir.nodes import KernelIR
from .passes import dead_code, hoist_atomics, loop_ranges, reciprocals, unread_outputs

checks: list[Callable[[KernelIR, str], None]] = []


def passes(mode: str, name: str, unread: tuple = (), varied: tuple | None = None
           ) -> list[tuple[str, Callable[[KernelIR], KernelIR]]]:
    """(name, pass) in the order they run, for a launch in `mode` of kernel `name`; `unread`:
    fields whose writes the caller never reads (dropped, and what fed only them); `varied`:
    in forward modes, the fields whose tangents may be nonzero (None: all)."""
    shared = [("reciprocals", reciprocals.run)] if mode == "value_reverse" else []
    pruned = [("unread_outputs", lambda kir: unread_outputs.run(kir, unread)),
              ("dead_code", dead_code.run)] if unread else []
    return [
        ("frontend", loop_ranges.run),  # a check: refuses a loop's certain out-of-range access
        (f"autodiff ({mode})", lambda kir: transform(
            kir, mode, name, None if varied is None else frozenset(varied))),
        ("dead_code", dead_code.run),
        *pruned,
        *shared,
        ("hoist_atomics", hoist_atomics.run),
    ]


def run(kir: KernelIR, mode: str, name: str, unread: tuple = (),
        varied: tuple | None = None) -> KernelIR:
    """The kernel's IR after every pass, ready for compiler.compile_kernel."""
    for pass_name, run_pass in passes(mode, name, unread, varied):
        kir = run_pass(kir)
        for check in checks:
            check(kir, pass_name)
    return kir
