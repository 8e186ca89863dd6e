"""Forward mode (tangents) along a trajectory: J, dJ along one direction, and the
sensitivity horizon dJ(t)/dp. Each step's tangent is the engine's forward mode of the step's
launches (`KernelTrajectory.tangent_step`: the update kernels under FwdMode, the forces'
tangent by forward-over-reverse), for every kind of scene."""

from __future__ import annotations

import numpy as np

from simrun.adjoint.kernel_state import KernelState, Tangent
from simrun.adjoint.kernel_sweep import KernelTrajectory


def kernel_tangent_sweep(traj: KernelTrajectory, state0: KernelState, steps: int, tan: Tangent,
                         fields_dot: dict, every: int
                         ) -> tuple[float, float, list[tuple[int, float, float]]]:
    """Forward mode for step-kernel scenes (as sweep.tangent_sweep): J, dJ along `tan` (and
    `fields_dot`, tangents of the allocated fields), and (step, J(t), dJ(t)) every `every`."""
    fdot = {n: np.asarray(fields_dot.get(n, np.zeros(f.shape + tuple(f.elem_shape))), float)
            for n, f in traj.floats.items()}
    state, total, dtotal, series = state0, 0.0, 0.0, []
    for k in range(steps):
        xdot, vdot, fdot, _ = traj.tangent_step(state, tan, fdot)
        state = traj.advance(state, k)
        tan = Tangent(xdot, vdot, tan.mass, tan.dt, tan.damping, tan.params)
        udot = traj._force_tangent(state, tan, fdot)[1] if traj.model.uses_potential() else 0.0
        j, dj = _objective_tangent(traj, state, xdot, vdot, tan, udot)
        dj += _objective_field_tangent(traj, state, fdot)
        w = traj._weight(k + 1, steps)
        total, dtotal = total + w * j, dtotal + w * dj
        if (k + 1) % every == 0 or k + 1 == steps:
            series.append((k + 1, total * steps / (k + 1) if traj.at_mean else j,
                           dtotal * steps / (k + 1) if traj.at_mean else dj))
        traj.progress("forward", k + 1, steps)
    return total, dtotal, series


def _objective_field_tangent(traj: KernelTrajectory, state: KernelState, fdot: dict) -> float:
    """dJ along the field tangents, for an objective kernel that reads allocated fields
    (objective_grad just ran its Tape, so the fields' .grad hold dJ/dfield)."""
    if traj.scene.objective.kernel is None:
        return 0.0
    return float(sum(np.sum(f.grad.to_numpy() * fdot[n]) for n, f in traj.floats.items()))


def _objective_tangent(traj: KernelTrajectory, state: KernelState, xdot, vdot, tan: Tangent,
                       udot: float) -> tuple[float, float]:
    """J at the state and its derivative along the tangents (udot: U's, for objectives
    that read the potential)."""
    model = traj.model
    j = model.objective(state.x, state.v, state.potential, state.step)
    dx, dv, dm, dp = model.objective_grad(state.x, state.v, state.step)
    dj = float(np.sum(dx * xdot) + np.sum(dv * vdot) + np.sum(dm * tan.mass))
    dj += sum(val * tan.params.get(k, 0.0) for k, val in dp.items())
    if model.uses_potential():
        dj += udot
    return j, dj
