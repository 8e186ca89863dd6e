"""A thread pool over task chunks: ctypes calls drop the GIL, so threads really run in parallel."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np


class Runtime:
    """Process-wide state shared by all kernels: threads, random seed and autodiff stacks."""

    def __init__(self, num_threads: int | None = None, seed: int = 0):
        self.num_threads = max(1, num_threads or os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(self.num_threads - 1) if self.num_threads > 1 else None
        self.seed(seed)
        self.stacks = np.zeros(self.num_threads * 3, dtype=np.uint64)

    def seed(self, seed: int) -> None:
        self.rng_seed = int(np.random.SeedSequence(seed).generate_state(1, dtype=np.uint64)[0])
        self.rng_launches = 0

    def next_rng_key(self) -> int:
        """A fresh key per launch that draws random numbers (see codegen's s_Random)."""
        self.rng_launches += 1
        return (self.rng_seed + self.rng_launches * 0x9E3779B97F4A7C15) % 2**64

    def run(self, fn, ctx: int) -> int:
        """Probe-run a task; split it over threads when it reports a large trip count."""
        n = fn(ctx, 0, 0)
        if n <= 0 or self.pool is None:
            if n > 0:
                return fn(ctx, 0, 1)
            return n
        t = self.num_threads
        futures = [self.pool.submit(fn, ctx, k, t) for k in range(1, t)]
        r = fn(ctx, 0, t)
        for f in futures:
            r = min(r, f.result())
        return r

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)
