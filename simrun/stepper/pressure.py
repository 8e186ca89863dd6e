"""Pressure by autodiff of U with respect to a box scale.

Scaling the periodic box and every position about ``box_low`` by s changes U at the rate
dU/ds = sum_i (x_i - low) . dU/dx_i + L . dU/dL, both read from one reverse pass of the
energy terms bound to a box with gradients (the kernels fold separations with ``min_image``,
which is differentiable in the box; the stepper's own force pass skips dU/dL, which costs). The L term is what a virial sum over wrapped positions misses. Then
P = (2 K - dU/ds) / (dim V), the instantaneous pressure LAMMPS reports (dof k T = 2 K).
"""

from __future__ import annotations

import numpy as np

from simrun.stepper.integrators import kinetic_energy
from simrun.stepper.system import System


def box_derivative(system: System) -> float:
    """dU/ds at the current x (one primal and reverse pass of the energy terms, bound to a
    box with gradients)."""
    if system.scene.boundary.type != "periodic":
        raise ValueError("the pressure needs a periodic box (boundary: {type: periodic})")
    terms, box = system.energy_with_box_gradient()
    system.refresh_neighbors()
    with system.ti.ad.Tape(loss=system.U):
        for kernel in terms:
            kernel()
    low = np.asarray(system.scene.boundary.low, float)
    length = np.asarray(system.scene.boundary.high, float) - low
    x = system.x.to_numpy().astype(float)
    dudx = system.x.grad.to_numpy().astype(float)
    dudl = box["box_high"].grad.to_numpy().astype(float)
    return float(np.sum((x - low) * dudx) + np.dot(length, dudl))


def pressure(system: System, v: np.ndarray) -> float:
    """Instantaneous pressure (kinetic + configurational) at the system's x and velocities v."""
    bounds = system.scene.boundary
    volume = float(np.prod(np.asarray(bounds.high, float) - np.asarray(bounds.low, float)))
    dim = system.scene.particles.dim
    return (2.0 * kinetic_energy(v, system.masses) - box_derivative(system)) / (dim * volume)


def pressure_record(system: System, step: int, v: np.ndarray) -> dict[str, float] | None:
    """``{"step", "pressure"}`` for run.json, for a periodic scene with energy terms."""
    if system.scene.boundary.type != "periodic" or not system.scene.energy:
        return None
    return {"step": step, "pressure": pressure(system, v)}
