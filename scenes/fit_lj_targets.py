"""Make fit_lj.yaml's targets from a reference Lennard-Jones fluid: lj_nvt.yaml at the
reference parameters (scenes/README.md, "fit_lj.yaml"), run long; writes fit_lj_rdf.csv and
prints the pressure and potential energy per particle (with errors) for fit_lj.yaml.

    python scenes/fit_lj_targets.py [--steps 60000]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from simrun.ensemble.job import estimate_from, sample, sampling_scene
from simrun.ensemble.targets import rdf_frames
from simrun.scene import load_scene

HERE = Path(__file__).resolve().parent
REFERENCE = {"epsilon": 1.0, "sigma": 1.0}  # what the fit must recover (not in fit_lj.yaml)
CENTRES = np.round(np.arange(0.8, 2.65, 0.05), 10)  # g(r) bins up to half the box (2.68)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60000)
    args = parser.parse_args()
    scene = load_scene(HERE / "lj_nvt.yaml", [f"energy.0.params.{k}={v}"
                                              for k, v in REFERENCE.items()])
    with tempfile.TemporaryDirectory() as tmp:
        frames = sample(sampling_scene(scene, args.steps, 10), Path(tmp) / "run",
                        args.steps // 5)
    for name in ("pressure", "potential_per_particle"):
        moved = replace(scene, objective=replace(scene.objective, builtin=name))
        est = estimate_from(moved, [], frames)
        print(f"{name}: {float(est.values['objective'][0]):.5f}  "
              f"# +- {float(est.errors['objective'][0]):.5f}")
    g = rdf_frames(scene, frames.x, CENTRES).mean(axis=0)
    lines = ["r,g"] + [f"{r:.4f},{v:.6f}" for r, v in zip(CENTRES, g)]
    (HERE / "fit_lj_rdf.csv").write_text("\n".join(lines) + "\n")
    print(f"wrote {HERE / 'fit_lj_rdf.csv'} ({len(frames.steps)} frames)")


if __name__ == "__main__":
    main()
