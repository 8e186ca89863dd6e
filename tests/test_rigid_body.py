"""Rigid bodies (the scene's `bodies:` block and kernels/rigid_body.py): gradients against
central differences through contact, momentum conservation, time-of-impact contact, the
block's errors at their line, resumed training, and the pictures' rectangles."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simrun.jobs.optimize import optimize_scene
from simrun.scene import SceneError, load_scene

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"
KEYS = ["fields.weights1", "fields.bias1", "fields.weights2", "fields.bias2"]


def simrun(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def free_scene(tmp_path: Path, springs: str, extra: str = "", params: str = "") -> Path:
    """Two boxes joined by `springs`, with the controller, kernels from the library."""
    text = f"""version: 2
name: boxes
precision: f64
bodies:
  boxes:
    - {{position: [0.3, 0.5], halfsize: [0.1, 0.03], angle: 0.2}}
    - {{position: [0.5, 0.45], halfsize: [0.03, 0.08], angle: -0.1}}
  springs:
{springs}
controller:
  kernels: [simrun.kernels.rigid_body:hidden_layer, simrun.kernels.rigid_body:actuation_layer]
step_kernels:
  kernels: [simrun.kernels.rigid_body:collide, simrun.kernels.rigid_body:springs,
            simrun.kernels.rigid_body:advance]
  params: {{{params or "ground: 0.1"}}}
