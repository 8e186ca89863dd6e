"""Gradients of scenes with a `controller` that integrate with the scene's integrator
(symplectic Euler, velocity Verlet): the integrator's update kernels are differentiated as
step kernels (simrun/adjoint/integrated.py). Checked: the differentiated forward steps are
`simrun run`'s bit for bit; reverse against central differences of the scene run twice;
forward mode against reverse; a closed form; `simrun optimize` through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simrun.adjoint.job import (
    _begin,
    _start,
    _trajectory,
    forward_gradient,
    objective_value,
    scene_gradient,
)
from simrun.adjoint.keys import parse_key, value_of, with_value
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
