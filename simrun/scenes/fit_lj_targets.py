"""Make fit_lj.yaml's targets from a reference Lennard-Jones fluid: lj_nvt.yaml at the
reference parameters (scenes/README.md, "fit_lj.yaml"), four independent long runs;
writes fit_lj_rdf.csv (r, g and g's standard error per bin) and prints the pressure and potential energy per
particle (with errors) for fit_lj.yaml. With --check SCENE (a fit's best.yaml), runs that
scene alike and prints each of its averages against fit_lj.yaml's targets, in units of the
two errors combined.

    python scenes/fit_lj_targets.py [--steps 60000] [--seeds 5 6 7 8] [--check DIR/best.yaml]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from simrun.ensemble.stats import jackknife
from simrun.ensemble.targets import rdf_frames, target_errors, target_values
from simrun.jobs.ensemble import estimate_from, sample, sampling_scene
from simrun.scene import Scene, SceneError, load_scene

HERE = Path(__file__).resolve().parent
REFERENCE = {"epsilon": 1.0, "sigma": 1.0}  # what the fit must recover (not in fit_lj.yaml)
CENTRES = np.round(np.arange(0.8, 2.65, 0.05), 10)  # g(r) bins up to half the box (2.68)
SCALARS = ("pressure", "potential_per_particle")


def averages(scene: Scene, steps: int, seeds: list[int]
             ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (average, standard error) over independent runs (one per seed), for the
    pressure, U/N and g(r) at CENTRES. The error is the larger of the runs' own
    (block-jackknife) errors combined and their spread: one run's jackknife error of the
    pressure and U/N was seen ~2x smaller than the spread between seeds."""
    runs = [_averages(replace(scene, seed=seed), steps) for seed in seeds]
    out = {}
    for name in runs[0]:
        values = np.array([r[name][0] for r in runs])
        own = np.sqrt(np.mean([r[name][1] ** 2 for r in runs], axis=0) / len(runs))
        spread = values.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else own
        out[name] = values.mean(axis=0), np.maximum(own, spread)
        if name in SCALARS:
            print(f"  {name} per seed: {' '.join(f'{float(v[0]):.5f}' for v in values)}")
    return out


def _averages(scene: Scene, steps: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (average, block-jackknife error) of one run of ``steps`` (a frame every 10
    steps, the first fifth discarded)."""
    with tempfile.TemporaryDirectory() as tmp:
        frames = sample(sampling_scene(scene, steps, 10), Path(tmp) / "run", steps // 5)
    out = {}
    for name in SCALARS:
        est = estimate_from(replace(scene, objective=replace(scene.objective, builtin=name,
                                                             targets=None)), [], frames)
        out[name] = est.values["objective"], est.errors["objective"]
    g = jackknife({"g": rdf_frames(scene, frames.x, CENTRES)}, lambda m: m)
    out["rdf"] = g.values["g"], g.errors["g"]
    print(f"seed {scene.seed}: {len(frames.steps)} frames of {steps} steps")
    return out


def check(path: Path, steps: int, seeds: list[int]) -> None:
    """Print the averages of the scene at ``path`` against fit_lj.yaml's targets."""
    fit = load_scene(HERE / "fit_lj.yaml")
    targets, errors = target_values(fit), target_errors(fit)
    for name, (value, error) in averages(load_scene(path), steps, seeds).items():
        z = (value - targets[name]) / np.sqrt(error ** 2 + errors[name] ** 2 + 1e-300)
        if name == "rdf":
            used = (error > 0) | (errors[name] > 0)
            print(f"rdf: chi^2 / bins {np.mean(z[used] ** 2):.2f} over {used.sum()} bins, "
                  f"largest |z| {np.max(np.abs(z[used])):.2f}")
        else:
            print(f"{name}: {float(value[0]):.5f} +- {float(error[0]):.5f}, target "
                  f"{float(targets[name][0]):.5f} +- {float(errors[name][0]):.5f}: "
                  f"{float(z[0]):+.2f} combined errors")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[5, 6, 7, 8],
                        help="one independent run per seed")
    parser.add_argument("--check", type=Path, help="a fitted scene to compare with the targets")
    args = parser.parse_args()
    if args.check:
        try:
            check(args.check, args.steps, args.seeds)
        except SceneError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        return
    scene = load_scene(HERE / "lj_nvt.yaml", [f"energy.0.params.{k}={v}"
                                              for k, v in REFERENCE.items()])
    found = averages(scene, args.steps, args.seeds)
    for name in SCALARS:
        value, error = found[name]
        print(f"{name}: {float(value[0]):.5f}  # +- {float(error[0]):.5f}")
    g, error = found["rdf"]
    lines = ["r,g,error"] + [f"{r:.4f},{v:.6f},{e:.6f}" for r, v, e in zip(CENTRES, g, error)]
    (HERE / "fit_lj_rdf.csv").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE / 'fit_lj_rdf.csv'}")


if __name__ == "__main__":
    main()
