"""Time integration: symplectic Euler (exactly the reference's ``v += dt * F / m; x += dt *
v``), velocity Verlet, damping and walls, or a scene's own step kernels (MPM), all as engine
launches on the system's fields (`fieldstep.FieldStepper`, `updates.py`).

``make_step`` gives the one-step function the adjoint's sweeps use on `State` objects; `run`
drives the FieldStepper directly, many steps per native call.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simrun.scene.schema import Scene
from simrun.stepper.fieldstep import FieldStepper
from simrun.stepper.state import State
from simrun.stepper.system import System

StepFn = Callable[[State], None]

__all__ = ["State", "StepFn", "kinetic_energy", "make_step"]


def kinetic_energy(v: np.ndarray, masses: np.ndarray) -> float:
    """0.5 * sum m |v|^2, accumulated in float64."""
    v64 = v.astype(np.float64)
    return float(0.5 * np.sum(masses.astype(np.float64) * np.sum(v64 * v64, axis=1)))


def make_step(scene: Scene, system: System) -> StepFn:
    """state -> the state one step later, in place (through the fields: load, step, store).
    A step that ends NaN or infinite still completes; the caller checks."""
    stepper = FieldStepper(scene, system)

    def step(state: State) -> None:
        stepper.load(state)
        stepper.advance(1)
        stepper.store(state)

    step.stepper = stepper  # type: ignore[attr-defined]
    return step
