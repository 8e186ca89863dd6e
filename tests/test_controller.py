"""The scene's `controller:` section (kernels called each step before the forces) and the
mass-spring robot built on it (scenes/mass_spring.yaml), checked against closed forms and
against an independent NumPy transcription of DiffTaichi's update rules."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from simrun.jobs.grad import forward_gradient, scene_gradient
from simrun.scene import SceneError, initial_state
from simrun.scene import load_scene as _load_scene
from simrun.stepper import run_scene
from simrun.stepper.system import System

REPO = Path(__file__).resolve().parents[1]
SCENE = REPO / "scenes" / "mass_spring.yaml"


def load_scene(path, overrides=()):
    return _load_scene(path, overrides, allow_outside=True)


RAMP = """import simrun.lang as ti


def allocate(ctx):
    return {"push": ti.field(dtype=ctx.dtype, shape=())}


@ti.kernel
def ramp(push: ti.template(), step: ti.i32, rate: float):
    push[None] = rate * step


@ti.kernel
def pushed(x: ti.template(), push: ti.template(), U: ti.template()):
    for i in x:
        U[None] += -push[None] * x[i][0]
"""


def _ramp_scene(tmp_path: Path, controller: str, steps: int = 10) -> Path:
    (tmp_path / "ramp.py").write_text(RAMP)
    path = tmp_path / "ramp.yaml"
    path.write_text(f"""version: 1
particles: {{count: 1, dim: 2, mass: 2.0}}
initial: {{type: lattice, shape: [1, 1], spacing: 1.0}}
controller: {controller}
energy: [{{kernel: ramp.py:pushed}}]
dt: 0.1
steps: {steps}
outputs: {{every: 1, xyz: false}}
""")
    return path


def test_the_controller_runs_before_the_forces_of_each_step(tmp_path):
    """The controller sets a force rate * n at step n (0-based), so symplectic Euler gives
    v_N = dt rate N(N-1) / (2m) and x_N = dt^2 rate (N-1) N (N+1) / (6m)."""
    n, dt, m, rate = 10, 0.1, 2.0, 3.0
    scene = load_scene(_ramp_scene(tmp_path, f"{{kernels: [ramp.py:ramp], params: {{rate: "
                                             f"{rate}}}}}", n))
    result = run_scene(scene, tmp_path / "out")
    x, v = np.load(result.out_dir / "state.npz")["x"], np.load(result.out_dir / "state.npz")["v"]
    assert v[0, 0] == pytest.approx(dt * rate * n * (n - 1) / (2 * m), rel=1e-12)
    assert x[0, 0] == pytest.approx(dt * dt * rate * (n - 1) * n * (n + 1) / (6 * m), rel=1e-12)
    assert v[0, 1] == 0.0


@pytest.mark.parametrize("controller, message", [
    ("{kernels: []}", "'controller.kernels' is empty"),
    ("{kernels: [ramp.py:ramp], param: {rate: 1}}", "unknown key 'param' in 'controller'"),
    ("{params: {rate: 1}}", "'controller' is missing the required key 'kernels'"),
])
def test_bad_controller_sections_are_reported_at_their_line(tmp_path, controller, message):
    path = _ramp_scene(tmp_path, controller)
    with pytest.raises(SceneError, match=message) as caught:
        load_scene(path)
    assert f"{path.name}:4:" in str(caught.value)


def test_a_controller_parameter_must_name_an_argument(tmp_path):
    scene = load_scene(_ramp_scene(tmp_path, "{kernels: [ramp.py:ramp], params: {rat: 1}}"))
    with pytest.raises(SceneError, match=r"ramp.yaml:4:\d+: parameter 'rat' is not an argument "
                       r"of kernel 'ramp'.*Did you mean 'rate'"):
        System(scene, initial_state(scene)[0])


CUSTOM_RAMP = RAMP + """

@ti.kernel
def brake(v: ti.template(), push: ti.template(), step: ti.i32, rate: float):
    push[None] = rate * step - 0.5 * rate * v[0][0] * v[0][0]


