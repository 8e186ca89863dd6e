"""Parallel scaling of the large kernels: cpu_max_num_threads=1 vs 2, interleaved.

    python bench/scaling.py                     # simrun, 5 rounds, plus the numpy bandwidth
    python bench/scaling.py --module both --rounds 7 --json scaling.json
    python bench/scaling.py --baseline ../simrun-prev   # also the previous checkout, interleaved

run.py's scaling table times the 1-thread worker once, minutes after the default worker; on
a small shared box the load changes in between. Here each round starts one worker per
thread count back to back (alternating which goes first), so both sides of a ratio see the
same load; the speedup is the median of the per-round ratios, shown with its range. The
box is shared: each worker also measures how much CPU other processes used meanwhile
(timing.ForeignLoad); a round with a busy neighbour is redone (--retries) and left out of
the table when clean rounds exist. A neighbour slows the 2-thread side more than the
1-thread side (it needs both cores), so noise biases the ratio down; the "fastest samples"
column (min over all samples of one side / min of the other) is the least disturbed view.

The ceiling column (for simrun, with --threads 2) comes from a third worker per round that
runs two independent single-thread copies of each program at once on two threads of one
process: 2 x (time alone) / (time together) is what two cores of this machine give the work
when nothing is split or shared, so "of ceiling" separates the kernel's own losses (hand-off,
merge, imbalance) from the machine's (steal, shared caches, turbo). Each launch holds the GIL
for its Python part (~3 us) while the copies run, so the ceiling is slightly low for short
launches.

The bandwidth section times `y += x` on 2^24 f32 (saxpy's traffic: two loads and one store
per element) with numpy on 1 and 2 threads, each thread on its half (numpy drops the GIL in
large ufunc loops): the memory system's ceiling for saxpy on this machine.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from programs import SCALING_BENCHMARKS  # noqa: E402
from timing import ForeignLoad, median_wall, wait_for_quiet  # noqa: E402

SAXPY_N = 1 << 24


def worker_results(module: str, threads: int, names: list, args, tmp: str,
                   bench_dir: str = HERE, extra: tuple = ()) -> tuple[dict, float]:
    """One worker's result rows, and the foreign load: cores' worth of CPU that other
    processes used while it ran (this box is shared; a busy neighbour skews one side)."""
    out = os.path.join(tmp, f"{module}-{threads}-{time.monotonic_ns()}.json")
    cmd = [sys.executable, os.path.join(bench_dir, "worker.py"), "--module", module, "--out", out,
           "--threads", str(threads), "--forward-only", "--only", ",".join(names),
           "--reps", str(args.reps), "--warmup", "2", *extra]
    with ForeignLoad() as load:
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
    try:
        with open(out) as f:
            return json.load(f).get("results", {}), load.cores
    except (OSError, ValueError):
        return {}, load.cores


def run_worker(module: str, threads: int, names: list, args, tmp: str,
               bench_dir: str = HERE) -> tuple[dict, float]:
    """(median, min) seconds per benchmark, and the worker's foreign load."""
    results, foreign = worker_results(module, threads, names, args, tmp, bench_dir)
    return {name: (row["median_s"], row["min_s"]) for name, row in results.items()
            if "median_s" in row}, foreign


def run_ceiling(names: list, args, tmp: str) -> tuple[dict, float]:
    """Per benchmark, the speedup two independent single-thread copies get on two threads of
    one process (worker.py --twin): what the machine gives this work with nothing shared."""
    results, foreign = worker_results("simrun", 1, names, args, tmp, extra=("--twin",))
    return {name: row["ceiling"] for name, row in results.items() if "ceiling" in row}, foreign


def bandwidth(threads: int, reps: int = 15) -> float:
    """GB/s of `y += x` over 2^24 f32 split across `threads` numpy threads."""
    x = np.linspace(0.0, 1.0, SAXPY_N, dtype=np.float32)
    y = np.ones(SAXPY_N, dtype=np.float32)
    parts = np.array_split(np.arange(SAXPY_N), threads)
    slices = [slice(int(p[0]), int(p[-1]) + 1) for p in parts]

    def work(s):
        np.add(y[s], x[s], out=y[s])

    def once():
        if threads == 1:
            work(slices[0])
            return
        pool = [threading.Thread(target=work, args=(s,)) for s in slices[1:]]
        for t in pool:
            t.start()
        work(slices[0])
        for t in pool:
            t.join()

    once()
    once()  # median_wall makes the third warm-up call
    return 3 * 4 * SAXPY_N / median_wall(once, reps) / 1e9


