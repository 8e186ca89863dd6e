"""The field stepper (integrator updates as kernels, many steps per native call) against the
NumPy integrators it replaced (tests/numpy_integrators.py), on every shipped scene and on
damped, reflecting and periodic variants; the native launch chain itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy_integrators import make_step as numpy_step

from simrun.scene import initial_state, load_scene
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.run import next_event, prepare
from simrun.stepper.state import State

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"
CASES = [  # (scene, overrides, steps)
    ("gravity.yaml", [], 400),
    ("projectile.yaml", [], 100),
    ("molecule.yaml", [], 300),
    ("fem.yaml", [], 300),
    ("fit_spring.yaml", [], 80),
    ("gravity_1024.yaml", ["particles.count=128"], 50),
    ("mpm.yaml", [], 100),
    ("molecule.yaml", ["integrator.damping=0.5", "boundary.type=reflect",
                       "boundary.low=[-1.5,-1.5,-1.5]", "boundary.high=[1.5,1.5,1.5]",
                       "initial.temperature=5"], 300),
    ("gravity.yaml", ["integrator.damping=2.0", "boundary.type=periodic",
                      "boundary.low=[0.2,0.2]", "boundary.high=[0.8,0.8]", "dt=1e-4"], 300),
]


def _trajectory(scene, fields: bool) -> list[State]:
    system, state = prepare(scene, None, threads=1)
    states = []
    if fields:
        stepper = FieldStepper(scene, system)
        for _ in range(scene.steps):  # chunks of uneven size, as run's loop makes them
            k = min(7, scene.steps - state.step)
            assert stepper.advance(k) == k and not stepper.not_finite()
            state.step += k
            stepper.store(state)
            states.append(State(state.step, state.x, state.v, state.f, state.potential))
            if state.step == scene.steps:
                break
        return states
    step = numpy_step(scene, system)
    while state.step < scene.steps:
        step(state)
        state.step += 1
        if state.step % 7 == 0 or state.step == scene.steps:
            states.append(State(state.step, state.x.copy(), state.v.copy(), state.f.copy(),
                                state.potential))
    return states


@pytest.mark.parametrize("name,overrides,steps", CASES,
                         ids=[f"{c[0]}{'+' if c[1] else ''}{len(c[1]) or ''}" for c in CASES])
def test_field_stepper_matches_the_numpy_integrators(name, overrides, steps):
    """Same states within rounding: the updates make the NumPy operations in the same order
    without fast-math, so they agree to the bit but for the periodic wrap's mod (a - c
    floor(a/c) against NumPy's fmod), whose last-bit differences a chaotic trajectory grows
    at most like eps * exp(lambda t): a few hundred steps keep that far below 1e-6."""
    scene = load_scene(SCENES / name, [f"steps={steps}", *overrides])
    ref, got = _trajectory(scene, False), _trajectory(scene, True)
    assert [s.step for s in ref] == [s.step for s in got]
    eps = float(np.finfo(ref[0].x.dtype).eps)
    periodic = scene.boundary.type == "periodic"
    for a, b in zip(ref, got):
        for what in ("x", "v", "f"):
            p, q = getattr(a, what), getattr(b, what)
            scale = max(float(np.abs(p).max()), 1e-30)
            if periodic:
                assert np.abs(p - q).max() <= 1e3 * eps * scale, (what, a.step)
            else:
                np.testing.assert_array_equal(p, q, err_msg=f"{what} at step {a.step}")
        assert b.potential == pytest.approx(a.potential, rel=1e3 * eps, abs=1e3 * eps)


def test_field_stepper_conserves_energy_and_resumes_mid_chunk():
    """Velocity Verlet on the molecule: total energy drifts by O(dt^2); stopping after any
    number of steps and going on gives the states of one uninterrupted advance."""
    scene = load_scene(SCENES / "molecule.yaml", ["steps=600"])
    system, state = prepare(scene, None, threads=1)
    stepper = FieldStepper(scene, system)
    masses = system.masses.astype(float)[:, None]
    energy0 = 0.5 * float(np.sum(masses * state.v.astype(float) ** 2)) + state.potential
    assert stepper.advance(600) == 600
    stepper.store(state)
    energy = 0.5 * float(np.sum(masses * state.v.astype(float) ** 2)) + state.potential
    assert abs(energy - energy0) <= 1e-3 * abs(energy0)
    whole = state.x.copy()
    x0, v0 = initial_state(scene)
    system.set_state(x0, v0)
    system.forces()
    for k in (1, 13, 200, 386):
        assert stepper.advance(k) == k
    stepper.store(state)
    np.testing.assert_array_equal(state.x, whole)


def test_nan_watch_stops_the_chunk_at_the_first_bad_step():
    scene = load_scene(SCENES / "molecule.yaml", ["dt=0.5", "steps=2000"])
    system, state = prepare(scene, None, threads=1)
    stepper = FieldStepper(scene, system)
    done = stepper.advance(2000)
    assert 0 < done < 2000 and stepper.not_finite()
    stepper.store(state)
    assert not np.isfinite(state.x).all() or not np.isfinite(state.v).all() or \
        not np.isfinite(state.f).all() or not np.isfinite(state.potential)
    system2, state2 = prepare(scene, None, threads=1)  # one step less is still finite
    stepper2 = FieldStepper(scene, system2)
    assert stepper2.advance(done - 1) == done - 1 and not stepper2.not_finite()


def test_next_event_is_the_nearest_cadence_or_the_end():
    assert next_event(0, 1000, (100,)) == 100
    assert next_event(100, 1000, (100,)) == 200
    assert next_event(95, 1000, (100, 30)) == 100
    assert next_event(61, 1000, (100, 30)) == 90
    assert next_event(990, 1000, (300,)) == 1000
