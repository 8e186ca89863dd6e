"""scenes/diffmpm3d.yaml and liquid.yaml (DiffTaichi's 3-D MPM robot, dry and in a fluid):
the start files against the script that draws them, gradients through the CLI's check on a
small robot (16^3 grid, f64), momentum kept by the grid transfers, and a resumed training
retracing the unbroken one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simrun.jobs.optimize import optimize_scene
from simrun.scene import load_scene
from simrun.stepper.run import run_scene

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "robots"))
import mpm3d_geometry  # noqa: E402

# the muscles pull along z: over a few steps the floor's grip moves the mean z, x barely
SMALL = ["step_kernels.params.n_grid=16", "precision=f64", "objective.params={axis: 2}"]


def small_robot(folder: Path, name: str, fluid: bool, lift: float = 0.0) -> Path:
    """The scene with a 192-particle robot (two muscles, a passive block on top, fluid or
    not) on the floor of a 16^3 grid: every shipped kernel, a fraction of the work. Its
    muscles are internal forces: only the floor's grip moves its centre."""
    rng = np.random.default_rng(1)
    blocks = [((0.35, 0.19, 0.4), 0), ((0.45, 0.19, 0.4), 1), ((0.4, 0.27, 0.4), -1)]
    x, actuator, kind = [], [], []
    for corner, muscle in blocks:
        cube = np.stack(np.meshgrid(*[np.arange(4)] * 3, indexing="ij"), -1).reshape(-1, 3)
        x.append(np.asarray(corner) + (cube + 0.5) * 0.02 + [0.0, lift, 0.0])
        actuator += [muscle] * 64
        kind += [1] * 64
    if fluid:
        x.append(rng.uniform([0.3, 0.36, 0.35], [0.6, 0.42, 0.6], (8, 3)) + [0.0, lift, 0.0])
        actuator += [-1] * 8
        kind += [0] * 8
    n = sum(len(a) for a in x)
    np.savez(folder / "robot.npz", x=np.concatenate(x), actuator=np.array(actuator, np.int32),
             particle_type=np.array(kind, np.int32),
             weights=rng.standard_normal((16, 4)) * 0.5, bias=rng.standard_normal(16) * 0.1)
    text = (REPO / "scenes" / f"{name}.yaml").read_text()
    text = text.replace(f"{name}_robot.npz", "robot.npz").replace(
        "kernels/diffmpm3d.py", str(REPO / "kernels" / "diffmpm3d.py"))
    if fluid:
        text = text.replace("{solid: 15150, fluid: 12996}", f"{{solid: {n - 8}, fluid: 8}}")
    else:
        text = text.replace("count: 30495", f"count: {n}")
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_the_start_files_are_what_the_seeded_draws_give():
    for name, liquid in (("diffmpm3d_robot", False), ("liquid_robot", True)):
        saved = np.load(REPO / "scenes" / f"{name}.npz")
        drawn = mpm3d_geometry.build(liquid)
        assert sorted(saved.files) == sorted(drawn)
        for key, value in drawn.items():
            np.testing.assert_array_equal(saved[key], value, err_msg=f"{name}: {key}")


