"""`simrun grad` through step kernels with a scene `boundary` on top: the walls run after
the step kernels (as `simrun run` applies them), and the adjoint and the tangents flip the
components a reflecting wall flipped (a periodic wrap has derivative 1). Checked against
central differences of the scene run twice over a horizon in which bodies bounce (none lands
near a wall inside a difference), and forward mode against reverse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.jobs.grad import forward_gradient, objective_value, scene_gradient
from simrun.keys import parse_key, value_of, with_value
from simrun.scene import initial_state, load_scene

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
STEP = '''import simrun.lang as ti

DEFAULTS = {"advance": {"gravity": -2.0}}


@ti.kernel
def advance(x: ti.template(), v: ti.template(), m: ti.template(), dt: float, gravity: float):
    for i in x:
        v[i] += dt * (gravity * ti.Vector([0.0, 1.0]) - x.grad[i] / m[i])
        x[i] += dt * v[i]
'''
KEYS = ["step_kernels.params.gravity", "dt", "state.v0", "state.x0"]


def _scene(tmp_path: Path, boundary: str):
    (tmp_path / "kernels").mkdir(exist_ok=True)
    (tmp_path / "kernels" / "free.py").write_text(STEP)
    path = tmp_path / "walls.yaml"
    path.write_text(f"""version: 2
name: walls
precision: f64
seed: 4
particles: {{count: 6, dim: 2, mass: [1, 2, 1, 3, 1, 2]}}
initial: {{type: random, low: [0.3, 0.3], high: [0.7, 0.7]}}
energy:
  - kernel: {KERNELS}/gravity.py:gravity
    params: {{softening: 0.05, strength: 0.02}}
step_kernels:
  kernels: [kernels/free.py:advance]
boundary: {boundary}
dt: 0.01
steps: 40
objective: {{builtin: potential, at: end}}
""")
    scene = load_scene(path, allow_outside=True)
    # every body starts near a wall and heads for it at ~1.5 per unit time (0.6 over the
    # horizon, 0.2-0.25 away): each bounces once, a few steps from either end
    x0 = np.array([[0.8, 0.5], [0.2, 0.5], [0.5, 0.8], [0.5, 0.25], [0.8, 0.75], [0.25, 0.8]])
    v0 = 1.5 * np.array([[1, 0], [-1, 0], [0, 1], [0, -1], [0.7, 0.7], [-0.7, 0.7]])
    return scene, x0, v0


def _central(scene, key, base, direction, h, start_shifts):
    values = []
    for sign in (1.0, -1.0):
        shifts, moved = dict(start_shifts), scene
        if key.kind in ("x0", "v0"):
            shifts[key.text] = shifts.get(key.text, 0.0) + sign * h * direction
        else:
            moved = with_value(scene, key, base + sign * h)
        values.append(objective_value(moved, 40, 1, shifts))
    return (values[0] - values[1]) / (2 * h)


@pytest.mark.parametrize("boundary", [
    "{type: reflect, low: [0, 0], high: [1, 1]}",
    "{type: periodic, low: [0, 0], high: [1, 1]}"], ids=["reflect", "periodic"])
def test_step_kernel_gradients_through_walls_match_central_differences(tmp_path, boundary):
    scene, x0, v0 = _scene(tmp_path, boundary)
    scene_x0, scene_v0 = initial_state(scene)
    shift = {"state.x0": x0 - scene_x0, "state.v0": v0 - scene_v0}
    result = scene_gradient(scene, KEYS, checkpoints=5, threads=1, start=(x0, v0))
    forward = forward_gradient(scene, KEYS, threads=1, start=(x0, v0))
    for text in KEYS:
        key = parse_key(scene, text)
        grad = np.asarray(result.gradients[text])
        if key.kind in ("x0", "v0"):
            direction = forward.directions[text]
            base, h = 0.0, 1e-6
        else:
            direction, base = 1.0, value_of(scene, key)
            h = 1e-6 * max(abs(base), 1e-2)
        ad = float(np.sum(grad * direction))
        fd = _central(scene, key, base, direction, h, shift)
        # J ~ 1e-2 in f64: rounding over h leaves ~1e-16 * 1e-2 / 1e-8 = 1e-10 in FD; its
        # truncation ~h^2 J''' ~ 1e-12 relative; 1e-6 is far above both, far below a bug
        assert abs(ad - fd) <= 1e-6 * max(abs(fd), 1e-3), (text, ad, fd)
        # forward mode along the same direction agrees to rounding
        assert abs(float(forward.gradients[text]) - ad) <= 1e-9 * max(abs(ad), 1e-3), text


def test_walls_really_bounce_in_this_horizon(tmp_path):
    """Every body crosses a reflecting wall in this horizon (else the test above would not
    test the walls): some velocity component flips between above 0.5 and below -0.5."""
    from simrun.jobs.grad import _begin, _trajectory

    scene, x0, v0 = _scene(tmp_path, "{type: reflect, low: [0, 0], high: [1, 1]}")
    traj = _trajectory(scene, [], 1, initial_state(scene)[0])
    state, bounced = _begin(traj, x0, v0, {}), np.zeros(6, bool)
    for k in range(scene.steps):
        nxt = traj.advance(state, k)
        bounced |= np.any((np.abs(state.v) > 0.5) & (np.abs(nxt.v) > 0.5)
                          & (np.sign(nxt.v) == -np.sign(state.v)), axis=1)
        state = nxt
    assert bounced.all(), bounced