dt: 0.001
steps: 600
outputs: {{every: 50, xyz: false}}
{extra}"""
    path = tmp_path / "boxes.yaml"
    path.write_text(text)
    return path


SPRING = "    - {a: 0, b: 1, offset_a: [0.08, 0.0], offset_b: [0.0, 0.06], stiffness: 30, " \
         "length: 0.15, actuation: 0.2}"
JOINT = "    - {a: 0, b: 1, offset_a: [-0.05, 0.0], offset_b: [0.0, -0.05], stiffness: 30, " \
        "joint: true}"


@pytest.mark.parametrize("name", ["rigid_body", "rigid_body_legs"])
def test_grad_check_passes_through_ground_contact_in_f64(tmp_path, name):
    """`simrun grad --check` on the optimised KEYs over 120 steps, which include the first
    ground contacts (shown from a run over the same steps: a corner reaches the ground)."""
    done = simrun("grad", str(SCENES / f"{name}.yaml"), "--set", "precision=f64",
                  "--steps", "120", *[a for k in KEYS for a in ("--wrt", k)], "--check",
                  "--out", str(tmp_path / "g"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout
    run = simrun("run", str(SCENES / f"{name}.yaml"), "--set", "precision=f64", "--set",
                 "steps=120", "--set", "outputs.every=1", "--no-render", "--out",
                 str(tmp_path / "r"))
    assert run.returncode == 0, run.stderr
    lowest = _lowest_corners(tmp_path / "r", load_scene(SCENES / f"{name}.yaml"))
    assert lowest.min() < 0.1 + 1e-3  # touching the ground at y = 0.1 within the horizon


def _lowest_corners(run_dir: Path, scene) -> np.ndarray:
    frames = np.load(run_dir / "frames.npz")
    half = np.array([b.halfsize for b in scene.bodies.boxes])
    angle = frames["angle"]
    c, s = np.abs(np.cos(angle)), np.abs(np.sin(angle))
    reach = s * half[:, 0] + c * half[:, 1]  # how far below its centre a box reaches
    return frames["x"][..., 1] - reach


def _momenta(run_dir: Path, scene) -> tuple[np.ndarray, float, float]:
    """Linear and angular momentum (about the origin) at the run's end, and the scale
    sum m |v| + I |w| that rounding errors are relative to."""
    state = np.load(run_dir / "state.npz")
    m = np.array(scene.particles.masses)
    half = np.array([b.halfsize for b in scene.bodies.boxes])
    inertia = m * (half ** 2).sum(axis=1) / 3
    x, v, w = state["x"], state["v"], state["field:angular_v"]
    linear = (m[:, None] * v).sum(axis=0)
    angular = float((m * (x[:, 0] * v[:, 1] - x[:, 1] * v[:, 0]) + inertia * w).sum())
    scale = float((m * np.linalg.norm(v, axis=1)).sum() + (inertia * np.abs(w)).sum())
    return linear, angular, scale


@pytest.mark.parametrize("springs, angular_too", [(SPRING, True), (SPRING + "\n" + JOINT,
                                                                     False)])
def test_springs_and_joints_conserve_momentum_in_free_space(tmp_path, springs, angular_too):
    """Without gravity, ground or damping the impulses are internal: equal and opposite at
    the two anchors, so the total momentum stays 0; a spring's impulse lies along the line
    between its anchors, so the angular momentum stays 0 too (a joint's velocity impulse
    does not, so that is checked without joints). f64: rounding, 1e-12 of the motion."""
    path = free_scene(tmp_path, springs, params="ground: -100.0, gravity: 0.0, damping: 0.0")
    done = simrun("run", str(path), "--no-render", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    linear, angular, scale = _momenta(tmp_path / "r", load_scene(path))
    assert scale > 1e-3  # the springs moved the boxes
    assert np.abs(linear).max() <= 1e-12 * scale
    if angular_too:
        assert abs(angular) <= 1e-12 * scale


def test_a_dropped_box_lands_on_the_ground_and_stays_there(tmp_path):
    """Time-of-impact contact: an upright box falling stops at the ground. Its lowest corner
    never sinks more than one step's fall below it (dt |v| at impact, ~3e-3 from 0.47 high),
    and at rest the centre sits half a height above it, to that penetration. (Each corner's
    impulse is computed as if it were alone, as in DiffTaichi; for a wide box the two bottom
    corners' impulses then stop less than its fall each step, and it sinks slowly.)"""
    path = free_scene(tmp_path, "    []", params="ground: 0.1")
    text = path.read_text().replace("  springs:\n    []\n", "").replace(
        "    - {position: [0.5, 0.45], halfsize: [0.03, 0.08], angle: -0.1}\n", "").replace(
        "angle: 0.2", "angle: 0.0").replace("steps: 600", "steps: 1500").replace(
        "halfsize: [0.1, 0.03]", "halfsize: [0.03, 0.1]")
    path.write_text(text)
    done = simrun("run", str(path), "--no-render", "--set", "outputs.every=1", "--out",
                  str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    lowest = _lowest_corners(tmp_path / "r", load_scene(path))
    dt_v = 1e-3 * np.sqrt(2 * 9.8 * 0.47)
    assert lowest.min() >= 0.1 - dt_v
    assert abs(lowest[-1, 0] - 0.1) <= dt_v
    assert lowest[0, 0] == pytest.approx(0.4)  # it started in the air


@pytest.mark.parametrize("springs, where, words", [
    ("    - {a: 0, b: 2, offset_a: [0, 0], offset_b: [0, 0], stiffness: 1, length: 0.1}",
     ":9:", "there are 2 boxes"),
    ("    - {a: 1, b: 1, offset_a: [0, 0], offset_b: [0, 0], stiffness: 1, length: 0.1}",
     ":9:", "joins box 1 to itself"),
    ("    - {a: 0, b: 1, offset_a: [0, 0], offset_b: [0, 0], stiffness: 1}", ":9:",
     "has no rest length"),
    ("    - {a: 0, b: 1, offset_a: [0, 0], offset_b: [0, 0], stiffness: 1, joint: true, "
     "length: 0.2}", ":9:", "is a joint, which has no rest length"),
    ("    - {a: 0, b: 1, offset_a: [0, 0], offset_b: [0, 0], stiffness: -1, length: 0.1}",
     ":9:", "must not be negative"),
    ("    - {a: 0, b: 1, offset_a: [0], offset_b: [0, 0], stiffness: 1, length: 0.1}",
     ":9:", "needs 2"),
    ("    - {a: 0, b: 1, offset_a: [0, 0], offset_b: [0, 0], stiffnes: 1, length: 0.1}",
     ":9:", "Did you mean 'stiffness'?"),
    ("    - {a: 0, b: 1, offset_a: [0, 0], offset_b: [0, 0], stiffness: 1, length: 0.1, "
     "actuation: 1.5}", ":9:", "(1 + actuation act), act in [-1, 1], must stay positive"),
])
def test_bad_springs_are_errors_at_their_line(tmp_path, springs, where, words):
    path = free_scene(tmp_path, springs)
    with pytest.raises(SceneError) as err:
        load_scene(path)
    assert f"boxes.yaml{where}" in str(err.value) and words in str(err.value)
    done = simrun("check", str(path))  # the CLI: one paragraph, exit 2, no traceback
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert words in done.stderr + done.stdout


@pytest.mark.parametrize("old, new, words", [
    ("halfsize: [0.1, 0.03]", "halfsize: [0.1, 0.0]", "positive half width and height"),
    ("position: [0.3, 0.5], ", "", "missing the required key 'position'"),
    ("bodies:\n", "particles: {count: 2}\nbodies:\n", "only 'mass' may be set here"),
    ("bodies:\n", "initial: {velocity: [1, 0], low: 2}\nbodies:\n", "sets velocities only"),
    ("params: {ground: 0.1}", "params: {ground: 0.1, friction: -1}", "friction >= 0"),
    ("params: {ground: 0.1}", "params: {ground: 0.1, elasticity: 2}", "elasticity"),
    # an integer flag: 0.5 was taken as 0, time of impact off without a word
    ("params: {ground: 0.1}", "params: {ground: 0.1, toi: 0.5}",
     "'toi' of kernel 'advance' (rigid_body.py) is an integer (i32), but the scene gives 0.5"),
    # a mass of 4e400 is inf: refused at the box, in one paragraph (no overflow warning)
    ("halfsize: [0.1, 0.03]", "halfsize: [1e200, 1e200]", "box 0's mass inf"),
])
def test_bad_boxes_and_contact_parameters_are_errors_at_their_line(tmp_path, old, new, words):
    path = free_scene(tmp_path, SPRING)
    path.write_text(path.read_text().replace(old, new, 1))
    done = simrun("check", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "Warning" not in done.stderr, done.stderr
    message = done.stderr + done.stdout
    assert words in message and "boxes.yaml:" in message


def test_resumed_training_retraces_the_unbroken_one_and_run_folders_reload(tmp_path):
    scene = load_scene(SCENES / "rigid_body.yaml", ["steps=150"])
    whole = optimize_scene(scene, tmp_path / "whole", iterations=3)

    def interrupt(it, *_):
        if it == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimize_scene(scene, tmp_path / "cut", iterations=3, progress=interrupt)
    resumed = optimize_scene(scene, tmp_path / "cut", iterations=3, resume=True)
    assert resumed.losses == whole.losses
    best = load_scene(tmp_path / "whole" / "best.yaml", allow_outside=True)
    assert best.bodies == scene.bodies and best.particles == scene.particles


def test_pictures_draw_each_box_as_its_rotated_rectangle(tmp_path):
    """A run draws first.png, last.png and the animation from the boxes' per-frame angles
    (frames.npz `angle`); the outlines drawn are the boxes' corners at those angles."""
    from simrun.render.bodies import box_corners

    done = simrun("run", str(SCENES / "rigid_body.yaml"), "--set", "steps=300", "--out",
                  str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    for name in ("first.png", "last.png", "animation.gif"):
        assert (tmp_path / "r" / name).stat().st_size > 1000
    frames = np.load(tmp_path / "r" / "frames.npz")
    half = np.array([b.halfsize for b in load_scene(SCENES / "rigid_body.yaml").bodies.boxes])
    corners = box_corners(frames["x"][-1].astype(float), frames["angle"][-1].astype(float),
                          half)
    assert corners.shape == (3, 4, 2)
    # a box's corners are its half sizes from the centre, at its angle
    np.testing.assert_allclose(np.linalg.norm(corners - frames["x"][-1][:, None], axis=2),
                               np.linalg.norm(half, axis=1)[:, None].repeat(4, 1),
                               rtol=1e-6)


def test_a_box_too_small_for_the_precision_is_an_error_at_its_line(tmp_path):
    """A mass of 4e-40 is no normal f32: its inverse would overflow to inf in the kernels."""
    path = free_scene(tmp_path, SPRING)
    path.write_text(path.read_text().replace("precision: f64", "precision: f32").replace(
        "halfsize: [0.1, 0.03]", "halfsize: [1e-20, 1e-20]"))
    with pytest.raises(SceneError, match=r"boxes\.yaml:6:7: box 0's mass"):
        load_scene(path)


def test_resumed_writer_keeps_the_angles_of_the_frames_on_disk(tmp_path):
    """frames.npz's per-frame `angle` survives a resume: the frames kept from disk and the
    new ones, in step order, as an unbroken run writes them."""
    from simrun.outputs.writer import Frame, RunWriter, WriterOptions

    options = WriterOptions(xyz=False, energies=False, frame_fields=(("angle", "angle"),))

    def frame(step: int) -> Frame:
        return Frame(step=step, time=step * 0.1, x=np.full((2, 2), step, float),
                     v=np.zeros((2, 2)), kinetic=0.0, potential=0.0,
                     state={"field:angle": np.array([step, -step], float)})

    first = RunWriter(tmp_path, options)
    for step in (0, 10, 20, 30):
        first.add(frame(step))
    first.flush()
    resumed = RunWriter(tmp_path, options)
    resumed.load_existing(upto_step=20, every=10)
    resumed.add(frame(30))
    resumed.add(frame(40))
    resumed.flush()
    saved = np.load(tmp_path / "frames.npz")
    np.testing.assert_array_equal(saved["step"], [0, 10, 20, 30, 40])
    np.testing.assert_array_equal(saved["angle"][:, 0], [0, 10, 20, 30, 40])
    np.testing.assert_array_equal(saved["angle"][:, 1], [0, -10, -20, -30, -40])


def test_load_run_reads_a_rigid_body_run(tmp_path):
    """simrun.load_run on a run whose scene.yaml has bodies, not particles: the centres'
    frames and the boxes' masses (their areas)."""
    import simrun

    done = simrun_cli_run(tmp_path)
    run = simrun.load_run(tmp_path / "r")
    assert run.x.shape == (3, 3, 2)  # frames 0, 100, 150 of three boxes
    np.testing.assert_allclose(run.masses, [4 * 0.1 * 0.03, 4 * 0.03 * 0.1, 4 * 0.03 * 0.1],
                               rtol=1e-6)
    assert done.returncode == 0


def simrun_cli_run(tmp_path: Path) -> subprocess.CompletedProcess:
    return simrun("run", str(SCENES / "rigid_body.yaml"), "--set", "steps=150", "--set",
                  "outputs.every=100", "--no-render", "--out", str(tmp_path / "r"))


def test_a_trained_mass_is_what_best_yaml_and_load_run_replay(tmp_path):
    """particles.mass is a KEY of a bodies scene (the kernels divide by m): best.yaml keeps
    the trained value beside the bodies, so it replays the best loss bit for bit."""
    import simrun as api
    from simrun.jobs.grad import objective_value

    scene = load_scene(SCENES / "rigid_body.yaml", ["optimize.parameters=[particles.mass]",
                                                     "steps=100"])
    result = optimize_scene(scene, tmp_path / "o", iterations=1)
    best = load_scene(tmp_path / "o" / "best.yaml", allow_outside=True)
    trained = float(np.asarray(result.best["particles.mass"]).ravel()[0])
    assert trained != scene.particles.masses[0]
    assert best.particles.masses == (trained,) * 3
    assert objective_value(best, best.steps) == result.best_loss
    done = simrun("run", str(tmp_path / "o" / "best.yaml"), "--no-render", "--out",
                  str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(api.load_run(tmp_path / "r").masses, [trained] * 3)


def test_trained_start_velocity_and_positions_are_what_best_yaml_replays(tmp_path):
    """initial.velocity and state.x0 in a bodies scene: best.yaml keeps them (velocities as
    'initial: {velocity}' beside the bodies, positions in a file), so it replays the best
    loss bit for bit, and a run from it starts at the trained state."""
    from simrun.jobs.grad import objective_value
    from simrun.scene import initial_state

    for key in ("initial.velocity", "state.x0"):
        scene = load_scene(SCENES / "rigid_body.yaml", [f"optimize.parameters=[{key}]",
                                                         "steps=100", "optimize.lr=0.01"])
        out = tmp_path / key
        result = optimize_scene(scene, out, iterations=1)
        best = load_scene(out / "best.yaml", allow_outside=True)
        x0, v0 = initial_state(best)
        trained = np.asarray(result.best[key])
        if key == "initial.velocity":
            np.testing.assert_array_equal(v0, np.tile(trained, (3, 1)))
        else:
            np.testing.assert_array_equal(x0, trained.reshape(3, 2))
        assert np.abs(trained - np.asarray(initial_state(scene)[key == "initial.velocity"]
                                           if key == "initial.velocity" else
                                           initial_state(scene)[0])).max() > 0
        assert objective_value(best, best.steps) == result.best_loss


@pytest.mark.parametrize("name", ["rigid_body", "rigid_body_legs"])
def test_the_start_weights_are_what_the_seeded_draw_gives(name):
    """The scenes' weights files are the original's draw (random and NumPy seeded 0) for the
    scene's own boxes and springs, as bench/robots/rigid_body_geometry.py writes them."""
    sys.path.insert(0, str(REPO / "bench" / "robots"))
    import rigid_body_geometry

    bodies = load_scene(SCENES / f"{name}.yaml").bodies
    drawn = rigid_body_geometry.weights(len(bodies.boxes), len(bodies.springs))
    with np.load(SCENES / f"{name}_weights.npz") as saved:
        assert sorted(saved.files) == sorted(drawn)
        for key, value in drawn.items():
            np.testing.assert_array_equal(saved[key], value, err_msg=f"{name}: {key}")


def test_a_module_refusing_the_scene_names_the_scenes_line(tmp_path):
    """rigid_body's kernels in a scene without 'bodies:': its allocate() refuses, and the
    error starts at the scene's line naming the module (not at the module's path alone),
    exit 2, one paragraph."""
    path = free_scene(tmp_path, SPRING)
    text = path.read_text()
    start, end = text.index("bodies:\n"), text.index("controller:")
    path.write_text(text[:start] + "particles: {count: 2, dim: 2}\n" + text[end:])
    done = simrun("check", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    found = re.match(rf"error: {re.escape(str(path))}:(\d+):\d+: ", done.stderr)
    assert found, done.stderr  # at a line that names one of the module's kernels
    assert "simrun.kernels.rigid_body:" in path.read_text().splitlines()[int(found[1]) - 1]
    assert "rigid_body.py's allocate() rejected this scene" in done.stderr
    assert "need the scene's 'bodies:' block" in done.stderr
