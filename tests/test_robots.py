"""DiffTaichi's robots as scenes that train: gradients through a controller and step kernels
against central differences, `fields.<name>` parameters, the scene's `fields:` files that
best.yaml loads, normalised gradient steps, and each shipped robot lowering its loss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.adjoint.policy import execution
from simrun.jobs.grad import forward_gradient, objective_value, scene_gradient
from simrun.jobs.optimize import optimize_scene
from simrun.optimize.optimizers import normalized
from simrun.scene import SceneError
from simrun.scene import load_scene as _load_scene

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"


def load_scene(path, overrides=()):
    return _load_scene(path, overrides, allow_outside=True)


@pytest.mark.parametrize("name, key, steps, h", [
    ("mass_spring", "fields.weights1", 40, 1e-6), ("mass_spring", "fields.weights2", 40, 1e-6),
    ("billiards", "fields.cue_v", 1023, 1e-6), ("diffmpm", "fields.weights", 60, 1e-4)])
def test_gradients_through_the_controller_match_central_differences(name, key, steps, h):
    """f64, along a random direction. Contacts make the objectives piecewise smooth (a
    collision found one step earlier is a jump), so the test first shows that no jump lies
    inside the difference: steps h and 2h give nearly the same slope; Richardson's
    extrapolation of the two then cancels FD's h^2 error. diffmpm's slope is ~2e-6 over 60
    steps, so its h is larger (rounding error eps J / h ~ 3e-13)."""
    scene = load_scene(SCENES / f"{name}.yaml", ["precision=f64"])
    result = scene_gradient(scene, [key], steps=steps)
    grad = np.asarray(result.gradients[key])
    direction = np.random.default_rng(0).standard_normal(grad.shape)

    def slope(h: float) -> float:
        plus = objective_value(scene, steps, shifts={key: h * direction})
        minus = objective_value(scene, steps, shifts={key: -h * direction})
        return (plus - minus) / (2 * h)

    fd, fd2 = slope(h), slope(2 * h)
    assert abs(fd) > 1e-7  # the key matters over this horizon
    assert fd2 == pytest.approx(fd, rel=1e-4)  # smooth inside +-2h (a jump: factors apart)
    richardson = (4 * fd - fd2) / 3  # cancels the h^2 truncation error
    assert float(np.sum(grad * direction)) == pytest.approx(richardson, rel=1e-6)


@pytest.mark.parametrize("name, iterations, overrides", [
    ("mass_spring", 2, []), ("billiards", 2, []), ("diffmpm", 2, ["steps=300"])])
def test_shipped_robots_lower_their_loss_and_best_yaml_replays_it(tmp_path, name, iterations,
                                                                  overrides):
    scene = load_scene(SCENES / f"{name}.yaml", overrides)
    result = optimize_scene(scene, tmp_path / "o", iterations=iterations)
    assert result.best_loss < result.losses[0]
    best = load_scene(tmp_path / "o" / "best.yaml")  # trusted: its modules were copied
    assert set(best.fields) >= {k.split(".", 1)[1] for k in scene.optimize.parameters}
    saved = np.load(tmp_path / "o" / "best_fields.npz")
    for key, value in result.best.items():
        np.testing.assert_array_equal(saved[key.split(".", 1)[1]], value)
    # the trained fields load into the same trajectory: the same objective, bit for bit
    assert objective_value(best, best.steps) == result.best_loss


def test_normalized_steps_have_the_learning_rate_as_length(tmp_path):
    g = np.array([3e-3, -4e-3])
    np.testing.assert_allclose(normalized(g), [0.6, -0.8], rtol=1e-15)
    assert not normalized(np.zeros(2)).any()
    scene = load_scene(SCENES / "billiards.yaml", ["optimize.lr=0.002", "optimize.normalize=true"])
    optimize_scene(scene, tmp_path / "o", iterations=2)
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(rows[1:, 3], 0.002, rtol=1e-12)


def _with_fields(tmp_path: Path, fields: str, arrays: dict | None = None) -> Path:
    np.savez(tmp_path / "cue.npz", **(arrays or {"cue_v": np.array([0.25, 0.05])}))
    text = (SCENES / "billiards.yaml").read_text().replace(
        "initial: {type: file, path: billiards_rack.xyz}",
        f"initial: {{type: file, path: {SCENES}/billiards_rack.xyz}}\nfields: {fields}")
    text = text.replace("kernels/billiards.py", f"{REPO}/kernels/billiards.py")
    path = tmp_path / "b.yaml"
    path.write_text(text)
    return path


def test_the_fields_section_sets_allocated_start_values(tmp_path):
    """A slower, upward shot: the cue meets the rack elsewhere, so ball 10 ends elsewhere."""
    scene = load_scene(_with_fields(tmp_path, "{cue_v: cue.npz}"))
    shot = objective_value(scene, scene.steps)
    assert shot != objective_value(load_scene(SCENES / "billiards.yaml"), scene.steps)
    from simrun.jobs.grad import field_start_values
    np.testing.assert_allclose(field_start_values(scene, ["cue_v"])["cue_v"], [0.25, 0.05],
                               rtol=1e-7)


@pytest.mark.parametrize("fields, arrays, message", [
    ("{cue_v: nothere.npz}", None, "is not an .npz file"),
    ("{cue_w: cue.npz}", None, "has no array named 'cue_w'"),
    ("{cue_w: cue.npz}", {"cue_w": np.zeros(2)}, "no kernel module of this scene allocates a "
     "field 'cue_w'"),
    ("{cue_v: cue.npz}", {"cue_v": np.zeros(3)}, r"has shape \(3,\) but the module allocates"),
])
def test_bad_fields_sections_name_their_line(tmp_path, fields, arrays, message):
    path = _with_fields(tmp_path, fields, arrays)
    with pytest.raises(SceneError, match=message) as caught:
        scene = load_scene(path)
        objective_value(scene, 1)
    assert f"{path.name}:13:" in str(caught.value)


def test_resume_of_a_controller_training_gives_the_unbroken_numbers(tmp_path):
    """fields.<name> parameters are journaled like any other: an interrupted and resumed
    training retraces the same iterates bit for bit."""
    scene = load_scene(SCENES / "mass_spring.yaml", ["steps=120"])
    whole = optimize_scene(scene, tmp_path / "whole", iterations=4)

    def interrupt(it, *_):
        if it == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimize_scene(scene, tmp_path / "cut", iterations=4, progress=interrupt)
    resumed = optimize_scene(scene, tmp_path / "cut", iterations=4, resume=True)
    assert resumed.replayed >= 3 and resumed.losses == whole.losses
    for name in ("fields.weights1", "fields.bias2"):
        np.testing.assert_array_equal(np.load(tmp_path / "cut" / "params.npz")[name],
                                      np.load(tmp_path / "whole" / "params.npz")[name])


@pytest.mark.parametrize("name, keys, steps", [
    ("mass_spring", ["fields.weights1", "fields.bias2"], 40),
    ("billiards", ["fields.cue_x", "fields.cue_v"], 1023),
    ("diffmpm", ["fields.weights"], 80)])
def test_forward_mode_through_the_controller_equals_reverse(name, keys, steps):
    """Tangents through the controller (FwdMode on its kernels, what they write, x and v
    included, carries the tangent on) against the reverse sweep along the same direction:
    the same derivative summed in another order, f64, so rounding (1e-12 of |gradient|)."""
    scene = load_scene(SCENES / f"{name}.yaml", ["precision=f64", f"steps={steps}"])
    forward = forward_gradient(scene, keys, threads=1)
    reverse = scene_gradient(scene, keys, threads=1)
    assert forward.objective == pytest.approx(reverse.objective, rel=1e-14)
    for key in keys:
        grad = np.asarray(reverse.gradients[key])
        along = float(np.sum(grad * forward.directions[key]))
        assert abs(along) > 1e-3 * np.linalg.norm(grad)  # the direction sees the gradient
        assert abs(forward.gradients[key] - along) <= 1e-12 * np.linalg.norm(grad), key


def test_the_dt_gradient_includes_the_controllers_use_of_dt(monkeypatch):
    """mass_spring's controller reads dt (its sin waves run on step * dt): the dt KEY's
    derivative must carry that too (it once held the step kernels' share alone: -1.416
    against central differences' -0.587). Reverse (chained and one by one) and forward mode
    against Richardson-extrapolated central differences, f64."""
    from simrun.keys import parse_key, with_value

    scene = load_scene(SCENES / "mass_spring.yaml", ["precision=f64", "steps=40"])
    key, dt = parse_key(scene, "dt"), scene.dt

    def slope(h: float) -> float:
        return (objective_value(with_value(scene, key, dt + h), 40)
                - objective_value(with_value(scene, key, dt - h), 40)) / (2 * h)

    fd, fd2 = slope(4e-9), slope(8e-9)
    assert fd2 == pytest.approx(fd, rel=1e-5)
    richardson = (4 * fd - fd2) / 3
    native = scene_gradient(scene, ["dt"], threads=1).gradients["dt"]
    forward = forward_gradient(scene, ["dt"], threads=1).gradients["dt"]
    with execution(native=False):
        one_by_one = scene_gradient(scene, ["dt"], threads=1).gradients["dt"]
    for value in (native, one_by_one, forward):
        assert value == pytest.approx(richardson, rel=1e-6)
