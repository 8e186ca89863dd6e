"""A mixture's partial g(r)s as fit targets (``rdf[A:B]``, ensemble/targets.py) and the fit
of a cross term (epsilon_AB, sigma_AB) to them, on a small Kob-Andersen mixture (216
particles, short runs): the partials add up to the total g(r), the loss's gradient (the
fluctuation formula over the frames) equals central differences of the reweighted loss, and
a few Adam steps from 20% off move both parameters toward the values the targets came from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.ensemble.keys import parse_ensemble_key
from simrun.ensemble.targets import rdf_frames
from simrun.jobs.fit import _reference, _reweighted, _scene_at, fit_by_reweighting
from simrun.keys import energy_params
from simrun.scene import SceneError, load_scene
from tests.cli_helpers import simrun

REPO = Path(__file__).resolve().parents[1]
CELLS = 6  # 6^3 = 216 particles at density 1.2: half the box (2.82) is past the cutoffs
SIDE = CELLS * (1 / 1.2) ** (1 / 3)
CENTRES = np.round(np.arange(0.6, 2.8, 0.1), 10)
TRUTH = {"epsilon[A:B]": 1.5, "sigma[A:B]": 0.8}
KEYS = [f"energy.0.params.{name}" for name in TRUTH]
# blocks: A is type 0 whatever the seed, so the KEYs are spelled [A:B] (random dealing
# numbers the types in the order they first appear)
SMALL = ["particles.species={A: 173, B: 43}", "particles.species_order=blocks", f"initial.shape=[{CELLS}, {CELLS}, {CELLS}]",
         f"boundary.high=[{SIDE!r}, {SIDE!r}, {SIDE!r}]"]


def _scene_text(targets: str) -> str:
    text = (REPO / "scenes" / "fit_ka.yaml").read_text()
    head, _, rest = text.partition("objective:")
    optimize = rest[rest.index("optimize:"):]
    return head.replace("kernels/lj.py", f"{REPO}/kernels/lj.py") + targets + optimize


def _write_targets(folder: Path, frames: np.ndarray, scene) -> str:
    """g(r) target CSVs of each species pair from ``frames``; the scene's objective text."""
    lines = ["objective:", "  at: mean", "  targets:"]
    for a, b in (("A", "A"), ("A", "B"), ("B", "B")):
        g = rdf_frames(scene, frames, CENTRES, (a, b)).mean(axis=0)
        rows = ["r,g"] + [f"{r:.4f},{v:.6f}" for r, v in zip(CENTRES, g)]
        (folder / f"g_{a}{b}.csv").write_text("\n".join(rows) + "\n")
        lines.append(f'    "rdf[{a}:{b}]": {{file: g_{a}{b}.csv}}')
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def fit_scene(tmp_path_factory) -> Path:
    """fit_ka.yaml made small, with targets from a run at the true epsilon_AB, sigma_AB."""
    from simrun.jobs.ensemble import sample, sampling_scene

    folder = tmp_path_factory.mktemp("ka")
    truth = load_scene(REPO / "scenes" / "kob_andersen.yaml", [*SMALL, "seed=3"])
    samples = sample(sampling_scene(truth, 6000, 20), folder / "truth", 1000)
    path = folder / "fit.yaml"
    path.write_text(_scene_text(_write_targets(folder, samples.x, truth)))
    return path


def _load(path: Path, extra: list[str] = ()):
    return load_scene(path, [*SMALL, "steps=3000", *extra], allow_outside=True)


def test_partial_rdfs_add_up_to_the_total(fit_scene):
    """N(N-1)/2 g = N_A(N_A-1)/2 g_AA + N_A N_B g_AB + N_B(N_B-1)/2 g_BB, bin by bin, and
    uniform random positions give g_AB ~ 1."""
    scene = _load(fit_scene)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, SIDE, (40, 216, 3))
    parts = {p: rdf_frames(scene, x, CENTRES, p) for p in (("A", "A"), ("A", "B"), ("B", "B"))}
    total = rdf_frames(scene, x, CENTRES)
    na, nb, n = 173, 43, 216
    mixed = (na * (na - 1) / 2 * parts[("A", "A")] + na * nb * parts[("A", "B")]
             + nb * (nb - 1) / 2 * parts[("B", "B")]) / (n * (n - 1) / 2)
    np.testing.assert_allclose(mixed, total, rtol=1e-12, atol=1e-12)
    ab = parts[("A", "B")].mean(axis=0)
    counts = na * nb * 40 * 4 / 3 * np.pi * np.diff(
        np.append(CENTRES - 0.05, CENTRES[-1] + 0.05) ** 3) / SIDE ** 3
    assert np.all(np.abs(ab - 1) < 5 / np.sqrt(counts))  # Poisson: 5 standard errors