@ti.kernel
def _brake_grad(v: ti.template(), push: ti.template(), rate: float):
    v.grad[0][0] += -rate * v[0][0] * push.grad[None]
    push.grad[None] = 0


@ti.ad.grad_replaced
def custom_brake(v, push, step, rate):
    brake(v, push, step, rate)


@ti.ad.grad_for(custom_brake)
def custom_brake_grad(v, push, step, rate):
    _brake_grad(v, push, rate)
"""


@pytest.mark.parametrize("native", [True, False])
def test_a_controller_with_its_own_gradient_is_differentiated(tmp_path, native):
    """A grad_replaced controller (a push that depends on the velocity, with a hand-written
    backward) is a Python call inside the reverse step, its backward run where the fields
    stand, as a Tape runs it (the step's other launches then snapshot every field they
    overwrite): the gradients of the same controller as a plain kernel, to rounding (10 steps,
    f64); forward mode runs its primal under FwdMode and agrees."""
    from simrun.adjoint.policy import execution

    keys = ["dt", "state.v0", "particles.mass"]
    found = {}
    for name in ("brake", "custom_brake"):
        path = _ramp_scene(tmp_path, f"{{kernels: [ramp.py:{name}], params: {{rate: 1.5}}}}")
        (tmp_path / "ramp.py").write_text(CUSTOM_RAMP)
        scene = load_scene(path, ["objective={builtin: kinetic, at: end}",
                                  "initial.velocity=[0.3, 0.1]"])
        with execution(native=native):
            found[name] = scene_gradient(scene, keys, threads=1, checkpoints=3)
            forward = forward_gradient(scene, ["dt"], threads=1)  # the primal under FwdMode
        assert forward.gradients["dt"] == pytest.approx(found[name].gradients["dt"], rel=1e-12)
    assert found["custom_brake"].objective == found["brake"].objective
    for key in keys:
        a, b = (np.asarray(found[n].gradients[key]) for n in ("brake", "custom_brake"))
        assert np.any(a != 0), key
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13 * np.abs(a).max(), err_msg=key)


def test_the_controller_survives_the_resolved_scene_and_grad_differentiates_it(tmp_path):
    """With the integrator's symplectic Euler, v_N = dt rate N(N-1) / (2m) (above), so the
    kinetic energy at the end is proportional to dt^2: dJ/d(dt) = 2 J / dt exactly."""
    path = _ramp_scene(tmp_path, "{kernels: [ramp.py:ramp], params: {rate: 1.5}}")
    scene = load_scene(path)
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(scene.to_dict()))
    assert load_scene(again).controller.to_dict() == scene.controller.to_dict()
    with_objective = load_scene(path, ["objective={builtin: kinetic}"])
    result = scene_gradient(with_objective, ["dt"])
    assert result.objective > 0
    assert result.gradients["dt"] == pytest.approx(2 * result.objective / scene.dt, rel=1e-12)


# ------------------------------------------------------------------ the mass-spring robot
def _difftaichi_reference(scene, x, v, fields, steps):
    """DiffTaichi's mass_spring.py update rules in f64 NumPy, written from its equations:
    spring impulse dt k (|d| + e - L) / (|d| + e) d, damping exp(-dt damping), gravity, and
    the time-of-impact ground that stops a falling point."""
    e, dt = 1e-4, scene.dt
    sk, spring = scene.step_kernels.params, scene.energy[0].params
    bonds = scene.topology.arrays["bonds"]
    w1, b1, w2, b2 = (fields[k] for k in ("weights1", "bias1", "weights2", "bias2"))
    rest, goal = fields["rest"], fields["goal"]
    n_act = spring["n_actuated"]
    for t in range(steps):
        c = x.mean(axis=0)
        inputs = [np.sin(10.0 * t * dt + 2 * math.pi / 10 * j) for j in range(10)]
        for p in range(len(x)):
            inputs += [(x[p, 0] - c[0]) * 0.05, (x[p, 1] - c[1]) * 0.05, v[p, 0] * 0.05,
                       v[p, 1] * 0.05]
        inputs += [goal[0] - c[0], goal[1] - c[1]]
        act = np.tanh(w2 @ np.tanh(w1 @ np.array(inputs) + b1) + b2)
        target = rest * np.where(np.arange(len(bonds)) < n_act, 1 + spring["amplitude"] * act, 1)
        d = x[bonds[:, 0]] - x[bonds[:, 1]]
        length = np.linalg.norm(d, axis=1) + e
        impulse = (dt * (length - target) * spring["stiffness"] / length)[:, None] * d
        v_inc = np.zeros_like(x)
        np.add.at(v_inc, bonds[:, 0], -impulse)
        np.add.at(v_inc, bonds[:, 1], impulse)
        old_v = math.exp(-dt * sk["damping"]) * v + dt * np.array([0, sk["gravity"]]) + v_inc
        new_x = x + dt * old_v
        hit = (new_x[:, 1] < sk["ground"]) & (old_v[:, 1] < -1e-4)
        toi = np.where(hit, -(x[:, 1] - sk["ground"]) / np.where(hit, old_v[:, 1], 1), 0)
        new_v = np.where(hit[:, None], 0.0, old_v)
        x = x + toi[:, None] * old_v + (dt - toi)[:, None] * new_v
        v = new_v
    return x, v


def test_mass_spring_reproduces_difftaichis_update_rules(tmp_path):
    """In f64, the scene (controller kernels, spring energy, ground step kernel) follows an
    independent NumPy transcription of DiffTaichi's rules step for step; the spring force
    -dU/dx equals DiffTaichi's impulse / dt exactly in exact arithmetic, so only rounding
    differs: a few ulps a step, grown by the contacts' sensitivity over 120 steps."""
    steps = 120
    scene = load_scene(SCENE, ["precision=f64", f"steps={steps}", "outputs.every=40"])
    result = run_scene(scene, tmp_path / "out")
    state = np.load(result.out_dir / "state.npz")
    fields = {k.split(":", 1)[1]: state[k] for k in state.files if k.startswith("field:")}
    x0, v0 = initial_state(scene)
    x_ref, v_ref = _difftaichi_reference(scene, x0.astype(float), v0.astype(float), fields,
                                         steps)
    assert np.abs(x_ref - x0).max() > 2e-3  # the robot has moved (untrained: a few mm)
    np.testing.assert_allclose(state["x"], x_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(state["v"], v_ref, rtol=0, atol=1e-7)


def test_mass_spring_stays_above_the_ground(tmp_path):
    scene = load_scene(SCENE, ["steps=300", "outputs.every=5"])
    result = run_scene(scene, tmp_path / "out")
    frames = np.load(result.out_dir / "frames.npz")["x"]
    ground = scene.step_kernels.params["ground"]
    assert frames[..., 1].min() >= ground - 1e-6
    assert np.isfinite(frames).all()


@pytest.mark.parametrize("name", ["mass_spring", "billiards"])
def test_chained_controller_steps_equal_the_python_steps(tmp_path, monkeypatch, name):
    """`run` makes a controller scene's step (controller at the step index, forces, step
    kernels, forces) one native call: the same launches as the per-launch Python step, so
    every frame is the same bits."""
    from simrun.stepper.fieldstep import FieldStepper

    scene = load_scene(REPO / "scenes" / f"{name}.yaml", ["steps=200", "outputs.every=50"])
    chained = run_scene(scene, tmp_path / "chained")
    monkeypatch.setattr(FieldStepper, "_control_launches", lambda self: None)
    python = run_scene(scene, tmp_path / "python")
    for frame in ("state.npz", "frames.npz"):
        a, b = np.load(chained.out_dir / frame), np.load(python.out_dir / frame)
        assert set(a.files) == set(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{frame}:{key}")
