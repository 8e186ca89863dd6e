"""scenes/electric.yaml (DiffTaichi's electric.py as a scene): its loss against an
independent NumPy re-statement of the physics, its gradients through the CLI's check, its
start file against the script that draws it, and a resumed training retracing the unbroken
one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simrun.jobs.grad import objective_value
from simrun.jobs.optimize import optimize_scene
from simrun.scene import load_scene

REPO = Path(__file__).resolve().parents[1]
SCENE = REPO / "scenes" / "electric.yaml"
sys.path.insert(0, str(REPO / "bench" / "robots"))
import electric_start  # noqa: E402

ELECTRODES = np.array([[0.1, 0.1], [0.1, 0.9], [0.9, 0.9], [0.9, 0.1], [0.5, 0.9], [0.5, 0.1],
                       [0.1, 0.5], [0.9, 0.5]])


def numpy_loss(start: dict, steps: int, dt: float = 0.03) -> float:
    """The original's forward pass in float64: network on the step's start state and the
    goal one step ahead, inverse-square pulls capped at |r| = 0.1, damping 0.2."""
    x, v, loss = start["x"][0].copy(), np.zeros(2), 0.0
    for t in range(1, steps + 1):
        g, gv = start["goal"][t] - 0.5, start["goal_v"][t] - 0.5
        hidden = np.tanh(np.concatenate([x - 0.5, v, g, gv]) @ start["weight1"]
                         + start["bias1"])
        charge = np.tanh(hidden @ start["weight2"] + start["bias2"])
        r = x - ELECTRODES
        reach = np.maximum(np.linalg.norm(r, axis=1), 0.1)
        force = (1e-3 * charge / reach**3) @ r
        v = v * np.exp(-dt * 0.2) + dt * force
        x = x + dt * v
        loss += dt * np.sum((x - start["goal"][t]) ** 2)
    return loss


def test_the_start_file_is_what_the_seeded_draw_gives():
    saved = np.load(REPO / "scenes" / "electric_start.npz")
    drawn = electric_start.draw(0)
    assert sorted(saved.files) == sorted(drawn)
    for name, value in drawn.items():
        np.testing.assert_array_equal(saved[name], value)


@pytest.mark.parametrize("steps", [37, 511])
def test_the_loss_is_the_sum_of_the_original_physics_over_the_steps(steps):
    """f64: the scene's objective (the cost its steps sum) equals the NumPy sum to
    rounding, at any horizon."""
    scene = load_scene(SCENE, ["precision=f64", f"steps={steps}"])
    start = {k: v for k, v in np.load(REPO / "scenes" / "electric_start.npz").items()}
    expected = numpy_loss(start, steps)
    assert expected > 1e-4
    assert objective_value(scene, steps) == pytest.approx(expected, rel=1e-11)


def test_grad_check_passes_for_every_optimised_key(tmp_path):
    keys = ["fields.weight1", "fields.bias1", "fields.weight2", "fields.bias2"]
    done = subprocess.run(
        [sys.executable, "-m", "simrun.cli", "grad", str(SCENE), "--check", "--set",
         "precision=f64", "--set", "steps=30",
         "--out", str(tmp_path / "g"), *[a for k in keys for a in ("--wrt", k)]],
        capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout
    assert all(k in done.stdout for k in keys)


def test_a_resumed_training_retraces_the_unbroken_one(tmp_path):
    scene = load_scene(SCENE, ["steps=60"])
    whole = optimize_scene(scene, tmp_path / "whole", iterations=4)
    assert whole.best_loss < whole.losses[0]

    def interrupt(it, *_):
        if it == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimize_scene(scene, tmp_path / "cut", iterations=4, progress=interrupt)
    resumed = optimize_scene(scene, tmp_path / "cut", iterations=4, resume=True)
    assert resumed.losses == whole.losses
    np.testing.assert_array_equal(np.load(tmp_path / "cut" / "params.npz")["fields.weight2"],
                                  np.load(tmp_path / "whole" / "params.npz")["fields.weight2"])
