"""The adjoints and the tangents of a scene's trajectory (shared by the trajectory,
trajectory.py, the reverse step, reverse_step.py, and forward mode, tangent.py); the state
itself is `stepper.state.State`, the one state type of `run` and `grad`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simrun.stepper.plan import DAMPING


@dataclass
class KernelAdjoint:
    """Adjoints of the state (x, v, fields) and the accumulated parameter adjoints."""

    x: np.ndarray
    v: np.ndarray
    fields: dict[str, np.ndarray]
    mass: np.ndarray
    dt: float = 0.0
    damping: float = 0.0  # the integrator's damping (integrator.damping), when differentiated
    params: dict[str, float] = field(default_factory=dict)

    def add_params(self, values: dict[str, float], sign: float = 1.0) -> None:
        for k, val in values.items():
            self.params[k] = self.params.get(k, 0.0) + sign * val

    def add_scalar(self, key: str, value: float) -> None:
        """Add to the adjoint of a scalar the steps read: dt, the damping or a parameter."""
        if key == "dt":
            self.dt += value
        elif key == DAMPING:
            self.damping += value
        else:
            self.add_params({key: value})


@dataclass
class Tangent:
    """Tangents of the state and of the parameters along one direction."""

    x: np.ndarray
    v: np.ndarray
    mass: np.ndarray
    dt: float = 0.0
    damping: float = 0.0
    params: dict[str, float] = field(default_factory=dict)  # energy and objective KEYs

    def scalar(self, key: str) -> float:
        """The tangent of a scalar the steps read: dt, the damping or a parameter."""
        return self.dt if key == "dt" else (
            self.damping if key == DAMPING else self.params.get(key, 0.0))