@pytest.mark.parametrize("name, fluid", [("diffmpm3d", False), ("liquid", True)])
def test_grad_check_passes_for_the_optimised_keys(tmp_path, name, fluid):
    scene = small_robot(tmp_path, name, fluid)
    done = subprocess.run(
        [sys.executable, "-m", "simrun.cli", "grad", str(scene), "--check", "--allow-outside",
         "--steps", "12", "--wrt", "fields.weights", "--wrt", "fields.bias",
         "--out", str(tmp_path / "g"), *[a for s in SMALL for a in ("--set", s)]],
        capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout


def test_the_grid_transfers_keep_momentum_without_gravity_and_walls(tmp_path):
    """With gravity off the robot, lifted off the floor, feels internal forces only (the
    muscles' and the fluid's stresses): total momentum stays at its start (zero) to
    rounding, while particles move."""
    scene = load_scene(small_robot(tmp_path, "liquid", True, lift=0.2),
                       [*SMALL, "step_kernels.params.gravity=0", "steps=40",
                        "outputs.every=40", "outputs.velocities=true"], allow_outside=True)
    run_scene(scene, tmp_path / "r")
    with np.load(tmp_path / "r" / "frames.npz") as frames:
        v, x = frames["v"][-1], frames["x"]
    masses = np.where(np.arange(len(v)) >= len(v) - 8, 4.0, 1.0)
    speed = np.abs(v).max()
    assert speed > 1e-3 and np.abs(x[-1] - x[0]).max() > 1e-5
    momentum = (masses[:, None] * v).sum(axis=0)
    assert np.abs(momentum).max() < 1e-12 * masses.sum() * speed * 1e3


def test_a_resumed_training_retraces_the_unbroken_one(tmp_path):
    scene = load_scene(small_robot(tmp_path, "diffmpm3d", False),
                       ["step_kernels.params.n_grid=16", "steps=20"], allow_outside=True)
    whole = optimize_scene(scene, tmp_path / "whole", iterations=3)

    def interrupt(it, *_):
        if it == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimize_scene(scene, tmp_path / "cut", iterations=3, progress=interrupt)
    resumed = optimize_scene(scene, tmp_path / "cut", iterations=3, resume=True)
    assert resumed.losses == whole.losses
    np.testing.assert_array_equal(np.load(tmp_path / "cut" / "params.npz")["fields.weights"],
                                  np.load(tmp_path / "whole" / "params.npz")["fields.weights"])


@pytest.mark.parametrize("n_grid, words", [
    ("100000", "the 100000^3 grid (n_grid = 100000) needs at least"),  # was exit 1, no line
    ("16.5", "'n_grid' of kernel 'p2g' (diffmpm3d.py) is an integer (i32), but the scene "
             "gives 16.5, which the kernel would take as 16"),  # was run on a 16^3 grid
])
def test_a_grid_size_that_cannot_be_is_an_error_at_the_scene(tmp_path, n_grid, words):
    """A grid larger than the machine's memory is refused before it is allocated, and a
    fractional n_grid instead of being truncated: exit 2 at a line of the scene."""
    scene = small_robot(tmp_path, "diffmpm3d", False)
    done = subprocess.run(
        [sys.executable, "-m", "simrun.cli", "check", str(scene), "--allow-outside", "--set",
         f"step_kernels.params.n_grid={n_grid}"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert words in done.stderr
    assert re.match(r"error: (\S*diffmpm3d\.yaml:\d+:\d+|--set step_kernels\.params\."
                    r"n_grid=\S+ \(command line\)): ", done.stderr), done.stderr


def test_an_unstable_robot_is_an_error_not_a_crash(tmp_path):
    """Muscles 200x too strong crush the robot (J <= 0) within 60 steps and its positions
    become NaN. A NaN position's cell (a cast to INT_MIN) then indexes the grid far outside it:
    grad's forward sweep, which had no NaN watch between its steps, crashed (exit -11), as
    diffmpm3d's training did at its 51st iteration. Now each forward step's state is watched:
    grad and optimize stop with the unstable simulation named (exit 1), as run does."""
    scene = small_robot(tmp_path, "diffmpm3d", False)
    unstable = ["--set", "step_kernels.params.n_grid=16", "--set",
                "step_kernels.params.strength=1e3", "--allow-outside"]
    for command in (["grad", str(scene), "--wrt", "fields.weights", "--steps", "60"],
                    ["grad", str(scene), "--wrt", "fields.weights", "--steps", "60",
                     "--memory", "1K"],
                    ["optimize", str(scene), "--iterations", "1", "--set", "steps=60",
                     "--no-render"],
                    ["run", str(scene), "--steps", "60", "--no-render"]):
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        done = subprocess.run([sys.executable, "-m", "simrun.cli", *command, *unstable,
                               "--out", str(out)], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 1, (command, done.returncode, done.stderr[-2000:])
        said = "loss is not finite" if command[0] == "optimize" else "NaN or infinite"
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
