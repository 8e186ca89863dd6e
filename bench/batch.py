"""simrun batch's overhead: a 64-job sweep of a small scene on Dask against the same jobs run
one after another in one process (load_scene + run_scene, no Dask), and the speed-up with 2
workers. Every job runs one kernel thread, so the comparison is of the machinery alone.

    python bench/batch.py --jobs 64 --steps 5000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from simrun.batch import Engine, run_batch
from simrun.scene import load_scene
from simrun.stepper import run_scene

REPO = Path(__file__).resolve().parents[1]
SCENE = REPO / "scenes" / "gravity.yaml"


def sweep(jobs: int) -> list[str]:
    """``jobs`` softening values (the energy changes, the cost per job does not)."""
    return [f"energy.0.params.softening=linspace(0.001,0.01,{jobs})"]


def serial(jobs: int, steps: int, root: Path) -> float:
    started = time.perf_counter()
    values = [0.001 + (0.01 - 0.001) * i / (jobs - 1) for i in range(jobs)]
    for i, value in enumerate(values):
        scene = load_scene(SCENE, [f"steps={steps}", f"energy.0.params.softening={value}"])
        run_scene(scene, root / f"run-{i:03d}", threads=1)
    return time.perf_counter() - started


def batch(jobs: int, steps: int, root: Path, workers: int) -> float:
    started = time.perf_counter()
    result = run_batch(SCENE, sweep(jobs), sets=[f"steps={steps}"], out_dir=root,
                       engine=Engine(workers=workers), options={"threads": 1, "no_render": True},
                       plots=False)
    assert result.ok, [r.error for r in result.rows if r.error]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="simrun-bench-batch-"))
    try:
        serial(2, 100, tmp / "warm")  # kernels compiled into the disk cache first
        one_by_one = serial(args.jobs, args.steps, tmp / "serial")
        one = batch(args.jobs, args.steps, tmp / "w1", 1)
        two = batch(args.jobs, args.steps, tmp / "w2", 2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    per_job = one_by_one / args.jobs
    print(f"| {args.jobs} jobs x {args.steps} steps | wall s | per job s | vs one process |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| one process, one after another | {one_by_one:.2f} | {per_job:.3f} | 1.00 |")
    for name, t in (("simrun batch --workers 1", one), ("simrun batch --workers 2", two)):
        print(f"| {name} | {t:.2f} | {t / args.jobs:.3f} | {t / one_by_one:.2f} |")
    print(f"overhead per job (1 worker): {(one - one_by_one) / args.jobs * 1000:.1f} ms "
          f"= {(one / one_by_one - 1) * 100:+.1f}%; 2 workers: {one_by_one / two:.2f}x faster")


if __name__ == "__main__":
    main()
