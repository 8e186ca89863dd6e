"""Gradients of NVT scenes (Langevin BAOAB, Nosé-Hoover chain, rescaling, CSVR): the
thermostats are update kernels (stepper/thermostats.py) that `grad` differentiates by the
engine's reverse and forward modes, with no adjoint of their own. Checked: the differentiated
steps are `simrun run`'s bit for bit; reverse against central differences of the scene run
twice (the noise fixed by the seed: the pathwise derivative); forward mode equals reverse;
`simrun grad` through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from adjoint_helpers import (
    advance_by_replay,
    assert_chained_equals_one_by_one,
    reverse_step_chains,
)

from simrun.jobs import grad as job
from simrun.keys import parse_key, value_of, with_value
from simrun.scene import load_scene as _load_scene
from simrun.stepper import run_scene

REPO = Path(__file__).resolve().parents[1]
THERMOSTATS = {  # integrator, its own KEYs
    "langevin": ("{type: langevin, temperature: 0.5, friction: 1.0}",
                 ["integrator.temperature", "integrator.friction"]),
    "nose_hoover": ("{type: nose_hoover, temperature: 0.5, tau: 0.3, chain: 2}",
                    ["integrator.temperature", "integrator.tau"]),
    "rescale": ("{type: rescale, temperature: 0.5, every: 5}", ["integrator.temperature"]),
    "csvr": ("{type: csvr, temperature: 0.5, tau: 0.3}",
             ["integrator.temperature", "integrator.tau"]),
}
COMMON = ["energy.0.params.k", "dt", "state.x0", "particles.mass"]


def _scene(tmp_path: Path, name: str, boundary: str = "none"):
    """Three tethered particles in a uniform field (the forces never sum to zero, so the
    degrees of freedom do not change when the start moves), 12 steps of a thermostat."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""version: 1
precision: f64
seed: 3
particles: {{count: 3, dim: 2, mass: 1.5}}
initial: {{type: lattice, shape: [3, 1], spacing: 0.9, velocity: [0.3, -0.2]}}
energy:
  - {{kernel: {REPO}/kernels/external.py:anchor, params: {{k: 2.0, first: 0, count: 3}}}}
  - {{kernel: {REPO}/kernels/external.py:uniform_gravity, params: {{g: 0.4}}}}
integrator: {THERMOSTATS[name][0]}
boundary: {boundary}
dt: 0.05
steps: 12
outputs: {{every: 12, xyz: false}}
objective: {{builtin: kinetic, at: mean}}
""")
    return _load_scene(path, allow_outside=True)


WALL = "{type: reflect, low: [-0.5, -0.3], high: [2.0, 0.5]}"  # bounces within 12 steps


@pytest.mark.parametrize("name", THERMOSTATS)
def test_the_differentiated_steps_are_runs_bit_for_bit(tmp_path, name):
    """The trajectory `grad` differentiates is the one `simrun run` writes, to the last bit:
    `run`'s chained stepper and the launches the reverse replays alike."""
    scene = _scene(tmp_path, name, WALL)
    end = np.load(run_scene(scene, tmp_path / "run").out_dir / "state.npz")
    keys = [parse_key(scene, k) for k in COMMON + THERMOSTATS[name][1]]
    x0, v0 = job._start(scene, {})
    traj = job._trajectory(scene, keys, 1, x0)
    for replay in (False, True):  # run's stepper, the reverse step's replay
        state = job._begin(traj, x0, v0, {})
        for k in range(scene.steps):
            state = advance_by_replay(traj, state, k) if replay else traj.advance(state, k)
        np.testing.assert_array_equal(state.x, end["x"])
        np.testing.assert_array_equal(state.v, end["v"])


@pytest.mark.parametrize("boundary", ["none", WALL])
@pytest.mark.parametrize("name", THERMOSTATS)
def test_reverse_and_forward_gradients_match_central_differences(tmp_path, name, boundary):
    """dJ/dKEY (an energy parameter, dt, the start, the masses and the thermostat's own
    parameters) against (J(p + e) - J(p - e)) / 2e of the scene run twice. f64, e = 1e-6, 12
    smooth steps: truncation e^2 J''' (J''' <~ 1e3 for dt) and rounding ~1e-16 J / e stay
    below rtol 1e-6 + atol 1e-8. Forward mode equals reverse to rounding (rtol 1e-9)."""
    scene = _scene(tmp_path, name, boundary)
    keys = COMMON + THERMOSTATS[name][1]
    rev = job.scene_gradient(scene, keys, threads=1)
    fwd = job.forward_gradient(scene, keys, threads=1)
    assert rev.objective == pytest.approx(job.objective_value(scene, scene.steps, 1), rel=1e-14)
    eps = 1e-6
    for text in keys:
        key = parse_key(scene, text)
        grad = np.asarray(rev.gradients[text])
        if key.kind == "x0":
            d = fwd.directions[text]
            up = job.objective_value(scene, scene.steps, 1, shifts={text: eps * d})
            down = job.objective_value(scene, scene.steps, 1, shifts={text: -eps * d})
            along = float(np.sum(grad * d))
        else:
            base = value_of(scene, key)
            up = job.objective_value(with_value(scene, key, base + eps), scene.steps, 1)
            down = job.objective_value(with_value(scene, key, base - eps), scene.steps, 1)
            along = float(grad)
        assert float(fwd.gradients[text]) == pytest.approx(along, rel=1e-9, abs=1e-13), text
        assert along == pytest.approx((up - down) / (2 * eps), rel=1e-6, abs=1e-8), text
        assert abs(along) > 1e-4, text  # the key matters: the comparison can fail


def test_the_langevin_noise_is_part_of_the_path(tmp_path):
    """Another seed draws other noise, so another objective and gradient: the derivative is
    the pathwise one of the trajectory the seed fixes, not of a noise-free one."""
    scene = _scene(tmp_path, "langevin")
    one = job.scene_gradient(scene, ["integrator.temperature"], threads=1)
    other = job.scene_gradient(replace(scene, seed=4), ["integrator.temperature"], threads=1)
    assert one.objective != other.objective
    assert one.gradients["integrator.temperature"] != other.gradients["integrator.temperature"]


def test_simrun_grad_on_a_nose_hoover_scene_through_the_cli(tmp_path):
    """The CLI differentiates a thermostat's parameter (it used to refuse every NVT scene),
    and `--check` agrees with its own central differences."""
    scene = _scene(tmp_path, "nose_hoover")
    done = subprocess.run([sys.executable, "-m", "simrun.cli", "grad", str(scene.source),
                           "--wrt", "integrator.tau", "--wrt", "dt", "--check", "--out", "g",
                           "--allow-outside", "--threads", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads((tmp_path / "g" / "gradients.json").read_text())
    assert set(found["gradients"]) == {"integrator.tau", "dt"}
    assert found["check"]["ok"], found["check"]


@pytest.mark.parametrize("name", THERMOSTATS)
def test_the_native_reverse_chain_equals_its_launches_one_by_one(tmp_path, name):
    """The reverse step as one chain of launches (reverse_step.py, generated from the
    update plan) and the same launches one by one give the same bits."""
    scene = _scene(tmp_path, name, WALL)
    keys = COMMON + THERMOSTATS[name][1]
    x0, _v0 = job._start(scene, {})
    traj = job._trajectory(scene, [parse_key(scene, k) for k in keys], 1, x0)
    assert reverse_step_chains(traj)
    assert_chained_equals_one_by_one(scene, keys, 4)
