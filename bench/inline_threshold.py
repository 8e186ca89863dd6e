"""Where splitting a range loop over 2 threads starts to pay: calibrates schedule.INLINE_WORK.

    python bench/inline_threshold.py [--rounds 3] [--reps 9] [--threads 2]

For a few loop bodies of different cost (a saxpy-like streaming update, transcendental math,
an atomic scatter, diffmpm's p2g) and trip counts from 64 to 256k, each round starts three
simrun worker processes back to back: every launch forced inline (one thread), every launch
forced to split into chunks over --threads threads, and the default decision. The table
shows median per-launch times, the estimated work of a launch (trip count x the code
generator's cost estimate of one iteration, codegen/schedule.py) and which way the default
went; the summary gives, per body, the estimated work from which on splitting won at every
larger size.
Workers compile without the disk cache (the forced modes patch the threshold constant).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = [64 << k for k in range(13)]  # 64 .. 262144
BODIES = ["stream", "math", "scatter", "p2g"]
MODES = {"inline": 1e30, "split": 0.0, "default": None}


def _build(ti, body: str, n: int):
    """A launchable kernel over n iterations and a way to get its IR."""
    import numpy as np

    if body == "p2g":
        sys.path.insert(0, HERE)
        from p2g import _build as build_p2g

        kernel, particles, _ = build_p2g(ti, n, 128, use_polar=False)
        rng = np.random.default_rng(3)
        particles["x"].from_numpy(rng.uniform(0.2, 0.6, (n, 2)).astype(np.float32))
        particles["F"].from_numpy(np.broadcast_to(np.eye(2, dtype=np.float32), (n, 2, 2)).copy())
        return kernel
    x = ti.field(ti.f32, shape=n)
    y = ti.field(ti.f32, shape=n)
    g = ti.field(ti.f32, shape=4096)
    idx = ti.field(ti.i32, shape=n)
    x.from_numpy(np.linspace(0.0, 1.0, n, dtype=np.float32))
    idx.from_numpy(np.random.default_rng(0).integers(0, 4096, n).astype(np.int32))

    if body == "stream":
        @ti.kernel
        def kernel():
            for i in range(n):
                y[i] = 2.0 * x[i] + y[i]
    elif body == "math":
        @ti.kernel
        def kernel():
            for i in range(n):
                y[i] = ti.sin(x[i]) * ti.exp(-x[i]) + ti.sqrt(x[i] + 1.0)
    else:
        @ti.kernel
        def kernel():
            for i in range(n):
                g[idx[i]] += x[i]
    return kernel


def worker(args) -> int:
    sys.path.insert(0, ROOT)
    import simrun.lang as ti
    from simrun.lang import api
    from simrun.lang.codegen import chunks, schedule
    from simrun.lang.passes import dead_code, hoist_atomics

    sys.path.insert(0, HERE)
    from timing import time_call

    if args.inline_work is not None:  # forced modes: both thresholds (scatters have their own)
        chunks.INLINE_WORK = chunks.SCATTER_INLINE_WORK = args.inline_work
    ti.init(cpu_max_num_threads=args.threads, offline_cache=False)
    rt = api.runtime()
    out = {}
    for body in args.bodies.split(","):
        for n in [int(s) for s in args.sizes.split(",")]:
            kernel = _build(ti, body, n)
            kir, _ = kernel.lower(())
            kir = hoist_atomics.run(dead_code.run(kir))  # as compiled: atomics' unused results go
            task = next(t for t in kir.tasks if t.kind == "range")
            per = schedule.iteration_cost(task, lambda v: True).const
            kernel()
            before = rt.split_launches
            t = time_call(kernel, ti.sync, reps=args.reps, warmup=2, min_sample_s=0.02)
            out[f"{body}:{n}"] = {"median_s": t.median_s, "min_s": t.min_s, "work": per * n,
                                  "split": rt.split_launches > before}
    with open(args.out, "w") as f:
        json.dump(out, f)
    return 0


def fmt(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s >= 1e-3 else f"{s * 1e6:.1f} us"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bodies", default=",".join(BODIES))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inline-work", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    results: dict = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="simrun-inline-") as tmp:
        for r in range(args.rounds):
            order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
            for mode in order:
                out = os.path.join(tmp, f"{mode}-{r}.json")
                cmd = [sys.executable, __file__, "--worker", "--out", out, "--threads",
                       str(args.threads), "--reps", str(args.reps), "--bodies", args.bodies,
                       "--sizes", args.sizes]
                if MODES[mode] is not None:
                    cmd += ["--inline-work", str(MODES[mode])]
                subprocess.run(cmd, check=True, env={**os.environ, "SIMRUN_NO_DISK_CACHE": "1"})
                with open(out) as f:
                    results[mode].append(json.load(f))
                print(f"[inline-threshold] round {r + 1}/{args.rounds} {mode} done",
                      file=sys.stderr, flush=True)
    print(f"{args.rounds} rounds, median of {args.reps} samples per worker, {args.threads} "
          f"threads on {os.cpu_count()} cores; times per launch, medians over rounds\n")
    print("| body | iterations | estimated work | inline | split | split/inline | default |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for body in args.bodies.split(","):
        crossover = None
        for n in [int(s) for s in args.sizes.split(",")]:
            key = f"{body}:{n}"
            med = {m: statistics.median(x[key]["median_s"] for x in results[m]) for m in MODES}
            work = results["default"][0][key]["work"]
            split = results["default"][0][key]["split"]
            ratio = med["split"] / med["inline"]
            if ratio >= 1.0:
                crossover = None
            elif crossover is None:
                crossover = work
            print(f"| {body} | {n} | {work:,.0f} | {fmt(med['inline'])} | {fmt(med['split'])} "
                  f"| {ratio:.2f} | {'split' if split else 'inline'} ({fmt(med['default'])}) |")
        print(f"| {body} | splitting won from this work on | "
              f"{'-' if crossover is None else f'{crossover:,.0f}'} | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
