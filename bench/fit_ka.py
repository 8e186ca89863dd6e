"""fit_ka.yaml's fit of Kob-Andersen's epsilon_AB and sigma_AB from 20% off, and a check that
its errors are honest (issue 47: "within 2%, their errors included").

    python bench/fit_ka.py [--out DIR] [--seeds 6]

1. `simrun optimize scenes/fit_ka.yaml` (the CLI, as a user runs it): the fitted values, their
   errors, the polish's runs and whether they agreed, the wall time.
2. Honesty: ``--seeds`` independent runs at the fitted parameters (best.yaml), each as long as
   one polish run and seeded apart from the fit's, each giving what the polish pools: a
   landing point theta + delta and its own sampled covariance. If those errors are honest,
   the landing points spread as they say: their standard deviation over the mean stated
   error is about 1 per parameter, and chi^2 of the points about their mean, in their own
   covariances, is about its (seeds - 1) p degrees of freedom. The fit's error is those
   errors over the pooled runs' number (plus the targets' share), so this checks it too.

Prints one JSON line (bench/readme_figures.py records it for README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from simrun.ensemble.frames import FrameEvaluator
from simrun.ensemble.gauss_newton import gauss_newton
from simrun.ensemble.keys import parse_ensemble_key
from simrun.ensemble.targets import TargetLoss
from simrun.jobs.ensemble import sample, sampling_defaults, sampling_scene
from simrun.jobs.fit import POLISH_LENGTH
from simrun.keys import energy_params, value_of
from simrun.scene import load_scene

REPO = Path(__file__).resolve().parents[1]
TRUTH = {"epsilon[A:B]": 1.5, "sigma[A:B]": 0.8}  # Kob and Andersen's (the targets' run)
SEEDS_FROM = 9001  # the check's runs: seeds the fit's own runs do not use


def run_fit(folder: Path) -> dict:
    """`simrun optimize scenes/fit_ka.yaml --out FOLDER`: what fit.json says of the result."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "simrun.cli", "optimize", "scenes/fit_ka.yaml",
                           "--out", str(folder)], cwd=REPO, capture_output=True, text=True,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    if done.returncode != 0:
        raise SystemExit(f"simrun optimize exited {done.returncode}:\n{done.stderr[-3000:]}")
    seconds = time.perf_counter() - start
    record = json.loads((folder / "fit.json").read_text())
    fitted, stages = record["fitted"], [line.rsplit(",", 1)[-1] for line in
                                        (folder / "fit.csv").read_text().splitlines()[1:]]
    out = {"seconds": round(seconds, 1), "converged": fitted["converged"],
           "adam_iterations": stages.count("adam"), "polish_runs": fitted["polish_runs"],
           "pooled": fitted.get("pooled"), "last_step_chi2": fitted["last_step_chi2"]}
    for name, value in fitted["params"].items():
        short = name.rsplit(".", 1)[-1]
        error, truth = fitted["errors"][name], TRUTH[short]
        out[short] = {"value": value, "error": error, "truth": truth,
                      "off_percent": 100 * (value - truth) / truth,
                      "z": (value - truth) / error,
                      "within_2_percent": abs(value - truth) + error <= 0.02 * truth}
    return out


def honesty(best: Path, seeds: int, folder: Path) -> dict:
    """Independent runs at ``best`` (a fit's best.yaml), each its polish's length: the spread
    of their landing points against their own stated errors."""
    scene = load_scene(best)
    keys = [parse_ensemble_key(scene, k) for k in scene.optimize.parameters]
    steps = POLISH_LENGTH * scene.steps
    every, equilibrate = sampling_defaults(steps, scene.optimize.every, None)
    at = np.array([float(value_of(scene, k)) for k in keys])
    points, covariances = [], []
    for i in range(seeds):
        seeded = replace(scene, seed=SEEDS_FROM + i)
        samples = sample(sampling_scene(seeded, steps, every), folder / f"seed-{i}", equilibrate)
        table = FrameEvaluator(scene, list(energy_params(keys).values())).evaluate(samples.x)
        loss = TargetLoss(scene, keys, samples.x)
        step = gauss_newton(scene, loss, loss.series(scene, table, list(energy_params(keys)),
                                                     samples.dof))
        points.append(at + step.step)
        covariances.append(step.sampled)
        print(f"seed {SEEDS_FROM + i}: lands at {points[-1]}, +- "
              f"{np.sqrt(np.diag(step.sampled))}", file=sys.stderr, flush=True)
    points = np.array(points)
    mean = points.mean(axis=0)
    chi2 = sum(float((x - mean) @ np.linalg.solve(c, x - mean))
               for x, c in zip(points, covariances))
    out: dict = {"seeds": seeds, "steps": steps, "spread_chi2": chi2,
                 "dof": (seeds - 1) * len(keys)}
    for j, key in enumerate(keys):
        stated = float(np.mean([np.sqrt(c[j, j]) for c in covariances]))
        spread = float(points[:, j].std(ddof=1))
        out[key.text.rsplit(".", 1)[-1]] = {"spread": spread, "stated": stated,
                                            "ratio": spread / stated}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs")
    parser.add_argument("--seeds", type=int, default=6, help="runs of the honesty check")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="fit-ka-"))
    figures = run_fit(out / "fit")
    print(json.dumps(figures), file=sys.stderr, flush=True)
    figures["honesty"] = honesty(out / "fit" / "best.yaml", args.seeds, out / "honesty")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
