"""`simrun optimize` with ensemble targets (DiffTRe): reweighting reuses a trajectory while
N_eff / N stays above 0.9, and the reweighted averages follow the closed form.

Harmonic traps under Langevin: <U>/N = d kT / 2 whatever k, so the target potential energy
per particle fixes the temperature, and d loss / dT = 2 (<U>/N - t) d / 2 exactly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from simrun.jobs.fit import fit_by_reweighting
from simrun.scene import load_scene

ROOT = Path(__file__).resolve().parent.parent
SETS = ["particles.count=60", "energy.0.params.count=60", "steps=3000",
        "objective={at: mean, targets: {potential_per_particle: 0.9}}",
        "optimize={parameters: [integrator.temperature], lr: 0.003, iterations: 4}"]


def test_reweighting_reuses_the_trajectory_and_descends(tmp_path: Path) -> None:
    scene = load_scene(ROOT / "scenes" / "oscillators.yaml", SETS)
    rows = fit_by_reweighting(scene, tmp_path / "fit", every=3, polish=0).rows
    temps = [float(r.params[0]) for r in rows]
    assert temps[0] == 0.5 and all(b > a for a, b in zip(temps, temps[1:]))  # towards 0.6
    assert rows[-1].trajectory == 0  # small steps: one run serves every iteration
    assert all(0.9 <= r.neff <= 1.0 for r in rows) and rows[-1].neff < 1.0
    for r, t in zip(rows, temps):  # the reweighted average follows equipartition
        assert abs(float(r.averages["potential_per_particle"][0]) - 1.5 * t) < 0.03
    assert rows[-1].loss < rows[0].loss
    text = (tmp_path / "fit" / "fit.csv").read_text().splitlines()
    assert text[0] == ("iteration,loss,neff,trajectory,replaced_neff,integrator.temperature,"
                       "stage")
    assert len(text) == 5 and all(r.stale is None for r in rows)
    best = load_scene(tmp_path / "fit" / "best.yaml")
    assert np.isclose(best.integrator.temperature, rows[-1].params[0])  # the last quarter: 1


def test_cli_fits_targets_and_resamples_when_n_eff_drops(tmp_path: Path) -> None:
    sets = [s.replace("lr: 0.003, iterations: 4", "lr: 0.05, iterations: 3") for s in SETS]
    args = [a for s in sets for a in ("--set", s)]
    done = subprocess.run([sys.executable, "-m", "simrun.cli", "optimize",
                           str(ROOT / "scenes" / "oscillators.yaml"), *args, "--out",
                           str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [r.split(",") for r in (tmp_path / "o" / "fit.csv").read_text().splitlines()[1:]]
    adam = [r for r in rows if r[-1] == "adam"]
    assert [int(r[3]) for r in adam] == [0, 1, 2]  # steps of 0.05 in kT: N_eff/N < 0.9
    assert all(float(r[4]) < 0.9 for r in adam[1:])  # ... to this
    polish = [r for r in rows if r[-1] == "gauss-newton"]  # then fresh runs, 1 to 4
    assert 1 <= len(polish) <= 4 and [int(r[3]) for r in polish] == list(
        range(3, 3 + len(polish)))
    assert (tmp_path / "o" / "fit.png").is_file()
    # the count is the scene's (iterations: 3), the polish runs named apart (issue 44)
    assert "done: 3 Adam iterations from 3 trajectories" in done.stdout, done.stdout
    assert f"polished by Gauss-Newton over {len(polish)} fresh runs" in done.stdout
    fitted = [line for line in done.stdout.splitlines() if "integrator.temperature =" in line]
    value, error = (float(v) for v in fitted[0].split("=")[1].split("+-"))
    assert abs(value - 0.6) <= 4 * error and 0 < error < 0.05  # kT = 2 t / d


def test_targets_are_checked_where_they_are_written() -> None:
    import pytest

    from simrun.scene import SceneError

    scene = ROOT / "scenes" / "oscillators.yaml"
    with pytest.raises(SceneError, match="does not exist"):
        load_scene(scene, ["objective={at: mean, targets: {rdf: {file: missing.csv}}}"])
    with pytest.raises(SceneError, match="at: mean"):
        load_scene(scene, ["objective={at: end, targets: {pressure: 1.0}}"])
    with pytest.raises(SceneError, match="not one of|pressur"):
        load_scene(scene, ["objective={at: mean, targets: {pressur: 1.0}}"])
    with pytest.raises(SceneError, match="error"):
        load_scene(scene, ["objective={at: mean, targets: {pressure: {value: 1, error: -1}}}"])
    fit = load_scene(ROOT / "scenes" / "fit_lj.yaml")
    assert fit.objective.targets["potential_per_particle"]["error"] > 0
    assert set(fit.objective.targets) == {"pressure", "potential_per_particle", "rdf"}
    again = fit.objective.to_dict()["targets"]
    assert again["rdf"]["file"].endswith("fit_lj_rdf.csv") and again["pressure"]["weight"] == 1


def test_grad_of_a_targets_loss_is_the_closed_form(tmp_path: Path) -> None:
    """loss = (<U>/N - t)^2 with <U>/N = d kT / 2: d loss / dT = 2 (d kT / 2 - t) d / 2."""
    from simrun.jobs.ensemble import ensemble_gradient

    scene = load_scene(ROOT / "scenes" / "oscillators.yaml", SETS[:3] + [SETS[3]])
    r = ensemble_gradient(scene, ["integrator.temperature", "energy.0.params.k"],
                          tmp_path / "s", every=3)
    exact = 2 * (1.5 * 0.5 - 0.9) * 1.5
    assert abs(r.gradients["integrator.temperature"] - exact) <= 3 * r.errors[
        "integrator.temperature"]
    assert abs(r.gradients["energy.0.params.k"]) <= 3 * r.errors["energy.0.params.k"]
    assert abs(r.objective - (1.5 * 0.5 - 0.9) ** 2) <= 3 * r.objective_error
