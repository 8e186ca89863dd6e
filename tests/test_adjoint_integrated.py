"""Gradients of scenes with a `controller` that integrate with the scene's integrator
(symplectic Euler, velocity Verlet): the integrator's update kernels are differentiated as
step kernels (simrun/adjoint/trajectory.py). Checked: the differentiated forward steps are
`simrun run`'s bit for bit; reverse against central differences of the scene run twice;
forward mode against reverse; a closed form; `simrun optimize` through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from adjoint_helpers import (
    advance_by_replay,
    assert_chained_equals_one_by_one,
    reverse_step_chains,
)

from simrun.adjoint.policy import execution
from simrun.jobs.grad import (
    _begin,
    _start,
    _trajectory,
    forward_gradient,
    objective_value,
    scene_gradient,
)
from simrun.keys import parse_key, value_of, with_value
from simrun.scene import load_scene as _load_scene
from simrun.stepper import run_scene

THRUST = """import numpy as np

import simrun.lang as ti


def allocate(ctx):
    weights = ti.field(ctx.dtype, shape=(ctx.dim, 3), needs_grad=True)
    weights.from_numpy(np.random.default_rng(3).normal(0, 0.5, (ctx.dim, 3))
                       .astype(ctx.np_dtype))
    thrust = ti.Vector.field(ctx.dim, dtype=ctx.dtype, shape=ctx.n, needs_grad=True)
    return {"weights": weights, "thrust": thrust}


@ti.kernel
def steer(x: ti.template(), v: ti.template(), weights: ti.template(), thrust: ti.template(),
          step: ti.i32, omega: float, dt: float):
    phase = ti.sin(omega * step * dt)
    for i in x:
        for c in ti.static(range(x.n)):
            thrust[i][c] = ti.tanh(weights[c, 0] * phase + weights[c, 1] * x[i][c]
                                   + weights[c, 2] * v[i][c])


@ti.kernel
def trap(x: ti.template(), thrust: ti.template(), U: ti.template(), k: float, gain: float):
    for i in x:
        U[None] += 0.5 * k * x[i].dot(x[i]) - gain * thrust[i].dot(x[i])


@ti.kernel
def miss(x: ti.template(), v: ti.template(), L: ti.template(), tx: float, ty: float):
    for i in x:
        L[None] += (x[i][0] - tx) ** 2 + (x[i][1] - ty) ** 2 + 0.1 * v[i].dot(v[i])
"""


def _scene_file(tmp_path: Path, integrator: str = "velocity_verlet", extra: str = "",
                precision: str = "f64", boundary: str = "none") -> Path:
    (tmp_path / "thrust.py").write_text(THRUST)
    path = tmp_path / "thrust.yaml"
    path.write_text(f"""version: 1
precision: {precision}
particles: {{count: 2, dim: 2, mass: 1.5}}
initial: {{type: lattice, shape: [2, 1], spacing: 0.7, origin: [0.2, -0.1],
          velocity: [0.3, -0.2]}}
