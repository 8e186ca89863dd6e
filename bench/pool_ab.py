"""The two worker pools side by side, in one process: native (runtime/pool.py) vs Python.

scaling.py compares separate processes, minutes apart on this drifting box; here every round
runs each configuration (pool x thread count) back to back in one process, in alternating
order, and the tables give medians over rounds and the median of per-round speedups over
the Python pool on one thread. The `tiny_split` row is a 2-iteration loop with a `while`
body, which is split whatever its size: the cost of a split launch itself.

    python bench/pool_ab.py [--only p2g_8192,p2g_sorted_8192] [--rounds 15]
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from program import Program  # noqa: E402
from programs import BENCHMARKS  # noqa: E402

import simrun.lang as ti  # noqa: E402

CONFIGS = [("python", 1), ("python", 2), ("native", 1), ("native", 2)]


def build_tiny_split(ti, size: int = 2) -> Program:
    steps = ti.field(ti.i32, shape=size)

    @ti.kernel
    def tiny_split():
        for i in range(size):
            k = i
            while k < 100:
                k += k + 1
            steps[i] = k

    return Program(run=tiny_split, check=lambda: float(steps.to_numpy().sum()))


def median_call(fn, seconds: float) -> float:
    for _ in range(5):
        fn()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 15:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="tiny_split,p2g_8192,p2g_sorted_8192,p2g_65536")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=0.15, help="per configuration and round")
    args = ap.parse_args()
    builders = dict(BENCHMARKS, tiny_split=(build_tiny_split, 2, 2))
    print(f"{args.rounds} rounds, each configuration timed {args.seconds} s per round; "
          f"load avg {os.getloadavg()[0]:.1f}", flush=True)
    print("| benchmark | pool | threads | median | speedup over python/1 (range) |")
    print("|---|---|---:|---:|---:|")
    for name in args.only.split(","):
        builder, size, _ = builders[name]
        times: dict = {c: [] for c in CONFIGS}
        for r in range(args.rounds):
            for pool, threads in (CONFIGS if r % 2 == 0 else CONFIGS[::-1]):
                os.environ["SIMRUN_POOL"] = pool
                ti.init(arch=ti.cpu, cpu_max_num_threads=threads)
                times[(pool, threads)].append(median_call(builder(ti, size).run, args.seconds))
        base = times[("python", 1)]
        for c in CONFIGS:
            ratios = [a / b for a, b in zip(base, times[c])]
            print(f"| {name} | {c[0]} | {c[1]} | {1e6 * statistics.median(times[c]):.1f} us | "
                  f"{statistics.median(ratios):.2f} ({min(ratios):.2f} - {max(ratios):.2f}) |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
