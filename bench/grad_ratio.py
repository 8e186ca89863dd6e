"""Backward cost as paired ratios: kernel.grad() / forward, timed back to back.

run.py times all of a benchmark's forward samples, then all its gradient samples; on this
box, whose speed drifts by 2x within minutes, the ratio of two such medians is as noisy as
the drift. Here each sample times the forward and the gradient alternately (the order
flipping from sample to sample), so both see the same machine, and the reported figure is
the median of the per-sample ratios, with its interquartile range.

    python bench/grad_ratio.py [--module simrun|taichi] [--threads 1] [--samples 31]
"""

import argparse
import importlib
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from programs import BENCHMARKS  # noqa: E402
from worker import MODULE_INIT_EXTRAS, MODULES  # noqa: E402


def _batch(fn, min_s: float) -> int:
    """Calls per timed block so that a block lasts at least min_s."""
    start = time.perf_counter()
    fn()
    return max(1, int(min_s / max(time.perf_counter() - start, 1e-9)) + 1)


def _timed(fn, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def paired_ratios(program, samples: int, min_s: float) -> tuple[list, float, float]:
    """Per-sample grad/forward ratios, and the median forward and gradient times."""
    program.run()
    program.grad()
    inner_f, inner_g = _batch(program.run, min_s), _batch(program.grad, min_s)
    ratios, fwd, grad = [], [], []
    for k in range(samples):
        if k % 2:
            g = _timed(program.grad, inner_g)
            f = _timed(program.run, inner_f)
        else:
            f = _timed(program.run, inner_f)
            g = _timed(program.grad, inner_g)
        ratios.append(g / f)
        fwd.append(f)
        grad.append(g)
    return ratios, statistics.median(fwd), statistics.median(grad)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", choices=sorted(MODULES), default="simrun")
    ap.add_argument("--threads", type=int, default=None, help="cpu_max_num_threads")
    ap.add_argument("--samples", type=int, default=31)
    ap.add_argument("--min-sample", type=float, default=0.01, help="seconds per timed block")
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    args = ap.parse_args()
    ti = importlib.import_module(MODULES[args.module])
    extra = dict(MODULE_INIT_EXTRAS[args.module])
    if args.threads:
        extra["cpu_max_num_threads"] = args.threads
    ti.init(arch=ti.cpu, **extra)
    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    threads = args.threads or os.cpu_count()
    print(f"{args.module}, {threads} thread(s), {args.samples} paired samples each\n")
    print("| backward | forward | grad | grad/forward (median of pairs) | IQR |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        builder, size, _ = BENCHMARKS[name]
        program = builder(ti, size)
        if program.grad is None:
            continue
        ratios, f, g = paired_ratios(program, args.samples, args.min_sample)
        q = statistics.quantiles(ratios, n=4)
        print(f"| {name}.grad | {f * 1e3:.3f} ms | {g * 1e3:.3f} ms | "
              f"**{statistics.median(ratios):.2f}** | {q[0]:.2f} - {q[2]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
