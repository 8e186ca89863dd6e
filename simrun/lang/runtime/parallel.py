"""Worker threads for range tasks: ctypes calls drop the GIL, so threads really run in parallel.

A task's probe call (nthreads = -num_threads) either runs a small loop inline and returns 0,
or sets up its chunk counters and returns the number of chunks. Then the calling thread and up
to num_threads - 1 workers call the task, and each takes chunks, from its own range first and
then from the others', until none are left (codegen/schedule.py, emit.build_range): a worker
that wakes up late, or a thread the OS deschedules, just takes fewer chunks. A worker that has
not started by the time the calling thread runs out of chunks is not waited for: its job is
taken back.
"""

from __future__ import annotations

import os
import queue
import threading

import numpy as np


def _splitmix64(z: int) -> int:
    """A seed's well-mixed 64-bit key (importing numpy.random for this costs a start ~20 ms)."""
    z = (z + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return z ^ (z >> 31)


class _Job:
    """One call of a task on a worker; `claim` goes to whoever takes it first, worker or caller."""

    __slots__ = ("fn", "ctx", "tid", "nthreads", "claim", "done", "result")

    def __init__(self, fn, ctx: int, tid: int, nthreads: int):
        self.fn, self.ctx, self.tid, self.nthreads = fn, ctx, tid, nthreads
        self.claim = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()
        self.result = -1

    def reclaim(self) -> bool:
        """True when the worker had not started this job (it never will now)."""
        return self.claim.acquire(False)

    def wait(self) -> int:
        self.done.acquire()
        return self.result


def _worker_loop(jobs: queue.SimpleQueue) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        if job.claim.acquire(False):
            try:
                job.result = job.fn(job.ctx, job.tid, job.nthreads)
            finally:
                job.done.release()


class Runtime:
    """Process-wide state shared by all kernels: threads, random seed and autodiff stacks."""

    def __init__(self, num_threads: int | None = None, seed: int = 0):
        self.num_threads = max(1, num_threads or os.cpu_count() or 1)
        self._queues: list = []   # one per worker thread, started on the first parallel launch
        self._threads: list = []
        self.split_launches = 0   # task calls whose probe asked for chunks (tests, benchmarks)
        self.last_chunks = 0      # the chunk count of the latest such call
        self.seed(seed)
        self.stacks = np.zeros(self.num_threads * 3, dtype=np.uint64)

    def seed(self, seed: int) -> None:
        self.rng_seed = _splitmix64(int(seed) % 2**64)
        self.rng_launches = 0

    def next_rng_key(self) -> int:
        """A fresh key per launch that draws random numbers (see codegen's s_Random)."""
        self.rng_launches += 1
        return (self.rng_seed + self.rng_launches * 0x9E3779B97F4A7C15) % 2**64

    def _start_workers(self) -> None:
        for k in range(1, self.num_threads):
            q: queue.SimpleQueue = queue.SimpleQueue()
            t = threading.Thread(target=_worker_loop, args=(q,), daemon=True,
                                 name=f"simrun-worker-{k}")
            t.start()
            self._queues.append(q)
            self._threads.append(t)

    def run(self, fn, ctx: int) -> int:
        """Probe-run a task; when it reports chunks, run them on up to num_threads threads."""
        chunks = fn(ctx, 0, -self.num_threads)
        if chunks <= 0:
            return chunks
        self.split_launches += 1
        self.last_chunks = chunks
        t = min(self.num_threads, chunks)
        if t == 1:
            return fn(ctx, 0, 1)
        if not self._queues:
            self._start_workers()
        jobs = []
        for k in range(1, t):
            job = _Job(fn, ctx, k, t)
            self._queues[k - 1].put(job)
            jobs.append(job)
        r = fn(ctx, 0, t)
        for job in jobs:
            if not job.reclaim():
                r = min(r, job.wait())
        return r

    def shutdown(self) -> None:
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join()
        self._queues, self._threads = [], []
