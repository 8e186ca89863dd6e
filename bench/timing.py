"""Median-of-k wall-clock timing with warm-up and automatic batching of short calls.

Short calls (kernel launches, small kernels) are repeated ``inner`` times per sample so each
sample lasts at least ``min_sample_s``; the reported value is per call. Every sample ends
with ``sync()`` so asynchronous backends cannot leak work into the next sample.
"""

import math
import os
import resource
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable


@dataclass
class Timing:
    """Per-call seconds: median and min over ``reps`` samples of ``inner`` calls each."""

    median_s: float
    min_s: float
    reps: int
    inner: int

    def to_dict(self) -> dict:
        return asdict(self)


def time_call(
    fn: Callable[[], None],
    sync: Callable[[], None],
    reps: int = 9,
    warmup: int = 2,
    min_sample_s: float = 0.02,
    max_inner: int = 100_000,
) -> Timing:
    """Time ``fn`` after ``warmup`` calls; the first warm-up call also pays for compilation."""
    for _ in range(max(warmup, 1)):
        fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    one_call = time.perf_counter() - start
    inner = min(max_inner, max(1, math.ceil(min_sample_s / max(one_call, 1e-9))))
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / inner)
    return Timing(statistics.median(samples), min(samples), reps, inner)


def format_seconds(seconds: float | None) -> str:
    """Human units so launch overheads (us) and kernels (ms) share one table column."""
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.2f} us"


class ForeignLoad:
    """Cores' worth of CPU that *other* processes used while the block ran (Linux).

    The development box is shared; with 2 cores a neighbour's test run halves a 2-thread
    timing. Child processes of this one count as ours (their CPU time is subtracted).

        with ForeignLoad() as load:
            subprocess.run(...)
        load.cores  # e.g. 0.03 on a quiet box, ~1 while another process spins
    """

    cores = float("nan")

    @staticmethod
    def _busy_s() -> float:
        try:
            with open("/proc/stat") as f:
                ticks = [int(v) for v in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return float("nan")
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own_s() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    def __enter__(self) -> "ForeignLoad":
        self._start = (self._busy_s(), self._own_s(), time.perf_counter())
        return self

    def __exit__(self, *exc) -> None:
        busy, own, wall = self._start
        elapsed = time.perf_counter() - wall
        other = (self._busy_s() - busy) - (self._own_s() - own)
        self.cores = max(0.0, other) / elapsed if elapsed > 0 else float("nan")


def wait_for_quiet(max_wait_s: float, threshold: float = 0.1, window_s: float = 2.0) -> float:
    """Sleep until other processes use < ``threshold`` cores over a ``window_s`` window, at
    most ``max_wait_s``; returns the last window's foreign load."""
    deadline = time.perf_counter() + max_wait_s
    while True:
        with ForeignLoad() as load:
            time.sleep(window_s)
        if load.cores < threshold or time.perf_counter() >= deadline:
            return load.cores
