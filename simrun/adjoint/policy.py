"""How the adjoint executes, as a context (tinygrad's `Context`), never a class attribute
that tests patch: natively (the whole checkpoint schedule as native programs, each run of
launches that chain one native call) or interpreted (the same launches one
by one from Python, as a GPU makes them). Both make the same launches on the same values:
the same bits (tests hold them to it); a debugging session may want the interpreted one.

    with execution(native=False):      # launch by launch
        scene_gradient(scene, keys)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Policy:
    native: bool = True  # the schedule's launches as native chains where they chain


DEFAULT = Policy()
_CURRENT: ContextVar[Policy | None] = ContextVar("simrun_adjoint_policy", default=None)


def current() -> Policy:
    """The policy in force here."""
    return _CURRENT.get() or DEFAULT


@contextmanager
def execution(**changes: bool) -> Iterator[Policy]:
    """The current policy with `changes` (native=...) inside the block."""
    token = _CURRENT.set(replace(current(), **changes))
    try:
        yield current()
    finally:
        _CURRENT.reset(token)