controller: {{kernels: [thrust.py:steer], params: {{omega: 3.0}}}}
energy: [{{kernel: thrust.py:trap, params: {{k: 2.0, gain: 1.3}}}}]
integrator: {integrator}
boundary: {boundary}
dt: 0.05
steps: 24
outputs: {{every: 24, xyz: false}}
objective: {{kernel: thrust.py:miss, params: {{tx: 0.8, ty: 0.5}}, at: end}}
{extra}""")
    return path


def load_scene(path, overrides=()):
    return _load_scene(path, overrides, allow_outside=True)


KEYS = ["fields.weights", "energy.0.params.k", "dt", "state.v0", "integrator.damping"]
WALL = "{type: reflect, low: [-0.6, -0.2], high: [0.91, 0.6]}"  # particle 1 bounces at step 1
CASES = [  # (integrator, boundary, --set): damping 0 differentiated, and a damped bounce
    ("velocity_verlet", "none", []),
    ("symplectic_euler", "none", []),
    ("velocity_verlet", WALL, ["integrator.damping=0.3"]),
    # U reads the controller's output: dU/d(thrust) at every seeded state, too
    ("velocity_verlet", "none", ["objective={builtin: total, at: mean}"]),
]


@pytest.mark.parametrize("integrator, boundary, sets", CASES + [
    ("velocity_verlet", WALL, ["integrator.damping=0.3", "precision=f32"])])
def test_the_differentiated_steps_are_runs_bit_for_bit(tmp_path, integrator, boundary, sets):
    """The trajectory `grad` differentiates (update kernels read G and the differentiated
    scalars from fields) is the one `simrun run` makes, to the last bit."""
    scene = load_scene(_scene_file(tmp_path, integrator, boundary=boundary), sets)
    ran = run_scene(scene, tmp_path / "run")
    end = np.load(ran.out_dir / "state.npz")
    x0, v0 = _start(scene, {})
    traj = _trajectory(scene, [parse_key(scene, k) for k in KEYS], 1, x0)
    for replay in (False, True):  # run's stepper, the reverse step's replay
        state = _begin(traj, x0, v0, {})
        for k in range(scene.steps):
            state = advance_by_replay(traj, state, k) if replay else traj.advance(state, k)
        np.testing.assert_array_equal(state.x, end["x"])
        np.testing.assert_array_equal(state.v, end["v"])


def _direction(shape, seed: int) -> np.ndarray:
    d = np.random.default_rng(seed).normal(size=shape)
    return d / np.linalg.norm(d)


@pytest.mark.parametrize("integrator, boundary, sets", CASES)
def test_reverse_and_forward_gradients_match_central_differences(tmp_path, integrator,
                                                                  boundary, sets):
    """dJ/dKEY for the controller's weights, an energy parameter, dt, the start velocities
    and the damping against (J(p + e) - J(p - e)) / 2e of the scene run twice. f64, e = 1e-6:
    truncation e^2 J''' (J''' up to ~1e4 for dt over 24 steps) and rounding ~1e-16 J / e
    stay far below rtol 1e-6 + atol 1e-8. Forward mode (tangents) equals reverse to rounding
    (the same derivative, summed in another order: rtol 1e-9)."""
    scene = load_scene(_scene_file(tmp_path, integrator, boundary=boundary), sets)
    rev = scene_gradient(scene, KEYS, threads=1)
    fwd = forward_gradient(scene, KEYS, threads=1)
    assert rev.objective == pytest.approx(objective_value(scene, scene.steps, 1), rel=1e-14)
    eps = 1e-6
    for i, text in enumerate(KEYS):
        key = parse_key(scene, text)
        grad = np.asarray(rev.gradients[text])
        if key.kind in ("v0", "field"):
            d = _direction(grad.shape, i)
            up = objective_value(scene, scene.steps, 1, shifts={text: eps * d})
            down = objective_value(scene, scene.steps, 1, shifts={text: -eps * d})
            along = float(np.sum(grad * d))
            forward = float(fwd.gradients[text])  # along its own random direction
            assert forward == pytest.approx(float(np.sum(grad * fwd.directions[text])),
                                            rel=1e-9, abs=1e-13), text
        else:
            base = value_of(scene, key)
            up = objective_value(with_value(scene, key, base + eps), scene.steps, 1)
            down = objective_value(with_value(scene, key, base - eps), scene.steps, 1)
            along = float(grad)
            assert float(fwd.gradients[text]) == pytest.approx(along, rel=1e-9), text
        assert along == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-8), text
        assert abs(along) > 1e-4, text  # the key matters: the comparison can fail


def test_simrun_optimize_tunes_the_controller_through_the_cli(tmp_path):
    """`simrun optimize` on the velocity-Verlet controller scene lowers its loss, and
    `simrun run best.yaml` (trained weights loaded from best_fields.npz) ends where the best
    iteration's loss says."""
    path = _scene_file(tmp_path, extra="optimize: {parameters: [fields.weights, "
                       "energy.0.params.gain], optimizer: adam, lr: 0.1, iterations: 6}\n")
    env = {**__import__("os").environ, "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, "-m", "simrun.cli", "optimize", str(path), "--out",
                           "o", "--allow-outside", "--no-render"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = np.loadtxt(tmp_path / "o" / "loss.csv", delimiter=",", skiprows=1, ndmin=2)
    assert len(rows) >= 6 and rows[-1, 1] < 0.8 * rows[0, 1], rows[:, 1]
    ran = subprocess.run([sys.executable, "-m", "simrun.cli", "run", "o/best.yaml", "--out",
                          "r", "-q", "--no-render", "--allow-outside"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    end = np.load(tmp_path / "r" / "state.npz")
    x, v = end["x"], end["v"]
    loss = float(np.sum((x[:, 0] - 0.8) ** 2 + (x[:, 1] - 0.5) ** 2) + 0.1 * np.sum(v * v))
    assert loss == pytest.approx(rows[:, 1].min(), rel=1e-10)


@pytest.mark.parametrize("integrator, boundary, sets", CASES[:3])
def test_the_native_reverse_chain_equals_its_launches_one_by_one(tmp_path, integrator, boundary,
                                                                 sets):
    """The reverse step as one chain of launches (reverse_step.py) and the interpreted
    policy's same launches from Python give the same bits."""

    scene = load_scene(_scene_file(tmp_path, integrator, boundary=boundary), sets)
    x0, _v0 = _start(scene, {})
    traj = _trajectory(scene, [parse_key(scene, k) for k in KEYS], 1, x0)
    assert reverse_step_chains(traj)
    assert_chained_equals_one_by_one(scene, KEYS, 5)


MASS_STEER = """
@ti.kernel
def steer_by_mass(x: ti.template(), v: ti.template(), m: ti.template(),
                  weights: ti.template(), thrust: ti.template()):
    for i in x:
        for c in ti.static(range(x.n)):
            thrust[i][c] = ti.tanh(weights[c, 0] * m[i] + weights[c, 1] * x[i][c])
"""


@pytest.mark.parametrize("native", [True, False])
def test_a_controller_reading_the_masses_counts_in_their_gradient(tmp_path, native,
                                                                  monkeypatch):
    """particles.mass reaches J through the controller too (it reads m): reverse (native
    chain and Tape sweep) and forward mode against central differences (e = 1e-6, f64)."""

    path = _scene_file(tmp_path)
    (tmp_path / "thrust.py").write_text(THRUST + MASS_STEER)
    scene = load_scene(path, ["controller={kernels: [thrust.py:steer_by_mass]}",
                              "particles.mass=[1.5, 0.8]"])
    key = "particles.mass"
    with execution(native=native):
        rev = np.asarray(scene_gradient(scene, [key], threads=1, checkpoints=5).gradients[key])
    fwd = forward_gradient(scene, [key], threads=1)
    eps, base = 1e-6, np.array([1.5, 0.8])
    for i in range(2):
        shift = np.eye(2)[i] * eps
        up = objective_value(load_scene(path, [
            "controller={kernels: [thrust.py:steer_by_mass]}",
            f"particles.mass={(base + shift).tolist()}"]), scene.steps, 1)
        down = objective_value(load_scene(path, [
            "controller={kernels: [thrust.py:steer_by_mass]}",
            f"particles.mass={(base - shift).tolist()}"]), scene.steps, 1)
        assert rev[i] == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-8), i
    along = float(np.sum(rev * fwd.directions[key]))
    assert float(fwd.gradients[key]) == pytest.approx(along, rel=1e-9, abs=1e-13)


ADVANCE = """
@ti.kernel
def advance(x: ti.template(), v: ti.template(), m: ti.template(), dt: float):
    for i in x:
        v[i] += dt * (-x.grad[i] / m[i])
        x[i] += dt * v[i]
"""


@pytest.mark.parametrize("native", [True, False])
def test_a_controller_reading_the_masses_in_a_step_kernel_scene(tmp_path, native,
                                                                monkeypatch):
    """The same through step kernels (the native reverse step and the Tape sweep)."""

    path = _scene_file(tmp_path)
    path.write_text(path.read_text().replace("integrator: velocity_verlet\n", ""))
    (tmp_path / "thrust.py").write_text(THRUST + MASS_STEER + ADVANCE)
    sets = ["controller={kernels: [thrust.py:steer_by_mass]}",
            "step_kernels={kernels: [thrust.py:advance]}"]
    scene = load_scene(path, [*sets, "particles.mass=[1.5, 0.8]"])
    x0, _v0 = _start(scene, {})
    traj = _trajectory(scene, [parse_key(scene, "particles.mass")], 1, x0)
    assert traj.twins and traj.system.controller  # a step kernel, then a controller
    assert reverse_step_chains(traj)  # the native path exists for this scene
    key = "particles.mass"
    with execution(native=native):
        rev = np.asarray(scene_gradient(scene, [key], threads=1, checkpoints=5).gradients[key])
    eps, base = 1e-6, np.array([1.5, 0.8])
    for i in range(2):
        shift = np.eye(2)[i] * eps
        up, down = (objective_value(load_scene(path, [
            *sets, f"particles.mass={(base + s * shift).tolist()}"]), scene.steps, 1)
            for s in (1, -1))
        assert rev[i] == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-8), i
