"""The native reverse steps of step-kernel scenes (adjoint/reverse_step.py) against the
interpreted policy's same launches one by one, and the
trajectory that `simrun optimize` keeps between its gradients (jobs/reuse.py) against a
fresh one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from adjoint_helpers import reverse_step_chains

from simrun.adjoint.policy import execution
from simrun.jobs import grad as job
from simrun.jobs.grad import scene_gradient
from simrun.jobs.reuse import TrajectoryCache
from simrun.keys import parse_key
from simrun.scene import initial_state, load_scene

SCENES = Path(__file__).resolve().parents[1] / "scenes"
MPM_KEYS = ["step_kernels.params.gravity", "energy.0.params.youngs", "dt", "particles.mass",
            "fields.C", "state.v0"]
CASES = {  # scene, overrides, KEYs, checkpoints (few: the schedule recomputes states)
    "mass_spring": ("mass_spring", ["steps=60"],
                    ["fields.weights1", "fields.bias1", "fields.weights2", "fields.bias2"], 4),
    "billiards": ("billiards", [], ["fields.cue_x", "fields.cue_v"], 4),
    "diffmpm": ("diffmpm", ["steps=25"], ["fields.weights", "fields.bias"], 3),
    "mpm-mean": ("mpm", ["precision=f64", "objective={builtin: kinetic, at: mean}",
                         "steps=8"], MPM_KEYS, 2),
}


def _scene(case: str):
    name, overrides, keys, checkpoints = CASES[case]
    return load_scene(SCENES / f"{name}.yaml", overrides), keys, checkpoints


@pytest.mark.parametrize("case", list(CASES))
def test_native_steps_are_made_for_the_shipped_step_kernel_scenes(case):
    """No silent fallback to launches one by one: every launch of these scenes chains."""
    scene, keys, _ = _scene(case)
    parsed = [parse_key(scene, k) for k in keys]
    x0, v0 = job._start(scene, {})
    traj = job._trajectory(scene, parsed, 1, x0)
    job._begin(traj, x0, v0, {})
    assert reverse_step_chains(traj)


@pytest.mark.parametrize("case", list(CASES))
def test_native_gradient_equals_its_launches_one_by_one(case):
    """The native chains and the interpreted policy (the same launches from Python, as on a
    GPU): the same objective and gradients, bit for bit (f32 robots included)."""
    scene, keys, checkpoints = _scene(case)
    x0, v0 = initial_state(scene)  # deformed: the MPM energy's parameters then matter
    start = (x0 + 5e-4 * np.random.default_rng(1).normal(size=x0.shape), v0)
    if case != "mpm-mean":
        start = None
    native = scene_gradient(scene, keys, checkpoints=checkpoints, threads=1, start=start)
    with execution(native=False):
        one_by_one = scene_gradient(scene, keys, checkpoints=checkpoints, threads=1,
                                    start=start)
    assert native.objective == one_by_one.objective
    for key in keys:
        assert np.any(np.asarray(native.gradients[key]) != 0), key
        np.testing.assert_array_equal(native.gradients[key], one_by_one.gradients[key],
                                      err_msg=key)


@pytest.mark.parametrize("case", ["mass_spring", "billiards"])
def test_controller_scenes_run_as_one_native_program_whatever_the_schedule(case, monkeypatch):
    """A controller's step index comes from the program's ops table (its twins read it
    from a field), so the whole schedule of a robot runs as native programs: few stored
    states (each recomputed step reads its index from the table) give every state's
    objective and gradients, bit for bit."""
    from simrun.adjoint.program import NativeProgram

    scene, keys, checkpoints = _scene(case)
    ran = []
    gradient = NativeProgram.gradient
    monkeypatch.setattr(NativeProgram, "gradient",
                        lambda self, *a, **k: ran.append(1) or gradient(self, *a, **k))
    few = scene_gradient(scene, keys, checkpoints=checkpoints, threads=1)
    every = scene_gradient(scene, keys, checkpoints=scene.steps - 1, threads=1)
    assert len(ran) == 2
    assert few.objective == every.objective
    assert few.advances > every.advances
    for key in keys:
        assert np.any(np.asarray(few.gradients[key]) != 0), key
        np.testing.assert_array_equal(few.gradients[key], every.gradients[key])


def test_a_cached_trajectory_gives_a_fresh_ones_gradients_bit_for_bit():
    """optimize's iterations: new field values each time, the other fields (the controller's
    outputs, which the previous episode left moved) back at their allocated values; after
    a `ti.init` (another System) the cache builds a new trajectory."""
    scene, keys, _ = _scene("mass_spring")
    cache = TrajectoryCache()
    start = scene_gradient(scene, keys, threads=1).field_values
    rng = np.random.default_rng(0)
    rounds = [{k.split(".", 1)[1]: v + 0.05 * rng.standard_normal(v.shape)
               for k, v in start.items()} for _ in range(3)]
    cached, kept = [], []
    for fields in rounds:
        cached.append(scene_gradient(scene, keys, threads=1, fields=fields, cache=cache))
        kept.append(cache.traj)
    assert kept[0] is not None and kept[0] is kept[1] is kept[2]  # one System for all
    for fields, result in zip(rounds, cached):
        fresh = scene_gradient(scene, keys, threads=1, fields=fields)
        assert result.objective == fresh.objective
        for key in keys:
            np.testing.assert_array_equal(result.gradients[key], fresh.gradients[key])
    again = scene_gradient(scene, keys, threads=1, fields=rounds[0], cache=cache)
    assert cache.traj is not kept[0]  # the fresh gradients' ti.init replaced the engine
    assert again.objective == cached[0].objective


def test_a_boundary_on_top_of_step_kernels_is_reversed_natively(tmp_path):
    """The walls after a scene's step kernels are `run`'s walls kernel, reversed by the
    engine in the native step like every other launch. A kinetic objective over bouncing
    bodies: the gradient along v0 matches central differences."""
    from test_adjoint_step_walls import _scene as walls_scene

    scene, x0, v0 = walls_scene(tmp_path, "{type: reflect, low: [0, 0], high: [1, 1]}")
    scene = load_scene(scene.source, ["objective={builtin: kinetic, at: end}"],
                       allow_outside=True)
    parsed = [parse_key(scene, "state.v0")]
    traj = job._trajectory(scene, parsed, 1, initial_state(scene)[0])
    job._begin(traj, x0, v0, {})
    assert reverse_step_chains(traj)
    grad = scene_gradient(scene, ["state.v0"], threads=1, start=(x0, v0)).gradients["state.v0"]
    d = np.random.default_rng(2).normal(size=v0.shape)
    h = 1e-6
    plus, minus = (job.objective_value(scene, scene.steps, 1, {"state.x0": x0 - initial_state(
        scene)[0], "state.v0": v0 + s * h * d - initial_state(scene)[1]}) for s in (1, -1))
    assert float(np.sum(grad * d)) == pytest.approx((plus - minus) / (2 * h), rel=1e-6)
