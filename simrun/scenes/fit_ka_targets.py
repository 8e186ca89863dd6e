"""Make fit_ka.yaml's targets: the Kob-Andersen mixture's partial g(r)s (AA, AB, BB) from
kob_andersen.yaml, at Kob and Andersen's epsilon_AB and sigma_AB (fit_ka.yaml starts 20%
off them),
independent long runs, one per seed; writes fit_ka_rdf_AA.csv, fit_ka_rdf_AB.csv and
fit_ka_rdf_BB.csv (r, g and g's standard error per bin). With --check SCENE (a fit's
best.yaml), runs that scene alike and prints chi^2 per bin of each partial g(r) against the
targets, in units of the two errors combined.

    python scenes/fit_ka_targets.py [--steps 15000] [--seeds 5 6 7] [--check DIR/best.yaml]
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
from simrun.jobs.ensemble import sample, sampling_scene
from simrun.scene import Scene, SceneError, load_scene

HERE = Path(__file__).resolve().parent
# what the fit must recover (Kob and Andersen's values; fit_ka.yaml starts 20% off)
REFERENCE = {"epsilon[A:B]": 1.5, "sigma[A:B]": 0.8}
CENTRES = np.round(np.arange(0.6, 3.0, 0.05), 10)  # g(r) bins, well inside half the box (4.7)
PAIRS = (("A", "A"), ("A", "B"), ("B", "B"))


def averages(scene: Scene, steps: int, seeds: list[int]) -> dict[str, tuple[np.ndarray, ...]]:
    """rdf[X:Y] -> (average, standard error) over independent runs, one per seed: the larger
    of the runs' own block-jackknife errors combined and their spread."""
    runs = [_averages(replace(scene, seed=seed), steps) for seed in seeds]
    out = {}
    for name in runs[0]:
        values = np.array([r[name][0] for r in runs])
        own = np.sqrt(np.mean([r[name][1] ** 2 for r in runs], axis=0) / len(runs))
        spread = values.std(axis=0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else own
        out[name] = values.mean(axis=0), np.maximum(own, spread)
    return out


def _averages(scene: Scene, steps: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """rdf[X:Y] -> (average, block-jackknife error) of one run of ``steps`` (a frame every
    50 steps, the first fifth discarded)."""
    with tempfile.TemporaryDirectory() as tmp:
        frames = sample(sampling_scene(scene, steps, 50), Path(tmp) / "run", steps // 5)
    out = {}
    for a, b in PAIRS:
        g = jackknife({"g": rdf_frames(scene, frames.x, CENTRES, (a, b))}, lambda m: m)
        out[f"rdf[{a}:{b}]"] = g.values["g"], g.errors["g"]
    print(f"seed {scene.seed}: {len(frames.steps)} frames of {steps} steps", flush=True)
    return out


def check(path: Path, steps: int, seeds: list[int]) -> None:
    """Print chi^2 per bin of the scene at ``path``'s partial g(r)s against the targets."""
    fit = load_scene(HERE / "fit_ka.yaml")
    targets, errors = target_values(fit), target_errors(fit)
    for name, (value, error) in averages(load_scene(path), steps, seeds).items():
        z = (value - targets[name]) / np.sqrt(error ** 2 + errors[name] ** 2 + 1e-300)
        used = (error > 0) | (errors[name] > 0)
        print(f"{name}: chi^2 / bins {np.mean(z[used] ** 2):.2f} over {used.sum()} bins, "
              f"largest |z| {np.max(np.abs(z[used])):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[5, 6, 7],
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
    scene = load_scene(HERE / "kob_andersen.yaml")  # the mixture at the reference values
    pairs = scene.energy[0].pairs
    assert (pairs["epsilon"][0][1], pairs["sigma"][0][1]) == tuple(REFERENCE.values())
    for name, (g, error) in averages(scene, args.steps, args.seeds).items():
        a, b = name[4:-1].split(":")
        lines = ["r,g,error"] + [f"{r:.4f},{v:.6f},{e:.6f}" for r, v, e in zip(CENTRES, g, error)]
        path = HERE / f"fit_ka_rdf_{a}{b}.csv"
        path.write_text("\n".join(lines) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
