"""How the adjoint executes, as a context (tinygrad's `Context`), never a class attribute
that tests patch: natively (each step and its reverse as chains of launches, the whole
checkpoint schedule as native programs where the scene allows) or interpreted (the Tape sweep
that returns to Python around every launch). Both compute the same derivative; tests compare
them, and a debugging session may want the interpreted one.

    with execution(native=False):      # the Tape sweep
        scene_gradient(scene, keys)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Policy:
    native: bool = True  # steps and reverse steps as chains of launches where they can be
    program: bool = True  # ... and the whole schedule as native programs (plain scenes)


DEFAULT = Policy()
_CURRENT: ContextVar[Policy | None] = ContextVar("simrun_adjoint_policy", default=None)


def current() -> Policy:
    """The policy in force here."""
    return _CURRENT.get() or DEFAULT


@contextmanager
def execution(**changes: bool) -> Iterator[Policy]:
    """The current policy with `changes` (native=..., program=...) inside the block."""
    token = _CURRENT.set(replace(current(), **changes))
    try:
        yield current()
    finally:
        _CURRENT.reset(token)
