"""A kernel parameter moved at run time meets its kernel's LIMITS as a loaded one does
(simrun/keys/limits.py): a fit reweighting its frames to a pair cutoff past the neighbour
list's (whose list holds no pair beyond its cutoff + skin) was a silently wrong energy, the
pairs in between missed. Checked against a NumPy sum over all pairs: a move within the list
gives that sum, a move past it is one paragraph naming the KEY (exit 2 from the CLI, the
fit's files left as of its last iteration)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from simrun.ensemble.frames import FrameEvaluator
from simrun.scene import SceneError, initial_state, load_scene
from simrun.scene.species import type_ids
from simrun.stepper.system import System
from tests.cli_helpers import simrun

REPO = Path(__file__).resolve().parents[1]
SIDE, LIST_CUTOFF, SKIN = 5.0, 1.5, 0.3


def _lj_scene(tmp_path: Path) -> Path:
    """64 LJ particles, a list cut at 1.5 (reach 1.8), the kernel's cutoff 1.45; an
    objective of targets that pulls the cutoff up (a lower U per particle: -50)."""
    path = tmp_path / "reach.yaml"
    path.write_text(f"""version: 2
name: reach
precision: f64
seed: 3
particles: {{count: 64, dim: 3}}
initial: {{type: lattice, shape: [4, 4, 4], spacing: [1.25, 1.25, 1.25], jitter: 0.1,
           temperature: 1.0}}
