"""The NumPy integrators simrun used before its steps became engine launches (git 8554018),
kept as the reference the field stepper is tested against: time integration in NumPy around autodiff forces: symplectic Euler (exactly the reference's
``v += dt * F / m; x += dt * v``), velocity Verlet, damping, boundaries, and the
"step kernels" path for scenes with their own dynamics (MPM).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simrun.scene.schema import Scene
from simrun.stepper.integrators import apply_boundary
from simrun.stepper.state import State
from simrun.stepper.system import System

StepFn = Callable[[State], None]


def _kick(state: State, masses: np.ndarray, damping: float, h: float) -> None:
    """v += h * (F/m - damping * v), in place (h * a and a * h are the same bits)."""
    acc = state.f / masses
    if damping:
        acc = acc - damping * state.v
    acc *= h
    state.v += acc


def _refresh_forces(state: State, system: System) -> None:
    system.x.from_numpy(state.x)
    state.potential, state.f = system.forces()


def symplectic_euler(scene: Scene, system: System) -> StepFn:
    """v += dt * F / m; x += dt * v (the reference's ``advance``), then F at the new x."""
    dt, damping = scene.dt, scene.integrator.damping
    masses = system.masses[:, None]

    def step(state: State) -> None:
        _kick(state, masses, damping, dt)
        state.x += dt * state.v
        apply_boundary(scene.boundary, state.x, state.v)
        _refresh_forces(state, system)

    return step


def velocity_verlet(scene: Scene, system: System) -> StepFn:
    """Kick (dt/2), drift (dt), new forces, kick (dt/2): one force evaluation per step."""
    dt, damping = scene.dt, scene.integrator.damping
    masses, half = system.masses[:, None], 0.5 * scene.dt

    def step(state: State) -> None:
        _kick(state, masses, damping, half)
        state.x += dt * state.v
        apply_boundary(scene.boundary, state.x, state.v)
        _refresh_forces(state, system)
        _kick(state, masses, damping, half)

    return step


def step_kernels(scene: Scene, system: System) -> StepFn:
    """The scene's own kernels advance x and v (x.grad already holds dU/dx at x)."""

    def step(state: State) -> None:
        for kernel in system.step_kernels:
            kernel()
        state.x, state.v = system.get_state()
        if scene.boundary.type != "none":
            apply_boundary(scene.boundary, state.x, state.v)
            system.set_state(state.x, state.v)
        state.potential, state.f = system.forces()

    return step


def make_step(scene: Scene, system: System) -> StepFn:
    if scene.step_kernels is not None:
        return step_kernels(scene, system)
    if scene.integrator.type == "velocity_verlet":
        return velocity_verlet(scene, system)
    return symplectic_euler(scene, system)
