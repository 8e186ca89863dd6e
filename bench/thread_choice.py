"""Steps/s of small-to-large systems on one thread and on every CPU, beside the work per
step that simrun.stepper.threads estimates: where one thread stops being faster sets
ONE_THREAD_BELOW (bench/README.md, "Threads from the work").

    python bench/thread_choice.py [--repeats 3] [--threads 2]

Each point runs `run` through the library (no pictures, one frame at the end) on 1 and on
--threads threads, interleaved, --repeats times; the median rate of the stepping after
set-up is printed, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simrun.scene import load_scene  # noqa: E402
from simrun.stepper import run_scene  # noqa: E402
from simrun.stepper.threads import work_per_step  # noqa: E402

LJ = "lj_nvt.yaml"
SPACING = 1.7878070701931352  # lj_nvt's fcc lattice constant


def lj_sets(cells: int, steps: int) -> list[str]:
    side = cells * SPACING
    return [f"particles.count={4 * cells ** 3}", f"initial.shape=[{cells},{cells},{cells}]",
            f"boundary.high=[{side},{side},{side}]", f"steps={steps}",
            f"outputs.every={steps}"]


def gravity_sets(count: int, steps: int) -> list[str]:
    return [f"particles.count={count}", f"steps={steps}", f"outputs.every={steps}"]


POINTS = [(LJ, lj_sets, 3, 4000), (LJ, lj_sets, 4, 2000), (LJ, lj_sets, 5, 1000),
          (LJ, lj_sets, 6, 600), (LJ, lj_sets, 8, 300),
          ("gravity.yaml", gravity_sets, 8, 40000), ("gravity.yaml", gravity_sets, 64, 10000),
          ("gravity.yaml", gravity_sets, 200, 2000), ("gravity.yaml", gravity_sets, 400, 600)]


def rate(scene, threads: int, out: Path) -> float:
    result = run_scene(scene, out, threads=threads)
    return (result.steps_done - result.start_step) / (result.wall_s - result.setup_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    print(f"{'scene':14s} {'N':>6s} {'work/step':>10s} {'1 thread':>10s} "
          f"{f'{args.threads} threads':>10s} {'ratio':>6s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, sets, size, steps in POINTS:
            scene = load_scene(REPO / "scenes" / name, sets(size, steps))
            rates: dict[int, list[float]] = {1: [], args.threads: []}
            for k in range(args.repeats):
                for threads in rates:
                    out = Path(tmp) / f"{name}-{size}-{threads}-{k}"
                    rates[threads].append(rate(scene, threads, out))
            one, many = (statistics.median(rates[t]) for t in rates)
            print(f"{name:14s} {scene.particles.count:6d} {work_per_step(scene):10.3g} "
                  f"{one:10,.0f} {many:10,.0f} {many / one:6.2f}", flush=True)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
