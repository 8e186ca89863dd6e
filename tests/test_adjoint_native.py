"""The reverse step as one chain of launches (adjoint/reverse_step.py) against the same
launches one by one (the interpreted policy) and against forward mode, and bit-reproducible
from run to run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simrun.adjoint import schedule
from simrun.adjoint.policy import execution
from simrun.adjoint.program import NativeProgram, stopped_at
from simrun.adjoint.trajectory import Trajectory
from simrun.jobs.grad import forward_gradient, scene_gradient
from simrun.scene import load_scene

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
KEYS = ["state.x0", "state.v0", "dt", "integrator.damping", "particles.mass",
        "energy.0.params.softening", "energy.0.params.strength"]
BODY = f"""version: 1
name: native
seed: 5
particles: {{count: 12, dim: 2, mass: [1, 2, 1, 1, 3, 1, 1, 2, 1, 1, 1, 2]}}
initial: {{type: random, low: [0.2, 0.2], high: [0.8, 0.8], velocity: [0.3, -0.1]}}
energy:
  - kernel: {KERNELS}/gravity.py:gravity
    params: {{softening: 0.01, strength: 0.05}}
dt: 0.002
steps: 300
"""


@pytest.mark.parametrize("extra", [
    "precision: f64\nintegrator: {type: velocity_verlet, damping: 0.2}\n"
    "boundary: {type: reflect, low: [0.25, 0.25], high: [0.75, 0.75]}\n"
    "objective: {builtin: kinetic, at: end}\n",
    "precision: f64\nintegrator: {type: symplectic_euler, damping: 0.1}\n"
    "objective: {builtin: total, at: mean}\n",
    "precision: f32\nintegrator: {type: velocity_verlet, damping: 0.0}\n"
    "boundary: {type: periodic, low: [0, 0], high: [1, 1]}\n"
    "objective: {builtin: potential, at: end}\n",
], ids=["verlet-reflect-damped", "euler-mean-total", "f32-periodic-potential"])
def test_native_reverse_step_equals_the_engines(tmp_path, extra):
    """The reverse steps chained, again, and one by one give the same bits; forward mode
    (the engine's tangents of the same launches under FwdMode, written independently of
    the reverse plan) the same derivatives to rounding. f64: 300 steps of condition ~1e3
    (the adjoint grows that much here) times eps leave 1e-10 ample. f32: forward mode
    rounds the tangents through each step in f32 (the reverse keeps its adjoints in f64),
    ~eps32 per step: 300 steps x eps32 (6e-8) = 2e-5 bounds it."""
    path = tmp_path / "s.yaml"
    path.write_text(BODY + extra)
    scene = load_scene(path, allow_outside=True)
    native = scene_gradient(scene, KEYS, checkpoints=7, threads=1)
    again = scene_gradient(scene, KEYS, checkpoints=7, threads=1)
    with execution(native=False):
        one_by_one = scene_gradient(scene, KEYS, checkpoints=7, threads=1)
    forward = forward_gradient(scene, KEYS, threads=1)
    tol = 300 * float(np.finfo(np.float32).eps) if scene.precision == "f32" else 1e-10
    assert native.objective == one_by_one.objective
    for key in KEYS:
        np.testing.assert_array_equal(native.gradients[key], again.gradients[key])
        np.testing.assert_array_equal(native.gradients[key], one_by_one.gradients[key])
        g = np.asarray(native.gradients[key])
        assert np.all(np.isfinite(g)) and np.any(g != 0), key
        along = float(np.sum(g * forward.directions[key])) if key in forward.directions \
            else float(g)
        assert abs(along - float(forward.gradients[key])) <= tol * float(np.linalg.norm(g)), \
            (key, along, forward.gradients[key])


@pytest.mark.parametrize("extra", [
    "precision: f64\nintegrator: {type: velocity_verlet, damping: 0.2}\n"
    "boundary: {type: reflect, low: [0.25, 0.25], high: [0.75, 0.75]}\n"
    "objective: {builtin: kinetic, at: end}\n",
    "precision: f32\nintegrator: {type: symplectic_euler, damping: 0.0}\n"
    "boundary: {type: periodic, low: [0, 0], high: [1, 1]}\n"
    "objective: {builtin: total, at: end}\n",
    "precision: f64\nintegrator: {type: velocity_verlet, damping: 0.1}\n"
    "objective: {builtin: total, at: mean}\n",
], ids=["verlet-reflect-damped", "f32-euler-periodic-total", "verlet-mean-total"])
@pytest.mark.parametrize("checkpoints", [0, 7])
def test_the_schedule_does_not_change_the_gradients_bits(tmp_path, monkeypatch, extra,
                                                         checkpoints):
    """The whole schedule as native programs (adjoint/program.py: states in a slab of
    fields, forward steps, copies and reverse steps in one call) recomputes each state
    with the bits it had: no room (every state recomputed from the start) and 7 states give
    the gradient of every state stored to the last bit, after the forward steps the
    binomial formula counts; at: mean adds each state's J and seed as the sweep passes it."""
    path = tmp_path / "s.yaml"
    path.write_text(BODY.replace("steps: 300", "steps: 120") + extra)
    scene = load_scene(path, allow_outside=True)
    programs = []
    monkeypatch.setattr(NativeProgram, "gradient", _spy(NativeProgram.gradient, programs))
    seen = []
    few = scene_gradient(scene, KEYS, checkpoints=checkpoints, threads=1,
                         progress=lambda phase, k, n: seen.append((phase, k)))
    assert programs, "the native program did not run"
    reverse = [k for phase, k in seen if phase == "reverse"]  # the progress bar moves on
    assert reverse == sorted(reverse) and reverse[-1] == 120 and ("forward", 120) in seen
    every = scene_gradient(scene, KEYS, checkpoints=119, threads=1)
    assert few.objective == every.objective
    assert few.advances == schedule.forward_steps(120, checkpoints)
    assert every.advances == 119
    for key in KEYS:
        assert np.any(np.asarray(few.gradients[key]) != 0), key
        np.testing.assert_array_equal(few.gradients[key], every.gradients[key])