def test_near_pairs_by_k_d_tree_count_as_all_pairs(fit_scene, monkeypatch):
    """Past NEAR_FROM particles a periodic k-d tree picks the candidate pairs: the same
    histograms, bit for bit, for positions in and outside the box."""
    import simrun.ensemble.targets as targets

    scene = _load(fit_scene)
    x = np.random.default_rng(1).uniform(-SIDE, 2 * SIDE, (5, 216, 3))
    for pair in (None, ("A", "B"), ("B", "B")):
        monkeypatch.setattr(targets, "NEAR_FROM", 10 ** 9)
        every_pair = rdf_frames(scene, x, CENTRES, pair)
        monkeypatch.setattr(targets, "NEAR_FROM", 100)
        np.testing.assert_array_equal(rdf_frames(scene, x, CENTRES, pair), every_pair)


def test_gradient_of_the_partial_rdf_loss_is_central_differences(fit_scene, tmp_path):
    """The fluctuation formula's dloss/dKEY equals (loss(+h) - loss(-h)) / 2h of the loss
    reweighted from the same frames: the per-pair dU/dKEY and the partial g(r)s agree."""
    scene = _load(fit_scene)
    keys = [parse_ensemble_key(scene, k) for k in KEYS]
    ref = _reference(scene, keys, tmp_path, 0, 3000, 20, 600, None)
    start = np.array([1.2, 0.96])
    energy_keys = list(energy_params(keys))

    def loss_and_grad(vector):
        current = _scene_at(scene, keys, vector)
        table, w, _ = _reweighted(ref, current, keys, vector)
        series = ref.loss.series(current, table, energy_keys, ref.samples.dof, w)
        out = ref.loss.estimate({name: s.mean(axis=0) for name, s in series.items()})
        return float(out["loss"]), np.array([float(out[f"grad:{k}"]) for k in KEYS])

    loss, grad = loss_and_grad(start)
    assert loss > 0 and np.all(grad != 0)
    for i, h in enumerate((1e-4, 1e-5)):
        step = np.zeros(2)
        step[i] = h
        central = (loss_and_grad(start + step)[0] - loss_and_grad(start - step)[0]) / (2 * h)
        # O(h^2) truncation; the loss's rounding (~1e-15 x its size) over 2h
        assert abs(central - grad[i]) <= 1e-4 * abs(grad[i]) + 1e-9 * loss / h


def test_fit_of_epsilon_and_sigma_ab_moves_toward_the_truth(fit_scene, tmp_path):
    """Five Adam steps from fit_ka.yaml's start (1.8, 0.96): the g(r)s pin sigma_AB first
    (the AB peak's place). Adam's first step is lr along minus the gradient's sign, so it
    takes sigma 0.96 -> 0.92 toward 0.8 where the reweighted gradient has the right sign,
    and the loss falls by about 2x. Later steps at this size (216 atoms, 3000 steps a run)
    are at the noise's mercy: over seeds 1, 2, 3 and 21 sigma reached 0.846 three times and
    stayed at 0.94 once, so only the best row is asked to beat the start. epsilon_AB, which
    moves the peaks' heights only, is left to longer runs (fit_ka.yaml's polish); here it
    may drift with sigma along their valley."""
    lr = 0.04
    scene = _load(fit_scene, ["optimize.iterations=5", f"optimize.lr={lr}"])
    assert scene.optimize.every == 20  # fit_ka.yaml's: a frame every 20 steps
    fit = fit_by_reweighting(scene, tmp_path / "fit", polish=0)
    with np.load(tmp_path / "fit" / "trajectory-000" / "frames.npz") as frames:
        assert set(np.diff(frames["step"])) == {20}
    first, second = fit.rows[0], fit.rows[1]
    assert second.params[1] == pytest.approx(first.params[1] - lr, abs=1e-6)  # Adam eps / |g|
    assert second.loss < 0.7 * first.loss
    best = min(fit.rows, key=lambda row: row.loss)
    assert best.loss < 0.6 * first.loss
    truth = TRUTH["sigma[A:B]"]
    assert abs(best.params[1] - truth) < abs(first.params[1] - truth) - 0.5 * lr
    assert set(fit.rows[-1].averages) == {"rdf[A:A]", "rdf[A:B]", "rdf[B:B]"}
    assert (tmp_path / "fit" / "best.yaml").is_file()


def test_partial_rdf_of_an_unknown_pair_is_one_paragraph_with_exit_2(fit_scene):
    text = fit_scene.read_text().replace('"rdf[B:B]"', '"rdf[B:C]"')
    bad = fit_scene.parent / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(SceneError, match=r"unknown key 'rdf\[B:C\]'.*rdf\[B:B\]"):
        load_scene(bad, allow_outside=True)
    done = simrun("run", str(bad), "--out", str(fit_scene.parent / "o"), cwd=fit_scene.parent)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "rdf[B:C]" in done.stderr
