"""Time integration: symplectic Euler (exactly the reference's ``v += dt * F / m; x += dt *
v``), velocity Verlet, damping and walls, or a scene's own step kernels (MPM), all as engine
launches on the system's fields: the updates are kernels in `updates.py`, the step and its
native loop `fieldstep.FieldStepper`, which `run` and the adjoint's sweeps drive.
"""

from __future__ import annotations

import numpy as np

from simrun.scene.schema import Boundary
from simrun.stepper.state import State

__all__ = ["State", "apply_boundary", "kinetic_energy"]


def kinetic_energy(v: np.ndarray, masses: np.ndarray) -> float:
    """0.5 * sum m |v|^2, accumulated in float64."""
    v64 = v.astype(np.float64)
    return float(0.5 * np.sum(masses.astype(np.float64) * np.sum(v64 * v64, axis=1)))


def apply_boundary(boundary: Boundary, x: np.ndarray, v: np.ndarray) -> None:
    """Reflect (mirror position, flip velocity) or wrap (periodic) in place: NumPy, for
    states outside the fields (the kernel adjoint's replay; `updates.walls` in a step)."""
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