def test_native_program_with_two_threads_repeats_the_one_thread_bits(tmp_path):
    """grad's deterministic mode: with two threads the program (its chained launches run
    the float scatters on one thread, in order) gives the one-thread gradient to the bit."""
    path = tmp_path / "s.yaml"
    path.write_text(BODY.replace("steps: 300", "steps: 60") + "precision: f64\n"
                    "objective: {builtin: kinetic, at: end}\n")
    scene = load_scene(path, allow_outside=True)
    two = scene_gradient(scene, KEYS, checkpoints=7, threads=2)
    one = scene_gradient(scene, KEYS, checkpoints=7, threads=1)
    assert two.threads == 2 and one.threads == 1
    for key in KEYS:
        np.testing.assert_array_equal(two.gradients[key], one.gradients[key])


def _spy(method, calls: list):
    def spied(self, *args, **kwargs):
        calls.append(self)
        return method(self, *args, **kwargs)
    return spied


@pytest.mark.parametrize("checkpoints", [5, 39], ids=["5-states", "every-state"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "interpreted"])
def test_a_nan_adjoint_names_its_step(tmp_path, monkeypatch, native, checkpoints):
    """An adjoint that turns NaN stops the reverse sweep at that step, and the message
    names it (here the seed of the final state is NaN: the last step is the first
    reversed, and the error names it)."""
    path = tmp_path / "s.yaml"
    path.write_text(BODY.replace("steps: 300", "steps: 40") + "precision: f64\n"
                    "objective: {builtin: kinetic, at: end}\n")
    scene = load_scene(path, allow_outside=True)
    seed = Trajectory._seed

    def poisoned(self, adj, state, w):
        seed(self, adj, state, w)
        if w:
            adj.v[3, 1] = np.nan

    monkeypatch.setattr(Trajectory, "_seed", poisoned)
    with execution(native=native), pytest.raises(
            FloatingPointError, match=r"adjoint of the velocities became NaN or Inf at step 39 "
                                      r"\(time 0\.078\)"):
        scene_gradient(scene, KEYS, checkpoints=checkpoints, threads=1)


