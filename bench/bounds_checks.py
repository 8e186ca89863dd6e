"""What bounds checks (`ti.init(debug=True)`, the CLI's --debug) cost simrun's jobs on the
bench/README.md rows, measured A/B interleaved: each round runs every job once unchecked and
once checked, in fresh processes on a warm kernel cache, alternating which goes first.

    python bench/bounds_checks.py --rounds 3

Rows: `run` of scenes/lj_melt.yaml, gravity_1024.yaml and mpm.yaml (time: run.json's
wall_s - setup_s, the stepping alone), and `optimize` of scenes/diffmpm.yaml (time: the
median gap between iterations in loss.csv's wall_s). Debug is forced for every job through
`simrun.lang.init` (the CLI's --debug reaches `run` and `check` only).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOBS = {  # name -> simrun arguments (OUT is replaced by the output folder)
    "lj_melt (run, 32000 atoms, 100 steps)":
        ["run", "scenes/lj_melt.yaml", "--no-render", "--out", "OUT"],
    "gravity_1024 (run, 100 steps)":
        ["run", "scenes/gravity_1024.yaml", "--no-render", "--out", "OUT"],
    "mpm (run, 800 particles, 1000 steps)":
        ["run", "scenes/mpm.yaml", "--steps", "1000", "--no-render", "--out", "OUT"],
    "diffmpm (optimize, s/iteration)":
        ["optimize", "scenes/diffmpm.yaml", "--iterations", "4", "--no-render", "--out", "OUT"],
}
LAUNCH = ("import sys, simrun.lang as ti\n"
          "if sys.argv.pop(1) == 'checked':\n"
          "    init = ti.init\n"
          "    ti.init = lambda *a, **k: init(*a, **{**k, 'debug': True})\n"
          "from simrun.cli import main\n"
          "sys.argv[0] = 'simrun'\n"
          "main()\n")


def run_once(args: list[str], checked: bool, out: Path) -> float:
    """Seconds of the job's own work (see the module docstring)."""
    cmd = [sys.executable, "-c", LAUNCH, "checked" if checked else "unchecked",
           *[str(out) if a == "OUT" else a for a in args]]
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    if args[0] == "run":
        timings = json.loads((out / "run.json").read_text())["timings"]
        return timings["wall_s"] - timings["setup_s"]
    with open(out / "loss.csv") as fh:
        wall = [float(row["wall_s"]) for row in csv.DictReader(fh)]
    return statistics.median(b - a for a, b in zip(wall, wall[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(JOBS))
    args = parser.parse_args()
    times: dict[str, dict[bool, list[float]]] = {j: {False: [], True: []} for j in args.only}
    with tempfile.TemporaryDirectory() as tmp:
        for job in args.only:  # warm the kernel cache, both modes
            for checked in (False, True):
                run_once(JOBS[job], checked, Path(tmp) / f"warm-{len(os.listdir(tmp))}")
        for r in range(args.rounds):
            for job in args.only:
                for checked in ((False, True) if r % 2 == 0 else (True, False)):
                    out = Path(tmp) / f"r{r}-{len(os.listdir(tmp))}"
                    times[job][checked].append(run_once(JOBS[job], checked, out))
            print(f"round {r + 1} done, load {os.getloadavg()[0]:.1f}", flush=True)
    print("| job | unchecked s (median) | checked s (median) | checked/unchecked "
          "| per-round ratios |")
    print("|---|---|---|---|---|")
    for job, t in times.items():
        ratios = [c / u for u, c in zip(t[False], t[True])]
        print(f"| {job} | {statistics.median(t[False]):.3f} | {statistics.median(t[True]):.3f} "
              f"| {statistics.median(ratios):.2f} | {', '.join(f'{x:.2f}' for x in ratios)} |")


if __name__ == "__main__":
    main()
