"""`simrun grad` through step kernels (scenes/mpm.yaml): gradients against central differences
of the scene run twice, forward == reverse, bit-reproducible gradients with threads, and bad
KEYs through the CLI.

The horizon is 10 steps of dt = 1e-4 in f64: the strip moves 1e-3, an eighth of a grid cell
spacing, so no difference crosses a cell boundary or reaches the obstacle. The start is the
lattice moved by a small random field (`state.x0`), so the elastic energy is not at rest and
its parameters matter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import simrun.lang as ti
from simrun.jobs.grad import forward_gradient, objective_value, scene_gradient
from simrun.keys import parse_key, value_of, with_value
from simrun.scene import SceneError, initial_state, load_scene

REPO = Path(__file__).resolve().parents[1]
MPM = REPO / "scenes" / "mpm.yaml"
STEPS = 10
KEYS = ["step_kernels.params.gravity", "energy.0.params.youngs", "dt", "particles.mass",
        "fields.C", "fields.Dm_inv", "state.v0"]


def _scene():
    return load_scene(MPM, ["precision=f64", "objective={builtin: kinetic, at: end}",
                            f"steps={STEPS}"])


def _deformed_start(scene):
    x0, v0 = initial_state(scene)
    shift = 5e-4 * np.random.default_rng(1).normal(size=x0.shape)
    return x0 + shift, v0, shift


@pytest.fixture(scope="module")
def reverse():
    scene = _scene()
    x0, v0, shift = _deformed_start(scene)
    result = scene_gradient(scene, KEYS, checkpoints=3, threads=1, start=(x0, v0))
    return scene, result, shift


def _central(scene, key, base, direction, h, shift):
    """(J(p + h d) - J(p - h d)) / 2h with the same deformed start."""
    values = []
    for sign in (1.0, -1.0):
        shifts = {"state.x0": shift}
        moved = scene
        if key.kind in ("field", "v0"):
            shifts[key.text] = sign * h * direction
        else:
            moved = with_value(scene, key, base + sign * h)
        values.append(objective_value(moved, STEPS, 1, shifts))
    return (values[0] - values[1]) / (2 * h)


def test_mpm_gradients_match_central_differences(reverse):
    scene, result, shift = reverse
    rng = np.random.default_rng(2)
    for text in KEYS:
        key = parse_key(scene, text)
        grad = np.asarray(result.gradients[text])
        if key.kind in ("field", "v0"):
            base = result.field_values.get(text, np.zeros(grad.shape))
            direction = rng.normal(size=grad.shape)
            direction /= np.linalg.norm(direction)
            # C is a velocity gradient, of order |v| / dx = 64 here: a unit step is small
            h = 1.0 if key.kind == "field" else 1e-4
        else:
            base, direction = value_of(scene, key), 1.0
            h = 1e-5 * max(abs(base), 1.0)
        ad = float(np.sum(grad * direction))
        fd, fd2 = (_central(scene, key, base, direction, s, shift) for s in (h, 2 * h))
        # central differences err by O(h^2) (their change from h to 2h is three times that)
        # and by J's rounding over h: J sums a few thousand rounded terms
        rounding = 1e3 * np.finfo(float).eps * abs(result.objective) / h
        assert abs(ad - fd) <= abs(fd - fd2) + rounding, (text, ad, fd, fd2, rounding)
        assert rounding < 1e-3 * abs(ad)  # the check can fail
        assert ad != 0.0, text  # every KEY moves this objective


def test_mpm_forward_mode_equals_reverse(reverse):
    scene, result, shift = reverse
    start = (initial_state(scene)[0] + shift, initial_state(scene)[1])
    keys = ["step_kernels.params.gravity", "fields.C", "dt", "energy.0.params.youngs"]
    forward = forward_gradient(scene, keys, threads=1, start=start)
    backward = scene_gradient(scene, keys, checkpoints=0, threads=1, start=start)
    assert forward.objective == pytest.approx(backward.objective, rel=1e-14)
    for text, value in forward.gradients.items():
        rev = np.asarray(backward.gradients[text])
        if text in forward.directions:
            rev = float(np.sum(rev * forward.directions[text]))
            scale = np.linalg.norm(backward.gradients[text])
        else:
            scale = abs(float(rev))
        # sums of a few thousand terms each: rounding, relative to the gradient's size
        assert abs(value - rev) <= 1e-11 * scale, (text, value, rev)


def test_checkpointed_mpm_gradient_equals_store_everything_bit_for_bit():
    scene = _scene()
    keys = ["step_kernels.params.gravity", "fields.C"]
    stored = scene_gradient(scene, keys, checkpoints=STEPS - 1, threads=1)
    few = scene_gradient(scene, keys, checkpoints=1, threads=1)
    assert few.advances > stored.advances
    for text in keys:
        assert np.array_equal(stored.gradients[text], few.gradients[text])


def test_gradients_with_two_threads_repeat_bit_for_bit():
    """The deterministic mode: float scatters (p2g, the gradient kernels) add in one order,
    so runs at 2 threads, and a run on 1 thread, give the same bits. With 6400 particles
    p2g is split over the threads (800 run inline), and without the mode two runs out of
    four differed here."""
    scene = load_scene(MPM, ["precision=f64", "objective={builtin: kinetic, at: end}",
                             "steps=2", "particles.count=6400", "initial.shape=[160, 40]",
                             "initial.spacing=0.004", "particles.mass=1.6e-5"])
    keys = ["state.x0", "step_kernels.params.gravity"]
    runs = [scene_gradient(scene, keys, checkpoints=1, threads=t) for t in (2, 2, 2, 1)]
    assert runs[0].threads == 2 and runs[-1].threads == 1
    for text in keys:
        first = np.asarray(runs[0].gradients[text]).tobytes()
        assert all(np.asarray(r.gradients[text]).tobytes() == first for r in runs[1:])


_SCATTER = """
import simrun.lang as ti


