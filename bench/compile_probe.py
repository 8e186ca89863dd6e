"""Measure import, init and first-call (JIT) time of the gravity example in a fresh process.

run.py calls this twice per module with the same empty cache directory: the first process
is the cold start (everything compiled), the second the warm start (on-disk kernel cache).
A fresh process per measurement is the only honest way: in-process caches would hide the JIT.
"""

import argparse
import importlib
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from programs import build_gravity  # noqa: E402
from worker import MODULES, error_summary  # noqa: E402


def init_with_cache(ti, cache_dir: str) -> None:
    """ti.init with the on-disk cache in ``cache_dir``.

    Taichi takes the directory as an init option; simrun reads SIMRUN_CACHE_DIR, which run.py
    sets to the same directory in the probe's environment.
    """
    base = {"arch": ti.cpu, "default_fp": ti.f32}
    try:
        ti.init(**base, offline_cache=True, offline_cache_file_path=cache_dir)
    except TypeError:  # a module without Taichi's cache options: the environment decides
        ti.init(**base)


def probe(module: str, cache_dir: str, steady_reps: int = 200) -> dict:
    """Wall-clock phases of one process's first gravity substeps."""
    t0 = time.perf_counter()
    ti = importlib.import_module(MODULES[module])
    t1 = time.perf_counter()
    init_with_cache(ti, cache_dir)
    t2 = time.perf_counter()
    substep, x, _ = build_gravity(ti, 8)
    sync = getattr(ti, "sync", lambda: None)
    t3 = time.perf_counter()
    substep()
    sync()
    t4 = time.perf_counter()
    samples = []
    for _ in range(steady_reps):
        start = time.perf_counter()
        substep()
        sync()
        samples.append(time.perf_counter() - start)
    steady = statistics.median(samples)
    return {
        "import_s": t1 - t0,
        "init_s": t2 - t1,
        "build_s": t3 - t2,
        "first_substep_s": t4 - t3,
        "steady_substep_s": steady,
        "compile_s": (t4 - t3) - steady,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", choices=sorted(MODULES), required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    try:
        result = probe(args.module, args.cache_dir)
    except Exception as exc:  # reported in the compile table
        result = error_summary(exc)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
