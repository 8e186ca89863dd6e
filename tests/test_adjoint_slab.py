"""The slab of stored states (adjoint/slab.py) has its number of slots as a runtime value:
a gradient with another count of stored states compiles nothing new, and gives the same
bits (a state recomputed from an earlier one is the state stored)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.adjoint.schedule import forward_steps
from simrun.jobs.grad import scene_gradient
from simrun.lang.runtime import jit
from simrun.scene import load_scene

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
SCENES = {  # gravity: x, v and F in the slab; Nose-Hoover: its chain too (a carried field)
    "gravity": (f"""particles: {{count: 12, dim: 2, mass: [1, 2, 1, 1, 3, 1, 1, 2, 1, 1, 1, 2]}}
initial: {{type: random, low: [0.2, 0.2], high: [0.8, 0.8], velocity: [0.3, -0.1]}}
energy:
  - {{kernel: {KERNELS}/gravity.py:gravity, params: {{softening: 0.01, strength: 0.05}}}}
integrator: {{type: velocity_verlet, damping: 0.2}}
boundary: {{type: reflect, low: [0.25, 0.25], high: [0.75, 0.75]}}
dt: 0.002
objective: {{builtin: kinetic, at: end}}
""", ["state.x0", "dt", "energy.0.params.strength"]),
    "nose_hoover": (f"""particles: {{count: 3, dim: 2, mass: 1.5}}
initial: {{type: lattice, shape: [3, 1], spacing: 0.9, velocity: [0.3, -0.2]}}
energy:
  - {{kernel: {KERNELS}/external.py:anchor, params: {{k: 2.0, first: 0, count: 3}}}}
  - {{kernel: {KERNELS}/external.py:uniform_gravity, params: {{g: 0.4}}}}
integrator: {{type: nose_hoover, temperature: 0.5, tau: 0.3, chain: 2}}
dt: 0.05
objective: {{builtin: kinetic, at: mean}}
""", ["state.x0", "dt", "integrator.tau"]),
}


@pytest.mark.cpu_only("counts the CPU JIT's modules")
@pytest.mark.parametrize("name", SCENES)
def test_another_count_of_stored_states_compiles_nothing_new(tmp_path, monkeypatch, name):
    """After one gradient, gradients that store 5 and 17 states (the slot count was compiled
    into the kernels that move states in and out of the slab: two new kernels, ~2 s, each
    time it changed) ask the JIT for no module it has not made, and keep every bit."""
    body, keys = SCENES[name]
    path = tmp_path / "s.yaml"
    path.write_text(f"version: 1\nname: slab\nprecision: f64\nseed: 3\nsteps: 60\n{body}")
    scene = load_scene(path, allow_outside=True)
    asked: dict[str, str] = {}
    made = jit.cache_key

    def cache_key(text: str, settings) -> str:
        key = made(text, settings)
        asked.setdefault(key, text.split("(", 1)[0])  # "kernel name"
        return key

    monkeypatch.setattr(jit, "cache_key", cache_key)
    first = scene_gradient(scene, keys, checkpoints=2, threads=1)
    assert first.advances == forward_steps(60, 2)
    known = set(asked)
    for checkpoints in (5, 17):
        again = scene_gradient(scene, keys, checkpoints=checkpoints, threads=1)
        assert again.snapshots == checkpoints and again.advances == forward_steps(60, checkpoints)
        new = sorted(asked[k] for k in set(asked) - known)
        assert not new, f"{checkpoints} stored states compiled {new}"
        assert again.objective == first.objective
        for key in keys:
            np.testing.assert_array_equal(again.gradients[key], first.gradients[key])
