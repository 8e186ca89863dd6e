"""Run the benchmarks for ONE kernel-language module in this process.

run.py starts one worker process per module (Taichi and simrun never share a process, so
neither's runtime, thread pool or LLVM state can disturb the other). The worker rewrites its
JSON output after every benchmark and names the one in progress, so a crash or a hang
(segfault in a JIT, runaway compile) costs one row, and run.py can resume with the rest.
"""

import argparse
import importlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # make `simrun` importable without installing it

from programs import BENCHMARKS  # noqa: E402
from timing import time_call, time_twin  # noqa: E402

MODULES = {"taichi": "taichi", "simrun": "simrun.lang"}

# Taichi 1.7.4's adaptive autodiff stack segfaults in the backward of a loop-carried
# accumulator (pair_energy_local.grad); a fixed size >= inner trip count + 1 avoids it.
MODULE_INIT_EXTRAS = {"taichi": {"ad_stack_size": 8192}, "simrun": {}}


def error_summary(exc: BaseException) -> dict:
    """Short message for the table plus the traceback tail for the JSON."""
    message = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return {
        "error": " ".join(message)[:400],
        "traceback": "".join(traceback.format_exception(exc))[-3000:],
    }


class Progress:
    """The worker's JSON output, rewritten atomically after each step."""

    def __init__(self, path: str, module: str, threads: int):
        self.path = path
        self.data = {"module": module, "threads": threads, "current": None, "results": {}}

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(tmp, self.path)

    def start(self, name: str) -> None:
        self.data["current"] = name
        self.data["started"] = time.time()
        self.save()

    def record(self, name: str, row: dict) -> None:
        self.data["results"][name] = row
        self.save()


def init_module(module: str, threads: int):
    """Import the module and call ti.init with the settings shared by both modules."""
    ti = importlib.import_module(MODULES[module])
    kwargs = {"arch": ti.cpu, "default_fp": ti.f32}
    if threads > 0:
        kwargs["cpu_max_num_threads"] = threads
    kwargs.update(MODULE_INIT_EXTRAS[module])
    ti.init(**kwargs)
    return ti


def measure(fn, check, sync, args) -> dict:
    """First call (includes JIT), steady-state timing, then the cross-module check value."""
    start = time.perf_counter()
    fn()
    sync()
    row = {"first_call_s": time.perf_counter() - start}
    row.update(
        time_call(
            fn, sync, reps=args.reps, warmup=args.warmup, min_sample_s=args.min_sample
        ).to_dict()
    )
    if check is not None:
        try:
            row["check"] = check()
        except Exception as exc:  # a failed check must not lose the timing
            row["check_error"] = error_summary(exc)["error"]
    return row


def run_twin(ti, name: str, args, progress: Progress) -> None:
    """Two independent copies of the program on two threads at once (timing.time_twin):
    the speedup the machine gives this work when nothing is shared."""
    builder, full_size, quick_size = BENCHMARKS[name]
    size = quick_size if args.quick else full_size
    try:
        first, second = builder(ti, size), builder(ti, size)
        progress.record(name, time_twin(first.run, second.run, getattr(ti, "sync", lambda: None),
                                        reps=args.reps, min_sample_s=args.min_sample))
    except Exception as exc:
        progress.record(name, error_summary(exc))


def run_benchmark(ti, name: str, args, progress: Progress) -> None:
    """Build, time forward (and backward when the program has one), record each row."""
    if args.twin:
        run_twin(ti, name, args, progress)
        return
    sync = getattr(ti, "sync", lambda: None)
    builder, full_size, quick_size = BENCHMARKS[name]
    try:
        program = builder(ti, quick_size if args.quick else full_size)
        progress.record(name, measure(program.run, program.check, sync, args))
    except Exception as exc:  # report and continue with the next row
        progress.record(name, error_summary(exc))
        return
    if program.grad is None or args.forward_only:
        return
    grad_name = name + ".grad"
    progress.start(grad_name)
    try:
        progress.record(grad_name, measure(program.grad, program.grad_check, sync, args))
    except Exception as exc:
        progress.record(grad_name, error_summary(exc))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", choices=sorted(MODULES), required=True)
    parser.add_argument("--out", required=True, help="JSON file rewritten after each row")
    parser.add_argument("--threads", type=int, default=0, help="cpu_max_num_threads; 0=default")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--forward-only", action="store_true", help="skip .grad rows")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--min-sample", type=float, default=0.02, help="seconds per sample")
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke tests")
    parser.add_argument("--twin", action="store_true",
                        help="instead of timing, measure the two-thread ceiling of each "
                             "program (two independent copies at once; use --threads 1)")
    args = parser.parse_args(argv)
    if args.twin and args.threads != 1:
        parser.error("--twin compares independent single-thread copies: pass --threads 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    progress = Progress(args.out, args.module, args.threads)
    progress.start("<init>")
    try:
        ti = init_module(args.module, args.threads)
        version = getattr(ti, "__version__", "unknown")  # a tuple in Taichi
        progress.data["version"] = (
            ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        )
    except Exception as exc:  # the runner shows this on every row
        progress.data["init_error"] = error_summary(exc)
        progress.data["current"] = None
        progress.save()
        return 1
    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    for name in names:
        progress.start(name)
        run_benchmark(ti, name, args, progress)
    progress.data["current"] = None
    progress.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
