"""Binomial checkpointing (Griewank's treeverse, the schedule Revolve runs).

Reversing n steps with s stored states besides the start costs sum_j r_j forward steps, the
j-th costing the smallest r with C(s + 1 + r, s + 1) >= j: a few times the forward run for a
memory of s states (10^6 steps, 20 states: 6.6 per step), where storing every state needs n.
The schedule is driven by callbacks, so the same code serves the adjoint and the tests that
count its steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from math import comb
from typing import Any


def _repetitions(j: int, c: int) -> int:
    """The smallest r with C(c + r, c) >= j: how often step j of a reversal is advanced."""
    r = 0
    while comb(c + r, c) < j:
        r += 1
    return r


def forward_steps(steps: int, snapshots: int) -> int:
    """Griewank's minimum number of forward steps (each step's own recompute in the reverse
    sweep not counted) to reverse `steps` steps from a held start state with `snapshots`
    further stored states: the j-th step costs r_j = min{r : C(s + 1 + r, s + 1) >= j}."""
    c, total, r, lo = snapshots + 1, 0, 1, 2
    while lo <= steps:
        hi = min(steps, comb(c + r, c))
        total += r * max(hi - lo + 1, 0)
        lo, r = max(lo, hi + 1), r + 1
    return total


@lru_cache(maxsize=1 << 16)  # a long reversal asks for the same few segments many times
def _split(n: int, s: int) -> int:
    """The optimal first segment: advance k steps, store, reverse the n - k after it with
    s - 1 snapshots, then the k before it with s (the cost k + T(n-k, s-1) + T(k, s) is
    convex in k, so the first k where it stops falling is a minimum). With a snapshot for
    every step, k = 1: no search (storing every state of a long run asks n times)."""
    if s >= n - 1:
        return 1
    lo, hi = 1, n - 1
    while lo < hi:
        k = (lo + hi) // 2
        if 1 - _repetitions(n - k, s) + _repetitions(k + 1, s + 1) >= 0:
            hi = k
        else:
            lo = k + 1
    return lo


@dataclass
class Schedule:
    """What a reversal costs: forward steps advanced, stored states at most at once."""

    steps: int
    snapshots: int
    advances: int = 0
    peak_stored: int = 0

    @property
    def recompute_factor(self) -> float:
        """Forward steps per step, the first descent (the forward sweep itself) included."""
        return (self.advances + 1) / max(self.steps, 1)


def reverse(state0: Any, steps: int, snapshots: int, advance: Callable[[Any, int], Any],
            reverse_step: Callable[[Any, int], None], copy: Callable[[Any], Any] = lambda s: s,
            advance_many: Callable[[Any, int, int], Any] | None = None,
            release: Callable[[Any], None] | None = None) -> Schedule:
    """Call reverse_step(state_k, k) for k = steps-1 .. 0, each with the state before step k.

    advance(state, k) returns the state after step k (a new object); copy(state) stores one;
    advance_many(state, a, b), if given, the state after steps a .. b-1 at once (the same as
    advancing one by one: a stepper that makes many steps per call); release(state), if
    given, hears when a stored copy is no longer needed (always the latest one still held:
    they are freed last in, first out). At most `snapshots`
    states are stored besides state0 (state0 is the caller's). The recursion runs on an
    explicit stack: storing every state of a long run is deep."""
    sched = Schedule(steps, snapshots)

    def run(st: Any, a: int, b: int) -> Any:
        sched.advances += b - a
        if advance_many is not None and b - a > 1:
            return advance_many(st, a, b)
        for k in range(a, b):
            st = advance(st, k)
        return st

    alive = 0
    # (state before step a, a, b, free snapshots, whether this frame's state is a stored copy)
    stack = [(state0, 0, steps, min(snapshots, max(steps - 1, 0)), False)]
    while stack:
        state, a, b, s, owned = stack.pop()
        if b - a <= 1 or s == 0:
            for j in reversed(range(a, b)):  # with no room left: recompute from a for each
                reverse_step(run(state, a, j), j)
            alive -= owned
            if owned and release is not None:
                release(state)
            continue
        m = a + _split(b - a, s)
        st = run(state, a, m)
        stack.append((state, a, m, s, owned))  # after [m, b), with the same state
        stack.append((copy(st), m, b, s - 1, True))
        alive += 1
        sched.peak_stored = max(sched.peak_stored, alive)
    return sched
