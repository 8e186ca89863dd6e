"""How every job ends: the guard zones first, then the record says ok.

A kernel that wrote outside a field without --debug leaves results that cannot be trusted
(lang/guards.py); a job that recorded success first would hide it. So each job writes its
"done" record only through `finish`, which checks the guards of the fields made since the
job's kernels were set up (`current_generation`) and otherwise records the failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from simrun.lang.fields import current_generation
from simrun.stepper.run import SimulationError, check_guards

T = TypeVar("T")


def finish(steps: int, record_ok: Callable[[], T],
           record_failed: Callable[[str], object] | None = None) -> T:
    """``record_ok()`` once no kernel wrote outside a field; else ``record_failed(why)``
    and the SimulationError (exit 1 from the CLI, a failed task in a batch). ``steps``:
    how far the job got, for the message."""
    try:
        check_guards(steps, current_generation())
    except SimulationError as exc:
        if record_failed is not None:
            record_failed(str(exc))
        raise
    return record_ok()


class JobFailed(Exception):
    """A job that ran to its end but whose result fails its own test (a gradient check
    that is not 'ok', an ensemble run that did not sample its thermostat's ensemble): exit
    1 from the command, a failed task in a batch. Its folder keeps the numbers."""