@ti.kernel
def scatter(x: ti.template(), g: ti.template()):
    for i in x:
        g[(i * 7) % 64] += x[i] * 1.1
"""


def test_deterministic_scatter_mode_repeats_the_one_thread_sum(tmp_path):
    """A scatter large enough to be split over threads: in the deterministic mode its sums
    are the same bits on every launch and equal the one-thread launch's."""
    import importlib.util

    path = tmp_path / "scatter_kernel.py"
    path.write_text(_SCATTER)
    spec = importlib.util.spec_from_file_location("scatter_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    values = np.random.default_rng(0).normal(size=200_000)
    results = {}
    for threads, deterministic in ((1, False), (2, True)):
        ti.init(ti.cpu, default_fp=ti.f64, cpu_max_num_threads=threads,
                deterministic=deterministic)
        x, g = ti.field(ti.f64, shape=values.size), ti.field(ti.f64, shape=64)
        x.from_numpy(values)
        seen = set()
        for _ in range(10):
            g.fill(0)
            module.scatter(x, g)
            seen.add(g.to_numpy().tobytes())
        results[threads] = seen
    assert len(results[2]) == 1 and results[2] == results[1]


# ------------------------------------------------------------------ the command
def simrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg", "COLUMNS": "120"}
    return subprocess.run([sys.executable, "-m", "simrun.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


OBJECTIVE = "objective={builtin: kinetic, at: end}"


def test_cli_grad_mpm_records_threads_and_field_gradients(tmp_path):
    done = simrun("grad", str(MPM), "--set", OBJECTIVE, "--set", "precision=f64",
                  "--steps", "3", "--threads", "2", "--wrt", "step_kernels.params.gravity",
                  "--wrt", "fields.C", "--checkpoints", "1", "--out", str(tmp_path / "g"),
                  cwd=REPO)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert record["threads"] == 2 and record["deterministic_scatters"] is True
    with np.load(tmp_path / "g" / "gradients.npz") as arrays:
        assert arrays["fields.C"].shape == (800, 2, 2)


@pytest.mark.parametrize("key, hint", [
    ("step_kernels.params.gravty", "Did you mean step_kernels.params.gravity"),
    ("fields.CC", "Did you mean fields.C"),
    ("integrator.damping", "not a differentiable key"),
])
def test_cli_bad_step_kernel_keys_exit_2(tmp_path, key, hint):
    for command in ("grad", "check"):
        done = simrun(command, str(MPM), "--set", OBJECTIVE, "--steps", "2", "--wrt", key,
                      cwd=tmp_path) if command == "grad" else \
            simrun(command, str(MPM), "--set", OBJECTIVE, "--wrt", key, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert hint in done.stderr.replace("\n", " ") and "Traceback" not in done.stderr


def test_check_accepts_step_kernel_keys():
    done = simrun("check", str(MPM), "--set", OBJECTIVE, "--wrt", "fields.C", "--wrt",
                  "step_kernels.params.obstacle_r", cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_a_field_key_needs_step_kernels():
    scene = load_scene(REPO / "scenes" / "projectile.yaml")
    with pytest.raises(SceneError, match="step_kernels or a controller only"):
        parse_key(scene, "fields.C")


# ------------------------------------------------------------------ objective step index
_PICK = """
import simrun.lang as ti


@ti.kernel
def kinetic_at(v: ti.template(), m: ti.template(), L: ti.template(), step: ti.i32,
               pick: ti.i32):
    for p in v:
        if step == pick:
            L[None] += 0.5 * m[p] * v[p].dot(v[p])
"""

_FALL = """version: 2
name: fall
precision: f64
particles: {count: 3, dim: 2, mass: 2.0}
initial: {type: random, low: [0, 0], high: [1, 1], velocity: [0.5, -1.5]}
energy:
  - kernel: KERNELS/gravity.py:gravity
    params: {softening: 0.1, strength: 0.5}
integrator: velocity_verlet
dt: 0.01
steps: 12
"""


def test_objective_kernel_gets_the_step_index(tmp_path):
    """`step` picks one state: with at: mean, J = KE(step 5) / 12, the same as the built-in
    kinetic objective at the end of a 5-step run (and so are the gradients)."""
    (tmp_path / "pick.py").write_text(_PICK)
    path = tmp_path / "fall.yaml"
    path.write_text(_FALL.replace("KERNELS", str(REPO / "kernels")))
    picked = load_scene(path, [f"objective={{kernel: {tmp_path}/pick.py:kinetic_at, "
                               "params: {pick: 5}, at: mean}"], allow_outside=True)
    ended = load_scene(path, ["objective={builtin: kinetic, at: end}", "steps=5"],
                       allow_outside=True)
    keys = ["initial.velocity", "energy.0.params.strength"]
    a = scene_gradient(picked, keys, checkpoints=2)
    b = scene_gradient(ended, keys, checkpoints=2)
    assert a.objective * 12 == pytest.approx(b.objective, rel=1e-13)
    for key in keys:
        np.testing.assert_allclose(np.asarray(a.gradients[key]) * 12, b.gradients[key],
                                   rtol=1e-12)
    forward = forward_gradient(picked, keys)
    np.testing.assert_allclose(forward.gradients["initial.velocity"],
                               a.gradients["initial.velocity"], rtol=1e-12)


# ------------------------------------------------------------------ schema version
def test_version_1_scenes_and_run_folders_still_load(tmp_path):
    """Schema version 2 adds the objective's `step` and the step-kernel KEYs; a version-1
    file means the same, so an old run folder (scene.yaml with version: 1) still renders."""
    path = tmp_path / "fall.yaml"
    path.write_text(_FALL.replace("version: 2", "version: 1").replace(
        "KERNELS", str(REPO / "kernels")))
    assert load_scene(path, allow_outside=True).version == 1
    done = simrun("run", str(path), "--allow-outside", "--no-render", "--out",
                  str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "version: 1" in (tmp_path / "r" / "scene.yaml").read_text()
    assert not list((tmp_path / "r").glob("*.png"))  # so the pictures below are render's
    done = simrun("render", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "r").glob("*.png"))


def test_fields_can_start_from_given_values():
    """`fields=` starts an allocated field from other values (trained ones, for optimize):
    the same J as moving it there by a shift, and gradients taken at that start."""
    scene = load_scene(MPM, ["precision=f64", "objective={builtin: kinetic, at: end}",
                             "steps=3"])
    c1 = 0.5 * np.random.default_rng(4).normal(size=(800, 2, 2))
    result = scene_gradient(scene, ["fields.C"], threads=1, fields={"C": c1})
    assert np.array_equal(result.field_values["fields.C"], c1)
    assert result.objective == objective_value(scene, 3, 1, {"fields.C": c1})
    assert result.objective == objective_value(scene, 3, 1, fields={"C": c1})
    assert result.objective != objective_value(scene, 3, 1)
    with pytest.raises(SceneError, match="Did you mean fields.C"):
        scene_gradient(scene, ["fields.C"], threads=1, fields={"CC": c1})


_AFFINE = """
import simrun.lang as ti


@ti.kernel
def affine(C: ti.template(), v: ti.template(), L: ti.template()):
    for p in C:
        L[None] += 1e-4 * (C[p][0, 1] + C[p][1, 0]) ** 2 + 0.5 * v[p][1] ** 2
"""


def test_objective_reading_a_step_kernel_field(tmp_path):
    """An objective of MPM's affine matrices C (which g2p writes), averaged over the steps:
    reverse, forward and central differences agree."""
    (tmp_path / "affine.py").write_text(_AFFINE)
    scene = load_scene(MPM, ["precision=f64", f"steps={STEPS}",
                             f"objective={{kernel: {tmp_path}/affine.py:affine, at: mean}}"],
                       allow_outside=True)
    x0, v0, shift = _deformed_start(scene)
    keys = ["step_kernels.params.gravity", "fields.C"]
    rev = scene_gradient(scene, keys, checkpoints=2, threads=1, start=(x0, v0))
    fwd = forward_gradient(scene, keys, threads=1, start=(x0, v0))
    d = fwd.directions["fields.C"]
    along = float(np.sum(rev.gradients["fields.C"] * d))
    assert fwd.gradients["fields.C"] == pytest.approx(along, rel=1e-10)
    assert fwd.gradients[keys[0]] == pytest.approx(rev.gradients[keys[0]], rel=1e-10)
    for key, direction, h in ((parse_key(scene, keys[0]), 1.0, 1e-3),
                              (parse_key(scene, keys[1]), d, 1.0)):
        ad = float(np.sum(np.asarray(rev.gradients[key.text]) * direction))
        fd, fd2 = (_central(scene, key, 0.0, direction, s, shift) for s in (h, 2 * h))
        rounding = 1e3 * np.finfo(float).eps * abs(rev.objective) / h
        assert abs(ad - fd) <= abs(fd - fd2) + rounding, (key.text, ad, fd, fd2)
        assert rounding < 1e-3 * abs(ad)


def test_cli_memory_budget_counts_the_allocated_fields(tmp_path):
    """--memory sizes the stored states with the fields a step-kernel state carries (the
    grid, C, F...), not x, v and F alone: the states kept fit the budget."""
    budget = 1 << 20
    done = simrun("grad", str(MPM), "--set", OBJECTIVE, "--set", "precision=f64",
                  "--steps", "40", "--wrt", "step_kernels.params.gravity",
                  "--memory", str(budget), "--out", str(tmp_path / "g"), cwd=REPO)
    assert done.returncode == 0, done.stderr
    schedule = json.loads((tmp_path / "g" / "gradients.json").read_text())["schedule"]
    per_state = schedule["stored_bytes"] // max(schedule["snapshots"], 1)
    assert 0 < schedule["snapshots"] < 39  # the budget binds
    assert per_state > 3 * 800 * 2 * 8  # fields counted besides x, v and F
    assert schedule["snapshots"] * (per_state + 1024) <= budget
    assert f"{schedule['snapshots']} stored states" in done.stderr
