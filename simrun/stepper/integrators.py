"""Time integration: symplectic Euler (exactly the reference's ``v += dt * F / m; x += dt *
v``), velocity Verlet, damping and walls, or a scene's own step kernels (MPM), all as engine
launches on the system's fields: the updates are kernels in `updates.py`, the step and its
native loop `fieldstep.FieldStepper`, which `run` and the adjoint's sweeps drive.
"""

from __future__ import annotations

import numpy as np

from simrun.stepper.state import State

__all__ = ["State", "kinetic_energy"]


def kinetic_energy(v: np.ndarray, masses: np.ndarray) -> float:
    """0.5 * sum m |v|^2, accumulated in float64."""
    v64 = v.astype(np.float64)
    return float(0.5 * np.sum(masses.astype(np.float64) * np.sum(v64 * v64, axis=1)))
