"""Reproducible by default, what it costs: two source trees side by side, interleaved.

Each round runs every job once with tree A and once with tree B (alternating which goes
first), each in a fresh process with its own kernel cache, after one warm-up round that
compiles. Prints per job the median over rounds of A, of B and of the per-round ratio B / A,
with the load average before and after (bench/README.md, "Reproducible by default").

    python bench/reproducible_ab.py --a /path/to/main --b . [--rounds 5] [--only lj_1]

Jobs: the LJ melt of 4,000 atoms (400 steps, 1 and 2 threads; `simrun run` stepping time,
run.json wall_s - setup_s), gravity_1024 (300 steps, 1 and 2 threads), and `simrun optimize`
of DiffTaichi's robots (mass_spring, billiards: 4 iterations, diffmpm: 3; the median time
per iteration after the first, which compiles).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LJ_4000 = ["--set", "particles.count=4000", "--set", "initial.shape=[10,10,10]",
           "--set", "boundary.high=[16.795961913825074,16.795961913825074,16.795961913825074]"]
RUNS = {
    "lj_1": ("lj_melt", ["--steps", "400", "--threads", "1", *LJ_4000]),
    "lj_2": ("lj_melt", ["--steps", "400", "--threads", "2", *LJ_4000]),
    "gravity_1024_1": ("gravity_1024", ["--steps", "300", "--threads", "1"]),
    "gravity_1024_2": ("gravity_1024", ["--steps", "300", "--threads", "2"]),
}
OPTIMIZE = {"opt_mass_spring": ("mass_spring", 4), "opt_billiards": ("billiards", 4),
            "opt_diffmpm": ("diffmpm", 3)}


def _simrun(tree: Path, cache: Path, args: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "SIMRUN_CACHE_DIR": str(cache),
           "MPLBACKEND": "Agg"}
    subprocess.run([sys.executable, "-m", "simrun.cli", *args], env=env, check=True,
                   capture_output=True, cwd=tree)


def time_job(job: str, tree: Path, cache: Path, work: Path) -> float:
    """Seconds of the job's measured part (see the module docstring)."""
    out = Path(tempfile.mkdtemp(prefix=f"{job}-", dir=work)) / "out"
    if job in RUNS:
        scene, options = RUNS[job]
        _simrun(tree, cache, ["run", str(tree / "scenes" / f"{scene}.yaml"), *options,
                              "--no-render", "-q", "--out", str(out)])
        timings = json.loads((out / "run.json").read_text())["timings"]
        return timings["wall_s"] - timings["setup_s"]
    scene, iterations = OPTIMIZE[job]
    _simrun(tree, cache, ["optimize", str(tree / "scenes" / f"{scene}.yaml"), "--iterations",
                          str(iterations), "--no-render", "--out", str(out)])
    rows = np.loadtxt(out / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    wall = np.diff(np.concatenate([[0.0], rows[:, 4]]))
    return float(np.median(wall[1:]))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=Path, required=True, help="tree A (the baseline)")
    ap.add_argument("--b", type=Path, default=REPO, help="tree B (default: this one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated jobs")
    args = ap.parse_args()
    jobs = [j for j in [*RUNS, *OPTIMIZE] if not args.only or j in args.only.split(",")]
    print(f"load average before: {_load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        trees = {"A": args.a.resolve(), "B": args.b.resolve()}
        for side in trees:
            (base / side / "work").mkdir(parents=True)
        times: dict = {(job, side): [] for job in jobs for side in trees}
        for r in range(args.rounds + 1):  # round 0 compiles: not counted
            for job in jobs:
                for side in ("AB" if r % 2 else "BA"):
                    t = time_job(job, trees[side], base / side / "cache", base / side / "work")
                    if r:
                        times[job, side].append(t)
            print(f"round {r} done, load {_load()}", flush=True)
    print(f"load average after: {_load()}")
    print(f"{'job':18s} {'A median s':>11s} {'B median s':>11s} {'B/A per round':>14s} "
          "(min-max)")
    for job in jobs:
        a, b = times[job, "A"], times[job, "B"]
        ratios = [y / x for x, y in zip(a, b)]
        print(f"{job:18s} {median(a):11.4f} {median(b):11.4f} {median(ratios):14.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
