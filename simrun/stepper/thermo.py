"""Thermo rows (energies and temperature every ``thermo`` steps) and the energy-drift check.

Small functions the step loop calls at its event steps, so the loop itself stays a loop.

Temperature is the kinetic one: T = 2 K / (dof k_B), k_B in the scene's units (1 in lj). The degrees of
freedom are dim * N, less dim when the dynamics conserves total momentum (then the centre of
mass carries no thermal energy, as in LAMMPS's ``compute temp``). Momentum is conserved when
nothing external pushes the particles: no step kernels, no damping, no reflecting walls, no
Langevin, rescaling or CSVR thermostat, and forces that sum to zero and do not change when
every particle moves alike (checked at the start: a constant field makes the first forces not
sum to zero; a tether to x0, whose first forces are all zero, changes them under the move).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simrun.outputs.thermo import DRIFT_TOLERANCE, Drift, drift_exceeds, measure_drift
from simrun.scene import Scene

_BREAKS_MOMENTUM = ("langevin", "rescale", "csvr")  # scalings change a nonzero momentum


@dataclass(frozen=True)
class Dof:
    """The degrees of freedom that the temperature divides by, and why so many."""

    count: int
    why: str


def degrees_of_freedom(scene: Scene, forces: np.ndarray, positions: np.ndarray,
                       potential: float,
                       moved: Callable[[np.ndarray], np.ndarray] | None = None) -> Dof:
    """dim * N, less dim when total momentum is conserved (see the module docstring); the
    first forces at ``positions``, where the potential energy is ``potential``; ``moved``
    (shift -> the forces with every particle moved by it) finds what the first forces
    cannot show: a tether at its rest point, whose first forces are all zero."""
    n, dim = scene.particles.count, scene.particles.dim
    full = n * dim
    if scene.step_kernels is not None:
        return Dof(full, "step kernels may push particles")
    if scene.integrator.damping:
        return Dof(full, "damping removes momentum")
    if scene.boundary.type == "reflect":
        return Dof(full, "reflecting walls change momentum")
    if scene.integrator.type in _BREAKS_MOMENTUM:
        return Dof(full, f"the {scene.integrator.type} thermostat changes momentum")
    if external_forces(forces, positions, potential, scene.precision):
        net = np.abs(np.asarray(forces, np.float64).sum(axis=0)).max(initial=0.0)
        return Dof(full, f"the first forces do not sum to zero (|sum F| = {net:.3g}): an "
                   "external field or tether")
    if n == 1:
        return Dof(full, "a single particle")
    change = _translation_change(scene, forces, positions, moved)
    if change is not None and external_forces(change, positions, potential, scene.precision):
        return Dof(full, "the forces change when every particle moves alike: a tether or a "
                   "field that varies in space")
    return Dof(full - dim, "total momentum is conserved: the centre of mass is not thermal")


RANDOM_WALK_SIGMAS = 6.0  # rounding noise's sum beyond this many standard deviations: a field


def external_forces(forces: np.ndarray, positions: np.ndarray, potential: float,
                    precision: str) -> bool:
    """Whether the first forces have a net part that no rounding explains: an external
    field or tether, not pair forces, which cancel exactly but for rounding.

    Rounding leaves each force off by about eps times the pair forces that summed to it.
    Where the forces are resolved (a fluid), that is far below the forces themselves, and a
    net force over sqrt(eps) of sum |F| (a field of g on N particles leaves N g, their
    sum) is a field. Where the pair forces cancel to their rounding (a perfect lattice:
    every F is a few eps of the pair forces, 1e-13 in LAMMPS's LJ melt), sum |F| is
    rounding too and says nothing; the net force is then a sum of N errors of random
    sign, within RANDOM_WALK_SIGMAS standard deviations, sqrt(sum F^2) per axis, of zero.
    Forces are taken to be at their rounding when moving every particle across the
    system's size (the rms distance from the centre; none for one particle) would change
    the energy per particle by less than sqrt(eps) of it: no field that weak changes what a
    run measures."""
    f = np.asarray(forces, dtype=np.float64).reshape(len(forces), -1)
    sums = np.abs(f.sum(axis=0))
    net = sums.max(initial=0.0)
    eps = _eps(precision)
    if net <= math.sqrt(eps) * np.abs(f).sum():
        return False
    size = _size(np.asarray(positions, dtype=np.float64).reshape(len(f), -1))
    rms_force = float(np.sqrt((f ** 2).sum(axis=1).mean()))
    at_rounding = size > 0 and rms_force * size <= math.sqrt(eps) * abs(potential) / len(f)
    random_walk = np.all(sums <= RANDOM_WALK_SIGMAS * np.sqrt((f ** 2).sum(axis=0)))
    return not (at_rounding and random_walk)


def _translation_change(scene: Scene, forces: np.ndarray, positions: np.ndarray,
                        moved: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray | None:
    """F(x + a) - F(x) for a uniform move a (Noether: momentum is conserved where U does not
    change under it, and then neither do the forces, but for rounding). |a| is 10 sqrt(eps)
    of the system's size, far above the positions' rounding and, with a neighbour list, at
    most a quarter of its skin (no rebuild)."""
    x = np.asarray(positions, dtype=np.float64)
    size = _size(x)
    if moved is None or size == 0:
        return None
    eps = _eps(scene.precision)
    step = 10 * math.sqrt(eps) * size
    if scene.neighbors is not None:
        step = min(step, 0.25 * float(scene.neighbors.skin))
    shift = np.full(x.shape[1], step / math.sqrt(x.shape[1]))
    return moved(shift) - np.asarray(forces, dtype=np.float64)


def _eps(precision: str) -> float:
    return float(np.finfo(np.float32 if precision == "f32" else np.float64).eps)


def _size(x: np.ndarray) -> float:
    """The system's size: the rms distance of the particles (rows of ``x``) from their
    centre."""
    return float(np.sqrt(((x - x.mean(axis=0)) ** 2).sum(axis=1).mean()))


def temperature(kinetic: float, dof: int, boltz: float = 1.0) -> float:
    """T = 2 K / (dof k_B) (k_B = 1 in lj and reduced units; K in real, metal, si)."""
    return 2.0 * kinetic / (dof * boltz) if dof > 0 else 0.0


def thermo_due(step: int, every: int, total: int) -> bool:
    """Rows at step 0, every ``every`` steps, and at the last step."""
    return step % every == 0 or step == total


def conservative(scene: Scene) -> bool:
    """Should the total energy stay constant? (not with damping, step kernels, thermostats,
    or a controller, which does work on the system)"""
    return (scene.step_kernels is None and scene.controller is None
            and scene.integrator.damping == 0 and not scene.integrator.thermostat)


def checked_quantity(scene: Scene) -> str | None:
    """Which thermo.csv column the drift check watches: the total energy of a conservative
    run, the extended energy of a Nosé-Hoover run; None for the others."""
    if conservative(scene):
        return "total"
    return "conserved" if scene.integrator.type == "nose_hoover" else None


@dataclass
class DriftCheck:
    """The drift check's verdict, as run.json records it."""

    drift: Drift
    tolerance: float
    exceeded: bool

    def as_dict(self) -> dict:
        return {**self.drift.as_dict(), "tolerance": self.tolerance, "exceeded": self.exceeded}

    def warning(self, dt: float, hint: bool = True) -> str:
        """One line for stderr: the numbers and what to try."""
        d = self.drift
        what = "total energy" if d.quantity == "total" else "Nosé-Hoover conserved energy"
        return (f"warning: the {what} drifted by {d.worst:+.3g} relative to {d.scale_name} "
                f"(largest, at step {d.step_of_largest}; final {d.final:+.3g}; from "
                f"{d.first:.6g} to {d.last:.6g}), beyond the tolerance {self.tolerance:g}: "
                f"the run is not conserving energy. Try a smaller dt (now {dt:g})"
                + ("; --max-drift X makes this an error" if hint else ""))


def check_drift(scene: Scene, columns: dict[str, np.ndarray],
                tolerance: float = DRIFT_TOLERANCE) -> DriftCheck | None:
    """Measure the drift of the run's thermo rows (None when the run need not conserve)."""
    quantity = checked_quantity(scene)
    drift = measure_drift(columns, quantity) if quantity else None
    if drift is None:
        return None
    return DriftCheck(drift, tolerance, drift_exceeds(drift, tolerance))
