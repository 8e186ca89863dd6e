"""The Gauss-Newton polish of a fit to ensemble targets and its error estimate, on harmonic
traps under Langevin, where both have closed forms: <U>/N = d kT / 2 whatever k, so the
target t fixes kT = 2 t / d, and an error e of t (or s of the average) moves it by 2 e / d."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2

from simrun.ensemble.gauss_newton import Step, agreement, pooled
from simrun.jobs.fit import POLISH_POOL, POLISH_RUNS, fit_by_reweighting
from simrun.scene import SceneError, load_scene

ROOT = Path(__file__).resolve().parent.parent
D, TARGET = 3, 0.9  # kT = 2 * 0.9 / 3 = 0.6


def _scene(error: float | None = None, seed: int = 1, more: tuple = ()):
    value = TARGET if error is None else f"{{value: {TARGET}, error: {error}}}"
    return load_scene(ROOT / "scenes" / "oscillators.yaml", [
        "particles.count=60", "energy.0.params.count=60", "steps=2000", f"seed={seed}",
        f"objective={{at: mean, targets: {{potential_per_particle: {value}}}}}",
        "optimize={parameters: [integrator.temperature], lr: 0.003, iterations: 1}", *more])


def _fit(scene, out: Path):
    """One Adam iteration, then the polish: runs of 4000 steps (dt 0.2: 800 times the
    traps' correlation time 1 / friction), 320 frames kept of each."""
    return fit_by_reweighting(scene, out, every=10, polish_steps=4000, polish_every=10)


def test_polish_lands_on_the_closed_form_within_its_own_error(tmp_path: Path) -> None:
    """Eight seeds: the fitted kT within 3 of its errors of 2 t / d in each, and the errors
    the size of the seeds' spread (errors that are honest, neither far too small nor large)."""
    fits = [_fit(_scene(seed=s), tmp_path / f"s{s}") for s in range(8)]
    values = np.array([f.params[0] for f in fits])
    errors = np.array([f.errors[0] for f in fits])
    assert all(f.converged and POLISH_POOL <= len(f.steps) <= POLISH_RUNS for f in fits)
    exact = 2 * TARGET / D
    assert np.all(np.abs(values - exact) <= 3 * errors), (values, errors)
    assert 0.4 < np.std(values, ddof=1) / np.mean(errors) < 2.0  # 8 seeds: std to ~25%
    last = fits[0].rows[-1]  # the polish's rows: fresh runs, unweighted, at the sampled kT
    assert last.stage == "gauss-newton" and last.neff == 1.0


def test_the_targets_error_propagates_through_the_jacobian(tmp_path: Path) -> None:
    """With t's error e much larger than the average's, the error of kT is 2 e / d (to the
    share the average adds in quadrature); the fit's outputs carry it."""
    e = 0.03
    fit = _fit(_scene(error=e), tmp_path / "f")
    sampled = fit.steps[-1].sigma["potential_per_particle"][0]  # sqrt(s^2 + e^2)
    assert e <= sampled < 1.1 * e
    # J = d<U/N>/dkT = d / 2 comes from the run's fluctuations too: to a few per cent
    assert fit.errors[0] == pytest.approx(2 * sampled / D, rel=0.05)
    assert abs(fit.params[0] - 2 * TARGET / D) <= 3 * fit.errors[0]
    record = json.loads((tmp_path / "f" / "fit.json").read_text())["fitted"]
    assert record["errors"]["integrator.temperature"] == pytest.approx(fit.errors[0])
    assert record["converged"] is True and record["polish_runs"] == len(fit.steps)
    assert json.loads((tmp_path / "f" / "fit.json").read_text())["status"] == "done"
    assert abs(record["last_run"]["z"]["potential_per_particle"][0]) < 4
    csv = (tmp_path / "f" / "fit.csv").read_text().splitlines()
    assert csv[0].endswith(",stage") and csv[-1].endswith(",gauss-newton")


def test_a_polish_from_far_off_goes_on_until_its_runs_agree(tmp_path: Path) -> None:
    """From kT = 0.4, a third below 0.6: steps of at most 10% need five runs to get there,
    so a polish that stops after a set number of runs (four, before) ends "not converged"
    with a step still under way. It must go on until POLISH_POOL independently seeded runs
    in a row step within their errors, and report the mean of where those land."""
    fit = fit_by_reweighting(_scene(more=("integrator.temperature=0.4",)), tmp_path / "far",
                             every=10, polish_steps=2000, polish_every=10)  # 160 frames a run
    assert fit.converged, [s.chi2 for s in fit.steps]
    assert abs(fit.params[0] - 2 * TARGET / D) <= 3 * fit.errors[0]
    assert fit.pool.runs == POLISH_POOL and len(fit.steps) > POLISH_POOL
    seeds = {json.loads((tmp_path / "far" / f"trajectory-{r.trajectory:03d}" / "run.json")
                        .read_text())["seed"] for r in fit.rows if r.stage == "gauss-newton"}
    assert len(seeds) == len(fit.steps)  # every run its own noise: the pooled runs independent
    record = json.loads((tmp_path / "far" / "fit.json").read_text())["fitted"]
    assert record["converged"] is True and record["pooled"]["runs"] == POLISH_POOL


def test_parameters_the_targets_do_not_determine_are_refused(tmp_path: Path) -> None:
    """<U>/N does not depend on k: no fit can find it, and saying so beats a number."""
    scene = _scene(more=("optimize={parameters: [integrator.temperature, energy.0.params.k],"
                         " lr: 0.003, iterations: 1}",))
    with pytest.raises(SceneError, match="do not determine"):
        _fit(scene, tmp_path / "k")


def _step(delta, sampled, targets=None) -> Step:
    p = len(delta)
    targets = np.zeros((p, p)) if targets is None else targets
    return Step(np.asarray(delta, float), sampled + targets, sampled, {}, {}, targets)


def test_agreement_refuses_one_step_in_ten_at_the_fit() -> None:
    """At the fit each run lands at theta* plus its own noise n_k, and the next run starts
    there: its step is n_k - n_k-1. Counted against both runs' covariances, one such step in
    ten is above the 90% point of chi^2 (p = 2); against its own run's alone, about one in
    four would be (a polish that seldom finds two agreeing runs in a row)."""
    rng = np.random.default_rng(0)
    cov = np.array([[4e-4, -1e-5], [-1e-5, 3e-7]])  # fit_ka's scale: errors 0.02, 5e-4
    noise = rng.multivariate_normal(np.zeros(2), cov, size=20001)
    steps = [_step(b - a, cov) for a, b in zip(noise[:-1], noise[1:])]
    limit = chi2.ppf(0.9, 2)
    both = np.mean([agreement(s, s) > limit for s in steps])
    alone = np.mean([agreement(s, None) > limit for s in steps])
    assert abs(both - 0.10) < 0.01  # 20,000 steps: binomial sd 0.002
    assert alone > 0.2


def test_pooled_runs_average_their_errors_and_scale_up_a_spread() -> None:
    """Two runs' mean has their sampled covariance over two, plus the targets' share, which
    no number of runs reduces; landing points further apart than their errors say scale
    the sampled share by chi^2 / dof (Birge), never down."""
    sampled, targets = np.diag([4e-4, 1e-6]), np.diag([1e-4, 0.0])
    runs = [_step([0.0, 0.0], sampled, targets)] * 2
    near = pooled([np.array([1.50, 0.8]), np.array([1.51, 0.8])], runs)
    assert near.estimate == pytest.approx([1.505, 0.8])
    assert near.scale == 1.0  # chi^2 = 2 * 0.005^2 / 4e-4 = 0.125 of 2 dof
    assert np.allclose(near.covariance, sampled / 2 + targets)
    far = pooled([np.array([1.40, 0.8]), np.array([1.60, 0.8])], runs)
    assert far.spread_chi2 == pytest.approx(2 * 0.1 ** 2 / 4e-4)  # 50
    assert far.scale == pytest.approx(np.sqrt(50 / 2))
    assert np.allclose(far.covariance, sampled / 2 * 25 + targets)
