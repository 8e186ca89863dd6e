"""Time integration in NumPy around autodiff forces: symplectic Euler (exactly the reference's
``v += dt * F / m; x += dt * v``), velocity Verlet, damping, boundaries, and the
"step kernels" path for scenes with their own dynamics (MPM).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simrun.scene.schema import Boundary, Scene
from simrun.stepper.system import System


@dataclass
class State:
    """The integrator's state after ``step`` steps; ``f`` and ``potential`` are at ``x``."""

    step: int
    x: np.ndarray
    v: np.ndarray
    f: np.ndarray
    potential: float


StepFn = Callable[[State], None]


def apply_boundary(boundary: Boundary, x: np.ndarray, v: np.ndarray) -> None:
    """Reflect (mirror position, flip velocity) or wrap (periodic) in place."""
    if boundary.type == "none":
        return
    low = np.asarray(boundary.low, dtype=x.dtype)
    high = np.asarray(boundary.high, dtype=x.dtype)
    if boundary.type == "periodic":
        x[...] = low + np.mod(x - low, high - low)
        return
    below, above = x < low, x > high
    if below.any() or above.any():
        x[...] = np.where(below, 2 * low - x, np.where(above, 2 * high - x, x))
        v[...] = np.where(below | above, -v, v)


def kinetic_energy(v: np.ndarray, masses: np.ndarray) -> float:
    """0.5 * sum m |v|^2, accumulated in float64."""
    v64 = v.astype(np.float64)
    return float(0.5 * np.sum(masses.astype(np.float64) * np.sum(v64 * v64, axis=1)))


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
        inner = step_kernels(scene, system)
    elif scene.integrator.type == "velocity_verlet":
        inner = velocity_verlet(scene, system)
    else:
        inner = symplectic_euler(scene, system)
    return inner if not system.controller else controlled(system, inner)


def controlled(system: System, inner: StepFn) -> StepFn:
    """Each step: the controller kernels see the state (x, v, step index) and write the
    fields the energy terms read (e.g. actuations), the forces are taken again, then the
    integrator steps."""

    def step(state: State) -> None:
        system.set_state(state.x, state.v)
        system.control(state.step)
        state.potential, state.f = system.forces()
        inner(state)

    return step
