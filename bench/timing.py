"""Median-of-k wall-clock timing with warm-up and automatic batching of short calls.

Short calls (kernel launches, small kernels) are repeated ``inner`` times per sample so each
sample lasts at least ``min_sample_s``; the reported value is per call. Every sample ends
with ``sync()`` so asynchronous backends cannot leak work into the next sample.
"""

import math
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
