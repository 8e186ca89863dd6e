"""What a step's updates are, as data: the integrator's or thermostat's update kernels with
their arguments, in two stages around the new forces, and which KEY each scalar argument is.

The two stages are nodes of the scene's `StepProgram` (program.py, the only caller of
`build_plan`, which puts them in the step's order). `fieldstep.FieldStepper` chains these
launches for `run`; the adjoint (`adjoint/trajectory.py`) differentiates the very same
launches by the engine's reverse and forward modes, with each scalar named in
``Update.keys`` read from a 0-D field when its KEY is differentiated: a new integrator or
thermostat is new entries here, and its gradient comes with them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import simrun.lang as ti
from simrun.scene.schema import Scene
from simrun.stepper import thermostats as nvt
from simrun.stepper import updates

TEMPERATURE, FRICTION, TAU = "integrator.temperature", "integrator.friction", "integrator.tau"
DAMPING = "integrator.damping"


@dataclass
class Update:
    """One launch: `kernel(*args)`; `keys` maps a float scalar parameter's name to (KEY, d
    value / d KEY), e.g. velocity Verlet's h = dt/2: {"h": ("dt", 0.5)}."""

    kernel: Any
    args: tuple
    keys: dict[str, tuple[str, float]] = field(default_factory=dict)


@dataclass
class UpdatePlan:
    first: list[Update]  # after the forces at x_k
    second: list[Update]  # after the forces at x_(k+1)
    scratch: tuple = ()  # the per-step scalars a gradient differentiates (Scratch.K, .scale)


class Scratch:
    """Per-step scalars the thermostats pass between their launches (f64, 0-D): the kinetic
    energy, the chi-square draw and the velocities' scale. A gradient gives K and scale
    adjoints and tangents (`UpdatePlan.scratch`); the noise S has no derivative."""

    def __init__(self) -> None:
        self.K, self.scale, self.S = (ti.field(ti.f64, shape=()) for _ in range(3))


def plan_differs(scene: Scene, differentiated: frozenset[str]) -> bool:
    """Whether differentiating with respect to `differentiated` changes the scene's update
    launches from `run`'s: the damping term kept at damping 0, where its derivative is
    still there (`build_plan`)."""
    return DAMPING in differentiated and scene.integrator.damping == 0


def build_plan(scene: Scene, system, box, differentiated: frozenset[str] | None = None
               ) -> UpdatePlan:
    """The scene's update launches on `system`'s fields; `box` is the walls' bounds field,
    `differentiated` the KEYs a gradient is taken with respect to (None: `run`'s plan; the
    damping term stays in at damping 0 when its KEY is differentiated, where its derivative
    is still there)."""
    wall = updates.WALLS[scene.boundary.type]
    x, v, m = system.x, system.v, system.m
    if scene.step_kernels is not None:  # the scene's own kernels step; the walls after them
        walls = [Update(updates.walls, (x, v, box, wall))] if wall != updates.NO_WALL else []
        return UpdatePlan(walls, [])
    integ, dt = scene.integrator, scene.dt
    if integ.type == "langevin":
        return _langevin(scene, system, box, wall)
    if not integ.thermostat:
        damping = integ.damping
        damped = damping != 0 or DAMPING in (differentiated or ())
        if integ.type == "symplectic_euler":
            return UpdatePlan([_kick_drift(system, box, wall, 1.0, dt, damping, damped)], [])
        return UpdatePlan([_kick_drift(system, box, wall, 0.5, dt, damping, damped)],
                          [_kick(system, dt, damping, damped)])
    scratch = Scratch()
    first = [_kick_drift(system, box, wall, 0.5, dt, 0.0, False)]
    kinetic = [Update(updates.zero, (scratch.K,)), Update(nvt.kinetic, (v, m, scratch.K))]
    second = [_kick(system, dt, 0.0, False), *kinetic]
    extra, kT, boltz = system.extra, scene.kT, scene.constants.boltz
    clock, dof = extra["nvt_clock"], extra["nvt_dof"]
    scale = Update(nvt.scale_velocities, (v, scratch.scale))
    if integ.type == "nose_hoover":
        half = [*kinetic,
                Update(nvt.chain_half, (scratch.K, extra["nvt_xi"], extra["nvt_vxi"],
                                        scratch.scale, dof, dt, kT, float(integ.tau),
                                        int(integ.chain or 1)),
                       {"dt": ("dt", 1.0), "kT": (TEMPERATURE, boltz), "tau": (TAU, 1.0)}),
                scale]
        return UpdatePlan(half + first, [second[0]] + half, (scratch.K, scratch.scale))
    if integ.type == "rescale":
        second += [Update(nvt.rescale_factor, (scratch.K, scratch.scale, clock, dof, kT,
                                               int(integ.every)), {"kT": (TEMPERATURE, boltz)})]
    else:  # csvr
        key = nvt.noise_key(scene) ^ nvt.CSVR_STREAM
        second += [Update(updates.zero, (scratch.S,)),
                   Update(nvt.chi_square, (scratch.S, clock, dof, key)),
                   Update(nvt.csvr_factor, (scratch.K, scratch.S, scratch.scale, clock, dof,
                                            dt, kT, float(integ.tau), key),
                          {"dt": ("dt", 1.0), "kT": (TEMPERATURE, boltz), "tau": (TAU, 1.0)})]
    return UpdatePlan(first, second + [scale, Update(nvt.tick, (clock,))],
                      (scratch.K, scratch.scale))


def _kick_drift(system, box, wall: int, half: float, dt: float, damping: float,
                damped: bool) -> Update:
    return Update(updates.kick_drift, (system.x, system.v, system.m, box, half * dt, dt,
                                       damping, wall, damped),
                  {"h": ("dt", half), "dt": ("dt", 1.0), "damping": (DAMPING, 1.0)})


def _kick(system, dt: float, damping: float, damped: bool) -> Update:
    return Update(updates.kick, (system.x, system.v, system.m, 0.5 * dt, damping, damped),
                  {"h": ("dt", 0.5), "damping": (DAMPING, 1.0)})


def _langevin(scene: Scene, system, box, wall: int) -> UpdatePlan:
    integ, clock = scene.integrator, system.extra["nvt_clock"]
    baoa = Update(nvt.baoa, (system.x, system.v, system.m, box, clock, scene.dt,
                             float(integ.friction), scene.kT, nvt.noise_key(scene), wall),
                  {"dt": ("dt", 1.0), "friction": (FRICTION, 1.0),
                   "kT": (TEMPERATURE, scene.constants.boltz)})
    return UpdatePlan([baoa], [_kick(system, scene.dt, 0.0, False),
                               Update(nvt.tick, (clock,))])
