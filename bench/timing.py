"""Median-of-k wall-clock timing with warm-up and automatic batching of short calls.

Short calls (kernel launches, small kernels) are repeated ``inner`` times per sample so each
sample lasts at least ``min_sample_s``; the reported value is per call. Every sample ends
with ``sync()`` so asynchronous backends cannot leak work into the next sample.
"""

import math
import os
import resource
import statistics
import threading
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


def _calls_per_sample(fn, sync, warmup: int, min_sample_s: float, max_inner: int) -> int:
    """Warm fn up, then how many calls make a sample of at least min_sample_s."""
    for _ in range(max(warmup, 1)):
        fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    one_call = time.perf_counter() - start
    return min(max_inner, max(1, math.ceil(min_sample_s / max(one_call, 1e-9))))


def median_wall(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``fn`` after one warm-up call (it compiles):
    for calls long enough to time one by one."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_call(
    fn: Callable[[], None],
    sync: Callable[[], None],
    reps: int = 9,
    warmup: int = 2,
    min_sample_s: float = 0.02,
    max_inner: int = 100_000,
) -> Timing:
    """Time ``fn`` after ``warmup`` calls; the first warm-up call also pays for compilation."""
    inner = _calls_per_sample(fn, sync, warmup, min_sample_s, max_inner)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / inner)
    return Timing(statistics.median(samples), min(samples), reps, inner)


def time_twin(
    fn_a: Callable[[], None],
    fn_b: Callable[[], None],
    sync: Callable[[], None],
    reps: int = 9,
    min_sample_s: float = 0.02,
) -> dict:
    """The speedup two threads could give ``fn_a`` with no coordination at all: each sample
    times ``inner`` calls of ``fn_a`` alone, then ``inner`` calls of ``fn_a`` and of ``fn_b``
    (an independent copy: own data, own kernels) on two threads at once. 2 * alone / together
    is the throughput two cores deliver for two independent copies of the work, an upper
    bound for a parallel kernel that splits one copy (it has to split and merge as well).
    Both functions must drop the GIL for their work (simrun's native calls do)."""
    _calls_per_sample(fn_b, sync, 2, min_sample_s, 100_000)
    inner = _calls_per_sample(fn_a, sync, 2, min_sample_s, 100_000)

    def calls(fn: Callable[[], None], gate: threading.Barrier) -> None:
        gate.wait()
        for _ in range(inner):
            fn()
        sync()

    ratios, alone_s, together_s = [], [], []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            fn_a()
        sync()
        alone = (time.perf_counter() - start) / inner
        gate = threading.Barrier(2)
        other = threading.Thread(target=calls, args=(fn_b, gate))
        other.start()
        gate.wait()
        start = time.perf_counter()
        for _ in range(inner):
            fn_a()
        other.join()
        sync()
        together = (time.perf_counter() - start) / inner
        alone_s.append(alone)
        together_s.append(together)
        ratios.append(2 * alone / together)
    return {"ceiling": statistics.median(ratios), "ceiling_range": [min(ratios), max(ratios)],
            "alone_s": statistics.median(alone_s), "together_s": statistics.median(together_s),
            "reps": reps, "inner": inner}


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
