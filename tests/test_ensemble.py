"""`simrun grad --method ensemble` against the canonical ensemble's closed forms.

Harmonic traps k/2 |x - x0|^2 under a Langevin thermostat (BAOAB samples their configurations
exactly at any stable dt): <|x - x0|^2> = d kT / k, so d<msd>/dk = -d kT / k^2 and d<msd>/dT
= d / k; <U> = N d kT / 2, so d<U>/dk = 0 and d<U>/dT = N d / 2. Every check is "within three
of the reported standard errors", and the errors themselves are checked: they shrink as
1/sqrt(run length), and 20 independent estimates hold the exact value within 3 errors at
least 19 times.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simrun.jobs.ensemble import ensemble_gradient
from simrun.scene import SceneError, load_scene

ROOT = Path(__file__).resolve().parent.parent
OSCILLATORS = ROOT / "scenes" / "oscillators.yaml"
K, T, D = 2.0, 0.5, 3  # the scene's trap stiffness, temperature and dimension


def _oscillators(sets: list[str]):
    return load_scene(OSCILLATORS, sets)


def _within(value: float, exact: float, error: float, count: float = 3.0) -> bool:
    return abs(value - exact) <= count * error


def test_msd_and_its_derivatives_match_the_closed_forms(tmp_path: Path) -> None:
    scene = _oscillators(["steps=4000", "particles.count=300", "energy.0.params.count=300"])
    r = ensemble_gradient(scene, ["energy.0.params.k", "integrator.temperature"],
                          tmp_path / "s", every=4)
    assert _within(r.objective, D * T / K, r.objective_error)
    assert _within(r.gradients["energy.0.params.k"], -D * T / K ** 2,
                   r.errors["energy.0.params.k"])
    assert _within(r.gradients["integrator.temperature"], D / K,
                   r.errors["integrator.temperature"])
    assert r.errors["energy.0.params.k"] < 0.1 * D * T / K ** 2  # and informative
    assert r.samples.discarded > 0 and r.equilibrate == 800  # 20% discarded by default


def test_equipartition_and_errors_shrink_as_one_over_sqrt_length(tmp_path: Path) -> None:
    n, errors = 200, []
    for steps in (1500, 6000):
        scene = _oscillators([f"steps={steps}", f"particles.count={n}",
                              f"energy.0.params.count={n}",
                              "objective={builtin: potential, at: mean}"])
        r = ensemble_gradient(scene, ["integrator.temperature", "energy.0.params.k"],
                              tmp_path / f"s{steps}", every=3)
        assert _within(r.gradients["integrator.temperature"], n * D / 2,
                       r.errors["integrator.temperature"])
        assert _within(r.gradients["energy.0.params.k"], 0.0, r.errors["energy.0.params.k"])
        errors.append(r.errors["integrator.temperature"])
    # 4x the frames: half the error (each error is itself known to ~16%: 20 blocks)
    assert 1.4 < errors[0] / errors[1] < 2.9


def _groups_scene(tmp_path: Path, groups: int, size: int) -> Path:
    """`groups` independent sets of oscillators in one run, one trap term (and k) each."""
    anchor = ROOT / "kernels" / "external.py"
    terms = "\n".join(f"  - {{kernel: {anchor}:anchor, params: {{k: {K}, first: {g * size}, "
                      f"count: {size}}}}}" for g in range(groups))
    text = OSCILLATORS.read_text().split("energy:")[0] + f"energy:\n{terms}\n" + \
        "integrator: {type: langevin, temperature: 0.5, friction: 1.0}\n" \
        "dt: 0.2\nsteps: 2500\nobjective: {builtin: potential, at: mean}\n"
    path = tmp_path / "groups.yaml"
    path.write_text(text.replace("count: 500, dim: 3", f"count: {groups * size}, dim: 3"))
    return path


def test_errors_are_honest_over_20_independent_estimates(tmp_path: Path) -> None:
    """d<U>/dk_g = 0 for each of 20 groups (their <U_g> = N_g d kT / 2 does not depend on
    k_g): two terms of size N_g d kT / (2 k_g) that cancel, each estimate from other
    oscillators than the others. 3 errors hold the exact value at least 19 times in 20."""
    groups = 20
    scene = load_scene(_groups_scene(tmp_path, groups, 20), allow_outside=True)
    keys = [f"energy.{g}.params.k" for g in range(groups)]
    r = ensemble_gradient(scene, keys, tmp_path / "s", every=5)
    z = np.array([r.gradients[k] / r.errors[k] for k in keys])
    assert np.sum(np.abs(z) <= 3) >= 19, z
    assert np.std(z) < 1.6, z  # errors not grossly too large either: z would then huddle at 0
    assert np.std(z) > 0.5, z


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_cli_writes_gradients_errors_and_sample_sizes(tmp_path: Path) -> None:
    out = tmp_path / "g"
    done = _cli("grad", str(OSCILLATORS), "--method", "ensemble", "--wrt",
                "energy.0.params.k", "--wrt", "integrator.temperature", "--steps", "2000",
                "--equilibrate", "500", "--sample-every", "4", "--set", "particles.count=100",
                "--set", "energy.0.params.count=100", "--out", str(out))
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "gradients.json").read_text())
    assert record["method"] == "ensemble" and record["status"] == "done"
    assert set(record["gradients"]) == set(record["errors"]) == {"energy.0.params.k",
                                                                "integrator.temperature"}
    assert record["equilibration"] == {"steps": 500, "frames_discarded": 126}
    assert record["frames"]["used"] == 375
    assert 0 < record["effective_samples"]["energy.0.params.k"] <= 375
    assert _within(record["gradients"]["energy.0.params.k"], -D * T / K ** 2,
                   record["errors"]["energy.0.params.k"])
    assert (out / "sampling" / "frames.npz").is_file()


@pytest.mark.parametrize("integrator, why", [
    ("{type: rescale, temperature: 0.5, every: 10}", "velocity rescaling"),
    ("velocity_verlet", "does not sample the canonical distribution"),
])
def test_cli_refuses_scenes_that_do_not_sample_the_canonical_ensemble(
        tmp_path: Path, integrator: str, why: str) -> None:
    done = _cli("grad", str(OSCILLATORS), "--method", "ensemble", "--wrt",
                "energy.0.params.k", "--set", f"integrator={integrator}",
                "--out", str(tmp_path / "g"))
    assert done.returncode == 2
    assert why in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "g").exists()


def test_too_few_frames_for_the_error_blocks_is_refused_before_the_run(tmp_path: Path) -> None:
    """A run too short for the jackknife's 20 blocks of two frames is bad input, said
    before sampling, with the least --steps that works (which then runs)."""
    args = ("grad", str(OSCILLATORS), "--method", "ensemble", "--wrt", "energy.0.params.k")
    done = _cli(*args, "--steps", "20", "--out", str(tmp_path / "short"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "give 16 frames" in done.stderr and "--steps 49" in done.stderr, done.stderr
    assert not (tmp_path / "short" / "sampling").exists()
    done = _cli(*args, "--steps", "49", "--out", str(tmp_path / "least"))
    assert done.returncode == 0, done.stderr


def test_ensemble_only_observables_and_keys_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(SceneError, match="only --method ensemble"):
        from simrun.keys import parse_key
        parse_key(_oscillators(["integrator=velocity_verlet",
                                "objective={builtin: potential_per_particle, at: mean}"]),
                  "energy.0.params.k")
    with pytest.raises(SceneError, match="integrator.temperature"):
        ensemble_gradient(_oscillators([]), ["integrator.temprature"], tmp_path / "s")
    with pytest.raises(SceneError, match="at: mean"):
        ensemble_gradient(_oscillators(["objective.at=end"]), ["energy.0.params.k"],
                          tmp_path / "s")


def test_horizon_report_tells_exponential_from_polynomial_growth() -> None:
    from simrun.jobs.horizon import exponential_growth

    steps = np.arange(0, 2001, 50)
    cubic = [(s, 0.0, 1e-3 * (s * 0.01) ** 3) for s in steps]
    chaotic = [(s, 0.0, np.exp(0.8 * s * 0.01) * np.cos(s)) for s in steps]
    assert exponential_growth(cubic, 0.01) is None
    found = exponential_growth(chaotic, 0.01)
    assert found is not None and found["factor"] > 100 and 0.5 < found["rate"] < 1.1


def test_check_accepts_ensemble_objectives_and_refuses_them_without_a_thermostat() -> None:
    done = _cli("check", "scenes/fit_lj.yaml")
    assert done.returncode == 0 and "ensemble average" in done.stdout, done.stderr
    done = _cli("check", "scenes/lj_nvt.yaml", "--set", "integrator=velocity_verlet")
    assert done.returncode == 2 and "canonical" in done.stderr


def test_pair_fraction_kernel_counts_the_pairs_of_each_frame() -> None:
    """kernels/observables.py:pair_fraction over the neighbour list, frame by frame, against
    a direct count of minimum-image pairs closer than r."""
    from simrun.ensemble.frames import FrameEvaluator
    from simrun.ensemble.observables import KernelObservable

    scene = load_scene(ROOT / "scenes" / "lj_nvt.yaml", [
        "objective={kernel: kernels/observables.py:pair_fraction, params: {r: 1.3}, "
        "at: mean}"])
    rng = np.random.default_rng(1)
    length = scene.boundary.high[0]
    frames = rng.uniform(0, length, size=(3, scene.particles.count, 3))
    evaluator = FrameEvaluator(scene, [])
    got = KernelObservable(scene, evaluator.system, {}).evaluate(frames, np.arange(3))
    n = scene.particles.count
    i, j = np.triu_indices(n, 1)
    for x, value in zip(frames, got.values[:, 0]):
        d = x[j] - x[i]
        d -= length * np.round(d / length)
        expected = np.sum((d * d).sum(axis=1) < 1.3 ** 2) / (n * (n - 1) / 2)
        assert abs(value - expected) < 1e-12
