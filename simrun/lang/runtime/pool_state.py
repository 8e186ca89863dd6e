"""Slots of the native worker pool's state (an int64 array): runtime/parallel.py owns it,
runtime/pool.py emits the code that reads and writes it. Futex words (the generation, a
worker's claim and done) are the low 32 bits of their slot."""

GEN = 0            # the latest job's generation (never 0 once a job is posted)
SPIN = 1           # pause rounds a worker spins after a job before it sleeps: WORKER_SPIN,
                   # or 0 when the threads outnumber the CPUs
WORKER_SPIN = 1 << 12  # ~0.2 ms here: a step loop's next launch finds the workers awake
FN, CTX, NTHREADS = 8, 9, 10   # the posted job, on a cache line of its own
STOP = 11          # nonzero: workers return
SPLIT_LAUNCHES, LAST_CHUNKS = 12, 13   # statistics for tests and benchmarks
BUSY = 14          # a caller owns the workers (a concurrent caller runs its launch alone)
THREADS = 15       # the thread count launches ask for
WORKER = 16        # worker k (1 ..): slots WORKER + LINE * (k - 1) + CLAIM / DONE / RESULT
CLAIM, DONE, RESULT = 0, 1, 2
LINE = 8           # slots per cache line

WORKER_FN, RUN_FN, STOP_FN = "simrun_pool_worker", "simrun_pool_run", "simrun_pool_stop"


def state_slots(num_threads: int) -> int:
    return WORKER + LINE * max(0, num_threads - 1)