boundary: {{type: periodic, low: [0, 0, 0], high: [{SIDE}, {SIDE}, {SIDE}]}}
neighbors: {{cutoff: {LIST_CUTOFF}, skin: {SKIN}}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_shifted
    params: {{epsilon: 1.0, sigma: 1.0, cutoff: 1.45}}
integrator: {{type: langevin, temperature: 1.0, friction: 1.0}}
dt: 0.005
steps: 300
objective: {{at: mean, targets: {{potential_per_particle: -50.0}}}}
optimize: {{parameters: [energy.0.params.cutoff], lr: 0.2, iterations: 3}}
""")
    return path


def _mixture(tmp_path: Path) -> Path:
    """tests/test_neighbor_types.py's mixture: per-pair cutoffs, A,B's (1.3) the shortest."""
    path = tmp_path / "mixture.yaml"
    path.write_text(f"""version: 2
name: mixture
seed: 4
precision: f64
particles: {{dim: 3, species: {{A: 48, B: 16}}, species_order: random}}
initial: {{type: lattice, shape: [4, 4, 4], spacing: [1.1, 1.1, 1.1], jitter: 0.2,
           temperature: 1.0}}
boundary: {{type: periodic, low: [0, 0, 0], high: [4.4, 4.4, 4.4]}}
neighbors: {{cutoff: 1.8, skin: 0.2}}
energy:
  - kernel: {REPO}/kernels/lj.py:lj_species_shifted
    params:
      epsilon: {{A: 1.0, "A,B": 1.5, B: 0.5}}
      sigma: {{A: 1.0, "A,B": 0.8, B: 0.88}}
      cutoff: {{A: 1.8, "A,B": 1.3, B: 1.6}}
integrator: {{type: langevin, temperature: 1.0, friction: 1.0}}
dt: 0.002
steps: 20
""")
    return path


def all_pairs_energy(x: np.ndarray, side: float, eps: np.ndarray, sig: np.ndarray,
                     cut: np.ndarray) -> float:
    """Cut-and-shifted LJ over every pair i < j (minimum image); the parameters are
    (n x n) per pair."""
    d = x[None] - x[:, None]
    d -= side * np.round(d / side)
    r2 = (d * d).sum(-1)
    upper = np.triu(np.ones_like(r2, dtype=bool), 1)
    inside = upper & (r2 < cut * cut)

    def lj(q2):
        s6 = (sig * sig / q2) ** 3
        return 4 * eps * (s6 * s6 - s6)

    return float((lj(np.where(inside, r2, 1.0)) - lj(cut * cut))[inside].sum())


def _rounding(x, side, eps, sig, cut) -> float:
    """Bound on the sums' rounding: a few eps of sum |term| (the largest, near the core)."""
    d = x[None] - x[:, None]
    d -= side * np.round(d / side)
    r2 = (d * d).sum(-1)
    s6 = (sig * sig / np.where(r2 > 0, r2, 1.0)) ** 3
    return 64 * np.finfo(float).eps * float(np.abs(4 * eps * (s6 * s6 + s6))[
        np.triu(r2 < cut * cut, 1)].sum())


def _moved_to(stderr: str, by: str) -> float:
    """The value the message says ``by`` moved energy.0.params.cutoff to."""
    found = re.search(re.escape(by) + r" moved energy\.0\.params\.cutoff to ([0-9.e+-]+),",
                      stderr)
    assert found, stderr
    return float(found.group(1))


def test_a_cutoff_moved_within_the_list_is_the_all_pairs_energy_and_past_it_refused(
        tmp_path):
    scene = load_scene(_lj_scene(tmp_path), allow_outside=True)
    x, _ = initial_state(scene)
    n = len(x)
    evaluator = FrameEvaluator(scene, [(0, "cutoff")], threads=1)
    ones = np.ones((n, n))
    for cutoff in (1.2, 1.5):  # within the list: every pair within the cutoff is counted
        evaluator.set_values({(0, "cutoff"): cutoff})
        energy = float(evaluator.evaluate(x[None]).potential[0])
        want = all_pairs_energy(x, SIDE, ones, ones, cutoff * ones)
        assert abs(energy - want) <= _rounding(x, SIDE, ones, ones, cutoff * ones)
    # not vacuous: at 2.2 the sum takes in pairs the list (reach 1.8) never holds
    assert all_pairs_energy(x, SIDE, ones, ones, 2.2 * ones) != pytest.approx(
        all_pairs_energy(x, SIDE, ones, ones, 1.8 * ones), rel=1e-3)
    with pytest.raises(SceneError) as caught:
        evaluator.set_values({(0, "cutoff"): 2.2})
    message = str(caught.value)
    assert "moved energy.0.params.cutoff to 2.2" in message
    assert "cutoff <= list_cutoff" in message and "list_cutoff = 1.5" in message
    assert "neighbors.cutoff" in message and "optimize.bounds" in message
    assert "\n" not in message


def test_a_pair_cutoff_moved_past_the_list_is_refused_and_never_clamped(tmp_path):
    """cutoff[A:B] through the evaluator (the fit's path) and written straight into the
    kernel's field (the list's own check: no silent clamp to the list's cutoff)."""
    scene = load_scene(_mixture(tmp_path), allow_outside=True)
    x, _ = initial_state(scene)
    types = type_ids(scene.particles.species)
    eps = np.array([[1.0, 1.5], [1.5, 0.5]])[types[:, None], types[None]]
    sig = np.array([[1.0, 0.8], [0.8, 0.88]])[types[:, None], types[None]]
    cutoffs = np.array([[1.8, 1.7], [1.7, 1.6]])  # A,B moved from 1.3 to 1.7: within
    evaluator = FrameEvaluator(scene, [(0, "cutoff[A:B]")], threads=1)
    evaluator.set_values({(0, "cutoff[A:B]"): 1.7})
    energy = float(evaluator.evaluate(x[None]).potential[0])
    cut = cutoffs[types[:, None], types[None]]
    assert abs(energy - all_pairs_energy(x, 4.4, eps, sig, cut)) <= \
        _rounding(x, 4.4, eps, sig, cut)
    with pytest.raises(SceneError, match=r"moved energy\.0\.params\.cutoff\[A:B\] to 2\.1, "
                       r".*cutoff <= list_cutoff for the species pair A,B"):
        evaluator.set_values({(0, "cutoff[A:B]"): 2.1})

    system = System(scene, x, threads=1)
    system.forces()
    past = np.array([[1.8, 2.1], [2.1, 1.6]])
    system.pair_fields(0)["cutoff"].from_numpy(past)
    with pytest.raises(SceneError, match=r"type pair 0,1 is 2\.1, past the neighbour list's "
                       r"cutoff 1\.8"):
        system.refresh_neighbors()


def test_cli_fit_moving_the_cutoff_past_the_list_exits_2_naming_the_key(tmp_path):
    """Adam's first step moves the cutoff from 1.45 to 1.65 (lr 0.2, towards a lower U):
    one paragraph naming the KEY, exit 2, and fit.json / fit.csv as of iteration 0."""
    path = _lj_scene(tmp_path)
    done = simrun("optimize", str(path), "--allow-outside", "--out", "o", cwd=tmp_path,
                  timeout=900)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert _moved_to(done.stderr, "the fit (Adam, iteration 1)") == pytest.approx(1.65)
    assert "cutoff <= list_cutoff" in done.stderr and "neighbors.cutoff" in done.stderr
    record = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert record["status"] == "failed"
    rows = (tmp_path / "o" / "fit.csv").read_text().splitlines()
    assert rows[0].startswith("iteration,loss") and len(rows) == 2  # iteration 0 alone
    assert float(rows[1].split(",")[5]) == 1.45


def test_cli_optimize_moving_the_cutoff_past_the_list_exits_2_naming_the_key(tmp_path):
    """The trajectory gradient's path: Adam lowers U at the end by raising the shifted
    cutoff (dU/d cutoff < 0 past the minimum), 1.45 to 1.65 in its first step; refused
    naming the KEY (not the scene's own value), optimize.json marked failed."""
    path = _lj_scene(tmp_path)
    done = simrun("optimize", str(path), "--allow-outside", "--no-render", "--out", "o",
                  "--set", "objective={builtin: potential, at: end}", "--set", "steps=20",
                  "--set", "integrator=velocity_verlet",
                  cwd=tmp_path, timeout=900)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _moved_to(done.stderr, "the optimizer") == pytest.approx(1.65)
    record = json.loads((tmp_path / "o" / "optimize.json").read_text())
    assert record["status"] == "failed" and "energy.0.params.cutoff" in record["message"]
    assert record["iterations_done"] == 0


def test_cli_grad_check_at_the_list_cutoff_names_the_difference_that_stepped_past_it(
        tmp_path):
    """A cutoff at the list's own (allowed) is stepped past by --check's central
    difference: the message says so, not 'cutoff = 1.5, list_cutoff = 1.5' at the scene's
    value with advice to change it."""
    path = _lj_scene(tmp_path)
    done = simrun("grad", str(path), "--allow-outside", "--out", "g", "--wrt",
                  "energy.0.params.cutoff", "--check", "--set", "energy.0.params.cutoff=1.5",
                  "--set", "objective={builtin: potential, at: end}", "--set", "steps=20",
                  "--set", "integrator=velocity_verlet", cwd=tmp_path, timeout=900)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr  # the error: one line after the sweep's own
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")
    moved = re.search(r"error: --wrt energy\.0\.params\.cutoff: --check's finite difference "
                      r"moved energy\.0\.params\.cutoff to ([0-9.e+-]+),", done.stderr)
    assert moved and 1.5 < float(moved.group(1)) <= 1.5 * 1.1, done.stderr
    assert "run without --check" in done.stderr