def fmt_time(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", choices=["simrun", "taichi", "both"], default="simrun")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=9, help="samples per benchmark per worker")
    ap.add_argument("--threads", type=int, default=2, help="the thread count compared to 1")
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--skip-bandwidth", action="store_true")
    ap.add_argument("--max-foreign-load", type=float, default=0.15,
                    help="redo a round (up to --retries times) when other processes used "
                         "more than this many cores' worth of CPU during it")
    ap.add_argument("--retries", type=int, default=4)
    ap.add_argument("--wait-quiet", type=float, default=120.0,
                    help="before each attempt, wait up to this many seconds for the other "
                         "processes to go quiet")
    ap.add_argument("--baseline", metavar="DIR",
                    help="another checkout of this repository (e.g. `git worktree` of the "
                         "previous commit): its simrun workers run in the same rounds, "
                         "interleaved, as module 'simrun@baseline'")
    ap.add_argument("--skip-ceiling", action="store_true",
                    help="skip the per-round ceiling worker (two independent 1-thread "
                         "simrun copies at once; only with --threads 2)")
    ap.add_argument("--json")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or list(SCALING_BENCHMARKS)
    modules = ["simrun", "taichi"] if args.module == "both" else [args.module]
    bench_dirs = {m: HERE for m in modules}
    if args.baseline and "simrun" in modules:
        modules.insert(modules.index("simrun") + 1, "simrun@baseline")
        bench_dirs["simrun@baseline"] = os.path.join(os.path.abspath(args.baseline), "bench")
    use_ceiling = args.threads == 2 and not args.skip_ceiling
    load_before = os.getloadavg()[0]
    rounds: dict = {m: [] for m in modules}  # per round: foreign loads and medians
    with tempfile.TemporaryDirectory(prefix="simrun-scaling-") as tmp:
        for r in range(args.rounds):
            for m in modules:
                order = (1, args.threads) if r % 2 == 0 else (args.threads, 1)
                for attempt in range(args.retries + 1):
                    wait_for_quiet(args.wait_quiet, args.max_foreign_load)
                    got, loads = {}, []
                    for t in order:
                        got[t], load = run_worker(m.split("@")[0], t, names, args, tmp,
                                                  bench_dirs[m])
                        loads.append(load)
                    print(f"[scaling] round {r + 1}/{args.rounds} {m}: foreign load "
                          f"{' / '.join(f'{x:.2f}' for x in loads)} cores", file=sys.stderr,
                          flush=True)
                    if max(loads) <= args.max_foreign_load or attempt == args.retries:
                        break
                rounds[m].append({"foreign_load": max(loads), "times": got})
                if m == "simrun" and use_ceiling:
                    ceiling, load = run_ceiling(names, args, tmp)
                    rounds[m][-1]["ceiling"] = ceiling
                    rounds[m][-1]["foreign_load"] = max(load, rounds[m][-1]["foreign_load"])
    bw = {}
    if not args.skip_bandwidth:
        wait_for_quiet(args.wait_quiet, args.max_foreign_load)
        bw = {t: bandwidth(t) for t in (1, args.threads)}
    load_after = os.getloadavg()[0]

    t2 = args.threads
    print(f"CPU: {os.cpu_count()} cores; {args.rounds} rounds of (1 thread, {t2} threads) "
          f"workers back to back, median of {args.reps} per worker; load avg "
          f"{load_before:.1f} before, {load_after:.1f} after. A round is clean when other "
          f"processes used <= {args.max_foreign_load} cores during both workers; only clean "
          "rounds count when there are any.\n")
    if use_ceiling:
        print("ceiling: two independent single-thread copies of the program (own fields, own "
              "kernels) on two threads of one process at once, 2 x (time alone) / (time "
              "together), median over rounds: the speedup this machine gives the work with "
              "nothing to split, share or merge. of ceiling: median of speedup / ceiling per "
              "round (simrun only).\n")
    print(f"| benchmark | module | 1 thread | {t2} threads | speedup (median) | "
          "speedup (range) | speedup of the fastest samples | ceiling | of ceiling | "
          "clean rounds |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for m in modules:
        clean = [x for x in rounds[m] if x["foreign_load"] <= args.max_foreign_load]
        used = clean or rounds[m]
        for name in names:
            pairs = [(x["times"][1][name], x["times"][t2][name]) for x in used
                     if name in x["times"][1] and name in x["times"][t2]]
            if not pairs:
                print(f"| {name} | {m} | error | error | - | - | - | - | - | - |")
                continue
            one, many = [a[0] for a, _ in pairs], [b[0] for _, b in pairs]
            ratios = [a[0] / b[0] for a, b in pairs]
            best = min(a[1] for a, _ in pairs) / min(b[1] for _, b in pairs)
            speedup = statistics.median(ratios)
            ceilings = [(x["ceiling"][name], x["times"][1][name][0] / x["times"][t2][name][0])
                        for x in used if name in x.get("ceiling", {})
                        and name in x["times"][1] and name in x["times"][t2]]
            ceiling, of_ceiling = "-", "-"
            if ceilings:
                ceiling = f"{statistics.median(c for c, _ in ceilings):.2f}"
                of_ceiling = f"{statistics.median(r / c for c, r in ceilings):.0%}"
            summary[f"{m}:{name}"] = {"t1": one, f"t{t2}": many, "speedup": speedup}
            print(f"| {name} | {m} | {fmt_time(statistics.median(one))} | "
                  f"{fmt_time(statistics.median(many))} | {speedup:.2f} | "
                  f"{min(ratios):.2f} - {max(ratios):.2f} | {best:.2f} | {ceiling} | "
                  f"{of_ceiling} | {len(clean)}/{len(rounds[m])} |")
    if bw:
        print(f"\nnumpy `y += x`, 2^24 f32 (saxpy's traffic, {3 * 4 * SAXPY_N / 1e6:.0f} MB "
              "per call):")
        print("| threads | bandwidth | saxpy time at this bandwidth |\n|---:|---:|---:|")
        for t, gbs in bw.items():
            print(f"| {t} | {gbs:.1f} GB/s | {fmt_time(3 * 4 * SAXPY_N / gbs / 1e9)} |")
        print(f"\nbandwidth ratio {t2}/1 threads: {bw[t2] / bw[1]:.2f}")
        for m in modules:
            rows = summary.get(f"{m}:saxpy_2^24")
            if rows:
                for t, key in ((1, "t1"), (t2, f"t{t2}")):
                    gbs = 3 * 4 * SAXPY_N / statistics.median(rows[key]) / 1e9
                    print(f"{m} saxpy achieves {gbs:.1f} GB/s on {t} thread(s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "bandwidth_gbs": bw,
                       "load": [load_before, load_after]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
