"""Worker threads for range tasks: kernels run on all cores while Python waits.

A task's probe call (nthreads = -num_threads) either runs a small loop inline and returns 0,
or sets up its chunk counters and returns the number of chunks. Then the calling thread and up
to num_threads - 1 workers call the task, and each takes chunks, from its own range first and
then from the others', until none are left (codegen/schedule.py, chunks.build_range): a worker
that wakes up late, or a thread the OS deschedules, just takes fewer chunks. A worker that has
not started by the time the calling thread runs out of chunks is not waited for: its job is
taken back.

Two pools do this. The native one (runtime/pool.py, Linux x86-64) posts and joins a launch in
machine code, with workers asleep on a futex, so a launch never waits for the GIL; the Python
one (threads, a queue per worker, locks) is the fallback elsewhere, and SIMRUN_POOL=python
selects it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import queue
import sys
import threading
import weakref

import numpy as np

from ..settings import Settings
from . import jit, objload
from . import pool_state as ps
from .launch import TASK_FN

_RUN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
_STOP = ctypes.CFUNCTYPE(None, ctypes.c_int64)
_live: weakref.WeakSet = weakref.WeakSet()  # runtimes whose threads a fork leaves behind


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


def _cpus() -> int:
    """CPUs this process may run on (a container's or taskset's limit, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> int | None:
    """Whole CPUs of the process's cgroup CPU quota (`docker --cpus=2`, a Kubernetes limit),
    rounded up; None when there is none or it cannot be read. cgroup v2's cpu.max first,
    then v1's cfs files."""
    def read(name: str) -> list[str] | None:
        try:
            with open(os.path.join(root, name)) as f:
                return f.read().split()
        except OSError:
            return None

    quota = read("cpu.max")
    if quota is None:
        v1_quota, v1_period = read("cpu/cpu.cfs_quota_us"), read("cpu/cpu.cfs_period_us")
        quota = v1_quota + v1_period if v1_quota and v1_period else None
    if not quota or len(quota) < 2 or quota[0] in ("max", "-1"):
        return None
    try:
        limit, period = int(quota[0]), int(quota[1])
    except ValueError:
        return None
    if limit <= 0 or period <= 0:
        return None
    return max(1, -(-limit // period))


def default_threads() -> int:
    """Threads when ti.init gets no cpu_max_num_threads: the CPUs this process may actually
    use. os.cpu_count() is the machine's count, so on a 64-core node a Slurm job with 4 CPUs,
    or a container limited to 2, would run 64 threads on a few cores (Taichi does)."""
    quota = cgroup_cpu_quota()
    return max(1, min(_cpus(), quota) if quota else _cpus())


def native_pool_available(settings: Settings) -> bool:
    return objload.supported() and settings.pool != "python"


@functools.cache
def _native_functions(settings: Settings) -> tuple:
    """The native pool's entry points, compiled once per machine (then from the disk cache)."""
    key = jit.cache_key("simrun native pool", settings)
    if not jit.load_cached(key, settings):
        from . import pool  # start-up: builds LLVM IR; a warm start never imports llvmlite.ir

        jit.compile_module(key, pool.build_module(), settings, "(thread pool)")
    return (_RUN(jit.function_address(ps.RUN_FN)), _WORKER(jit.function_address(ps.WORKER_FN)),
            _STOP(jit.function_address(ps.STOP_FN)))


class Runtime:
    """Process-wide state shared by all kernels: threads, random seed and autodiff stacks, and
    the environment's settings (read when ti.init makes the runtime)."""

    def __init__(self, num_threads: int | None = None, seed: int = 0,
                 settings: Settings | None = None):
        self.settings = settings if settings is not None else Settings.from_environ()
        self.num_threads = max(1, num_threads or default_threads())
        self.deterministic = False  # ti.init(deterministic=True): float scatters in one order
        self._callable: dict = {}  # task address -> its ctypes function (run_serial)
        self._native: bool | None = None  # decided on first use
        self.state = np.zeros(ps.state_slots(self.num_threads), dtype=np.int64)
        self._set_constants()
        self._queues: list = []   # the Python pool's, one per worker thread
        self._threads: list = []  # started on the first launch (native) or split (Python)
        self.run = self._first_run
        self.seed(seed)
        self.stacks = np.zeros(self.num_threads * 3, dtype=np.uint64)
        _live.add(self)

    def _set_constants(self) -> None:
        self.state[ps.THREADS] = self.num_threads
        self.state[ps.SPIN] = ps.WORKER_SPIN if self.num_threads <= default_threads() else 0

    @property
    def native(self) -> bool:
        """Whether launches go through the native pool (else the Python one)."""
        if self._native is None:
            self._native = native_pool_available(self.settings)
        return self._native

    @property
    def split_launches(self) -> int:
        """Task calls whose probe asked for chunks (tests, benchmarks)."""
        return int(self.state[ps.SPLIT_LAUNCHES])

    @property
    def last_chunks(self) -> int:
        """The chunk count of the latest such call."""
        return int(self.state[ps.LAST_CHUNKS])

    def run_serial(self, fn, ctx: int) -> int:
        """Run a task on the calling thread alone, its chunks in order: the deterministic
        mode's float scatters, whose sums then add up in one fixed order (with threads, the
        chunks a thread takes, and so the order of its adds, change from launch to launch)."""
        if isinstance(fn, int):  # a native pool's task: callable through ctypes
            fn = self._callable.get(fn) or self._callable.setdefault(fn, TASK_FN(fn))
        chunks = fn(ctx, 0, -1)
        return chunks if chunks <= 0 else fn(ctx, 0, 1)

    def task(self, address: int):
        """What `run` takes for a compiled task at this address."""
        return address if self.native else TASK_FN(address)

    def seed(self, seed: int) -> None:
        self.rng_seed = _splitmix64(int(seed) % 2**64)
        self.rng_launches = 0

    def next_rng_key(self) -> int:
        """A fresh key per launch that draws random numbers (see codegen's s_Random)."""
        self.rng_launches += 1
        return (self.rng_seed + self.rng_launches * 0x9E3779B97F4A7C15) % 2**64

    def _first_run(self, fn, ctx: int) -> int:
        """Start the pool, then run: `run` becomes the native call itself from now on."""
        if self.native:
            try:
                run, worker, _ = _native_functions(self.settings)
            except Exception as exc:  # e.g. a libc without syscall(): threads still work
                print(f"[simrun] native worker pool unavailable ({exc}); using Python threads",
                      file=sys.stderr)
                self._native = False
        if self.native:
            self._start_native(worker)
            self.run = functools.partial(run, self.state.ctypes.data)
        else:
            self.run = self._run_python
        return self.run(fn, ctx)

    def native_run_address(self) -> int | None:
        """The address of the native pool's run(state, task, ctx) once its workers are up
        (runtime/chain.py calls it from machine code); None with the Python pool."""
        if self.run == self._first_run and self.native:
            try:
                run, worker, _ = _native_functions(self.settings)
            except Exception:  # noqa: BLE001 - the first launch reports and falls back
                return None
            self._start_native(worker)
            self.run = functools.partial(run, self.state.ctypes.data)
        if not self.native or not isinstance(self.run, functools.partial):
            return None
        return ctypes.cast(self.run.func, ctypes.c_void_p).value

    def _start_native(self, worker) -> None:
        state = self.state.ctypes.data_as(ctypes.c_void_p)  # keeps the array alive
        for k in range(1, self.num_threads):
            t = threading.Thread(target=worker, args=(state, k), daemon=True,
                                 name=f"simrun-worker-{k}")
            t.start()
            self._threads.append(t)

    def _start_python_workers(self) -> None:
        for k in range(1, self.num_threads):
            q: queue.SimpleQueue = queue.SimpleQueue()
            t = threading.Thread(target=_worker_loop, args=(q,), daemon=True,
                                 name=f"simrun-worker-{k}")
            t.start()
            self._queues.append(q)
            self._threads.append(t)

    def _run_python(self, fn, ctx: int) -> int:
        """Probe-run a task; when it reports chunks, run them on up to num_threads threads."""
        if isinstance(fn, int):  # compiled for the native pool, which failed to start
            fn = TASK_FN(fn)
        chunks = fn(ctx, 0, -self.num_threads)
        if chunks <= 0:
            return chunks
        self.state[ps.SPLIT_LAUNCHES] += 1
        self.state[ps.LAST_CHUNKS] = chunks
        t = min(self.num_threads, chunks)
        if t == 1:
            return fn(ctx, 0, 1)
        if not self._queues:
            self._start_python_workers()
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
        if self._threads and self.native:
            _native_functions(self.settings)[2](self.state.ctypes.data)
        for q in self._queues:
            q.put(None)
        for t in self._threads:
            t.join()
        self._forget_threads()

    def _forget_threads(self) -> None:
        self._queues, self._threads = [], []
        self.state[:] = 0
        self._set_constants()
        self.run = self._first_run


def _after_fork_in_child() -> None:
    """A forked child has none of its parent's worker threads: start afresh on its next launch."""
    for rt in list(_live):
        rt._forget_threads()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
