"""How a reverse is derived from launches: the one routine `Tape.grad` and a compiled reverse
step (simrun/adjoint/reverse_step.py) share.

Launches are recorded in the order they run, each with the fields it must save before it
runs: what it overwrites that it, an earlier launch, or something read after the reverse
reads. The replay is each launch after its save; the reverse is the launches last first,
each gradient between two restores of its launch's save (a gradient launch may leave its
primal fields moved), so every gradient runs on the values its forward launch saw.

A Tape records while its launches run and saves values then; a reverse step records its
step's launches once and makes the replay and the reverse as launches of their own (a copy
into a field of its own to save, a copy back to restore).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


def must_save(acc, read_so_far: set) -> set:
    """The fields a launch overwrites that it or an earlier launch reads; adds the launch's
    reads to `read_so_far`."""
    read_so_far |= acc.reads
    return acc.writes & read_so_far


def read_by(accesses: list) -> set | None:
    """The fields launches of these accesses read: a Recording's `read` for what runs after
    its launches' reverse; None where one hides them (a custom gradient's)."""
    if any(a is None for a in accesses):
        return None
    return set().union(*(a.reads for a in accesses))


@dataclass
class Recorded:
    """One recorded launch: what the caller recorded, the fields it must save before it
    runs (in field id order), and the caller's own: where it saves them, its gradient."""

    launch: Any
    fields: list
    saved: Any = None
    gradient: Any = None


class Recording:
    """Launches in the order they run, each with what it must save (the module docstring)."""

    def __init__(self, read: Iterable | None = ()) -> None:
        """`read`: the fields read after the reverse too, or before these launches (None:
        any field, so a launch saves everything it writes)."""
        self.entries: list[Recorded] = []
        self.read_so_far: set | None = None if read is None else set(read)

    def record(self, launch, acc, keep: Callable | None = None) -> Recorded:
        """Record `launch`, whose access is `acc` (reads, writes; None where it hides them,
        a custom gradient's: it saves nothing and is taken to read nothing); `keep(field)`
        narrows the fields it saves (a field without storage, a region not read)."""
        if acc is None:
            fields = set()
        elif self.read_so_far is None:
            fields = set(acc.writes)
        else:
            fields = must_save(acc, self.read_so_far)
        kept = [f for f in fields if keep is None or keep(f)]
        entry = Recorded(launch, sorted(kept, key=lambda f: f.id))
        self.entries.append(entry)
        return entry

    def then(self) -> Recording:
        """A recording of the launches that run after these, reading what these read."""
        return Recording(self.read_so_far)

    def replay(self, save: Callable[[Recorded], list], launch: Callable[[Recorded], list]
               ) -> list:
        """The launches in order, each after its save: `save(entry)` and `launch(entry)`
        give the calls or launches that do each."""
        out = []
        for entry in self.entries:
            out += save(entry) + launch(entry)
        return out

    def reverse(self, restore: Callable[[Recorded], list],
                gradient: Callable[[Recorded], list]) -> list:
        """The reverse: last first, each gradient between two restores of its save."""
        out = []
        for entry in reversed(self.entries):
            out += restore(entry) + gradient(entry) + restore(entry)
        return out