def test_a_stopped_program_names_the_step_of_its_reverse_row():
    """Rows: load, 3 steps, reverse (step 9), store, reverse (8), 2 steps, reverse (7): a
    stop after 1 + 3 + 1 + 1 + 1 repetitions is the reverse of step 8."""
    load, step, store, rev = 0, 2, 4, 6
    program = np.array([(load, 2, 1), (step, 2, 3), (rev, 9, 1), (store, 2, 1), (rev, 9, 1),
                        (step, 2, 2), (rev, 9, 1)])
    assert stopped_at(program, 5, rev, 9) == 9
    assert stopped_at(program, 7, rev, 9) == 8
    assert stopped_at(program, 10, rev, 9) == 7


def test_a_stopped_repeated_reverse_row_names_its_step():
    """Every state stored: one reverse row repeated (steps 9, 8, ..., 0) after a store row
    repeated; a stop after the store row's 5 and 4 of the reverse row's is step 6."""
    store, rev = 2, 6
    program = np.array([(store, 3, 5), (rev, 9, 10)])
    assert stopped_at(program, 6, rev, 9) == 9
    assert stopped_at(program, 9, rev, 9) == 6
    assert stopped_at(program, 15, rev, 9) == 0


CARRIED = '''
import simrun.lang as ti


def allocate(ctx) -> dict:
    return {"kept": ti.Vector.field(ctx.dim, dtype=ctx.dtype, shape=ctx.n)}


@ti.kernel
def advance(x: ti.template(), v: ti.template(), m: ti.template(), kept: ti.template(),
            dt: float):
    for i in x:
        kept[i] = 0.5 * kept[i] + v[i]
        v[i] += dt * (-x.grad[i] / m[i]) - 0.01 * dt * kept[i]
        x[i] += dt * v[i]
'''


def test_native_program_carries_a_vector_field_a_step_kernel_writes(tmp_path, monkeypatch):
    """A step kernel's per-particle vector field is part of every stored state: its slab
    holds vectors (it held scalars, and the program failed to compile). The program with
    few and with every state stored, and its launches one by one give the same bits."""
    (tmp_path / "mod.py").write_text(CARRIED)
    path = tmp_path / "s.yaml"
    path.write_text(BODY.replace("steps: 300", "steps: 50").replace(
        "particles: {count: 12, dim: 2, mass: [1, 2, 1, 1, 3, 1, 1, 2, 1, 1, 1, 2]}",
        "particles: {count: 6, dim: 2, mass: 1.0}") + "precision: f64\n"
        "step_kernels: {kernels: [mod.py:advance]}\nobjective: {builtin: kinetic, at: end}\n")
    scene = load_scene(path, allow_outside=True)
    keys = ["state.v0", "dt", "fields.kept"]
    programs = []
    monkeypatch.setattr(NativeProgram, "gradient", _spy(NativeProgram.gradient, programs))
    chained = scene_gradient(scene, keys, checkpoints=5, threads=1)
    assert programs, "the native program did not run"
    every = scene_gradient(scene, keys, checkpoints=49, threads=1)
    with execution(native=False):
        one_by_one = scene_gradient(scene, keys, checkpoints=5, threads=1)
    for key in keys:
        assert np.any(np.asarray(chained.gradients[key]) != 0), key
        np.testing.assert_array_equal(chained.gradients[key], every.gradients[key])
        np.testing.assert_array_equal(chained.gradients[key], one_by_one.gradients[key])
