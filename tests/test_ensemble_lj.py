"""Ensemble derivatives of a Lennard-Jones fluid (scenes/lj_nvt.yaml: 108 atoms, Langevin)
against central differences of NVT runs at theta +- h: d<U>/d epsilon, d<P>/d epsilon,
d<U>/d sigma and d<P>/d sigma, within four combined standard errors: each error is a
20-block jackknife estimate, itself uncertain by ~16% (Student's t with 19 degrees of
freedom: |t| > 3 in 0.7% of runs, > 4 in 0.08%), and for sigma, whose dU/dsigma has heavy
tails in a dense fluid, it was ~1.4x optimistic over six seeds; four errors keep the four
comparisons' false alarms near 1% while a wrong formula still fails (dropping the
covariance term moves d<U>/d epsilon by ~18 of its errors). One thread: the runs repeat bit for bit.

Slow for this suite (10 s on 2 idle cores, ~30 s on busy ones): five runs of 10^4 steps (one at the scene's
parameters, two per parameter moved), as few as a central difference of averages with an
error that can tell a wrong derivative from a right one allows. The moved runs share the
scene's noise seed, which correlates their first steps (common random numbers).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from simrun.ensemble.keys import parse_ensemble_key
from simrun.jobs.ensemble import estimate_from, sample, sampling_scene
from simrun.keys import with_value
from simrun.scene import load_scene

ROOT = Path(__file__).resolve().parent.parent
STEPS, EVERY, EQUILIBRATE = 10000, 5, 2000
EPSILON, SIGMA = "energy.0.params.epsilon", "energy.0.params.sigma"


def _averages(scene, folder: Path, keys: list[str]) -> dict:
    """{observable: Estimate} for the potential energy and the pressure over one run."""
    frames = sample(sampling_scene(scene, STEPS, EVERY), folder, EQUILIBRATE, threads=1)
    out = {}
    for name in ("potential", "pressure"):
        moved = replace(scene, objective=replace(scene.objective, builtin=name))
        out[name] = estimate_from(moved, [parse_ensemble_key(moved, k) for k in keys], frames,
                                  threads=1)
    return out


def _one(a) -> float:
    return float(np.asarray(a).reshape(-1)[0])


def test_lj_derivatives_agree_with_central_differences(tmp_path: Path) -> None:
    scene = load_scene(ROOT / "scenes" / "lj_nvt.yaml")
    base = _averages(scene, tmp_path / "base", [EPSILON, SIGMA])
    for key, h in ((EPSILON, 0.05), (SIGMA, 0.02)):  # sigma: 2% moves the density 6%
        parsed = parse_ensemble_key(scene, key)
        plus = _averages(with_value(scene, parsed, 1 + h), tmp_path / "p", [])
        minus = _averages(with_value(scene, parsed, 1 - h), tmp_path / "m", [])
        for name in ("potential", "pressure"):
            p, m = plus[name], minus[name]
            fd = _one(p.values["objective"] - m.values["objective"]) / (2 * h)
            fd_error = _one(np.hypot(p.errors["objective"], m.errors["objective"])) / (2 * h)
            value, error = _one(base[name].values[key]), _one(base[name].errors[key])
            assert abs(value - fd) <= 4 * np.hypot(error, fd_error), (key, name, value, error,
                                                                       fd, fd_error)
            assert error < 0.5 * abs(value), (key, name, value, error)  # and it says something
