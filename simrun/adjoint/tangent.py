"""Forward mode (tangents) along a trajectory: J, dJ along one direction, and the
sensitivity horizon dJ(t)/dp. A step's tangent is the engine's forward mode of the step's
own launches (the ones reverse_step.py reverses), put in order once and made as one native
call (or one by one, stepper/launches.py):

    duals seeded: x, v, the masses, the carried fields, the differentiated scalars (dt,
        damping, a thermostat's or step kernel's parameters), the energies' parameters
    [controller(k), forward mode]; G = dU/dx and its tangent (the energies' forward and
        forward-over-reverse launches: H xdot + the mixed terms, every seed in one pass)
    first stage, forward mode; [G2 and its tangent at x_(k+1); second stage, forward mode]

The state itself moves on by `run`'s stepper (the trajectory's `advance`), so J is `run`'s.
"""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.adjoint.kernel_state import Tangent
from simrun.adjoint.policy import current
from simrun.stepper import updates
from simrun.stepper.energy import energy_and_reverse
from simrun.stepper.launches import Rows, StepCall, assign, resolve
from simrun.stepper.program import CONTROLLER, FORCES
from simrun.stepper.state import State


def _under_forward_mode(system, call):
    """`call` as a Python launch inside forward mode (the masses the mode's nominal
    parameter, their seed kept: every dual is already seeded)."""
    def launch() -> None:
        seed = system.m.dual.to_numpy()
        with ti.ad.FwdMode(loss=system.U, param=system.m, seed=seed, clear_gradients=False):
            call()
        system.m.dual.from_numpy(seed)
    return launch


class TangentStep:
    """The forward-mode launches of a trajectory's step (see the module docstring)."""

    def __init__(self, traj) -> None:
        self.traj = traj
        system, model = traj.system, traj.model
        self.system = system
        self.terms = system.energy_terms() if system.energy else None
        self.hvp = model.hessian_vector() if system.energy else None
        self.step = Rows(traj.program.walk(self._node), current().native)
        self.energy = Rows(self._tangent_of_forces(traj.G), current().native)
        self.field_values = traj.scalar_field_values()

    def _node(self, node) -> list:
        """A node of the trajectory's step program in forward mode: the forces at x_k too
        (the state carries G, not its tangent), those at x_(k+1) where a stage reads them;
        no neighbour check and no NaN watch."""
        traj = self.traj
        if node.kind == CONTROLLER:
            return [self._forward(b) for b in self.system.controller]
        if node.kind == FORCES:
            if not node.read_in_step:
                return []
            G = traj.slots[node.slot]
            return self._tangent_of_forces(G) + [resolve(updates.zero, (f.dual,))
                                                 for f in traj.scratch]
        plan = []
        for bound in traj.made.get(id(node), ()):
            with traj.compiled_as_run(bound):
                plan.append(self._forward(bound))
        return plan

    def _forward(self, bound):
        """A launch in forward mode (a controller's twin reads `step` from the trajectory's
        step field; made from Python, it is given the field's value)."""
        found = getattr(bound.kernel, "prepare", None) and bound.kernel.prepare(bound.args, "fwd")
        if not found or found[2] or found[0].uses_random or found[0].ndarray_slots:
            call = StepCall(bound, "primal", self.traj.step_field)
            return _under_forward_mode(self.system, call)
        return found[0], list(found[1])

    def _tangent_of_forces(self, G) -> list:
        """G = dU/dx and G.dual its tangent along every seeded dual, U.dual U's."""
        system, fp, R = self.system, self.system.fp, resolve
        if self.terms is None:
            return [R(updates.zero, (G,)), R(updates.zero, (G.dual,))]
        if self.hvp is None or not self.hvp.usable():
            return [_under_forward_mode(system, self._fallback_pass), R(assign, (
                system.x.grad, G, fp)), R(assign, (system.x.grad.dual, G.dual, fp))]
        seeds = {id(f.dual) for f in [system.x, system.v, system.m, *self.traj.floats.values(),
                                      *self.traj.model.param_fields.values()]
                 if getattr(f, "dual", None) is not None}
        plan = [R(updates.zero, (f,)) for f in self.hvp.zero_fields if id(f) not in seeds]
        plan.append(R(updates.reset_loss, (system.U,)))  # U.dual: among the zero fields
        plan += self.hvp.launches()
        return plan + [R(assign, (system.x.grad, G, fp)),
                       R(assign, (system.x.grad.dual, G.dual, fp))]

    def _fallback_pass(self) -> None:
        """The energies' pass from Python (an energy bringing its own gradient)."""
        system = self.system
        for g in list(self.terms.touched_grads) + [system.m.grad]:
            g.fill(0)
            if getattr(g, "dual", None) is not None:
                g.dual.fill(0)
        system.U.dual.fill(0)
        energy_and_reverse(system.U, system.energy)

    def seed(self, state: State, tan: Tangent, fields_dot: dict) -> None:
        """The state and every tangent into the fields."""
        traj, system, dtype = self.traj, self.system, self.system.np_dtype
        traj._load(state)
        for f, value in self.field_values:  # the values a Python launch would write
            f.data[()] = value
        if self.terms is not None:
            self.terms.set_field_args()
        system.x.dual.from_numpy(tan.x.astype(dtype))
        system.v.dual.from_numpy(tan.v.astype(dtype))
        system.m.dual.from_numpy(tan.mass.astype(dtype))
        for n, f in traj.floats.items():
            f.dual.from_numpy(np.asarray(fields_dot[n]).astype(f.to_numpy().dtype))
        traj.model.seed_param_duals(tan.params)
        scalars = traj.scalars + [(k, f, 1.0) for k, f in traj.control_params]
        for key, f, factor in scalars:
            f.dual[None] = factor * tan.scalar(key)

    def run(self, state: State, tan: Tangent, fields_dot: dict
            ) -> tuple[np.ndarray, np.ndarray, dict]:
        """(xdot, vdot, the carried fields' tangents) after step `state.step`."""
        self.seed(state, tan, fields_dot)
        self.traj.step_field[None] = state.step
        self.step.run()
        system = self.system
        return (system.x.dual.to_numpy().astype(float), system.v.dual.to_numpy().astype(float),
                {n: f.dual.to_numpy().astype(float) for n, f in self.traj.floats.items()})

    def energy_tangent(self, state: State, tan: Tangent, fields_dot: dict) -> float:
        """U's tangent at `state`."""
        self.seed(state, tan, fields_dot)
        self.energy.run()
        return float(self.system.U.dual[None]) if self.terms is not None else 0.0


def kernel_tangent_sweep(traj, state0: State, steps: int, tan: Tangent,
                         fields_dot: dict, every: int
                         ) -> tuple[float, float, list[tuple[int, float, float]]]:
    """J, dJ along `tan` (and `fields_dot`, tangents of the allocated fields), and (step,
    J(t), dJ(t)) every `every` steps."""
    fdot = {n: np.asarray(fields_dot.get(n, np.zeros(f.shape + tuple(f.elem_shape))), float)
            for n, f in traj.floats.items()}
    tangent = traj.tangent_step()
    state, total, dtotal, series = state0, 0.0, 0.0, []
    for k in range(steps):
        xdot, vdot, fdot = tangent.run(state, tan, fdot)
        state = traj.advance(state, k)
        tan = Tangent(xdot, vdot, tan.mass, tan.dt, tan.damping, tan.params)
        udot = tangent.energy_tangent(state, tan, fdot) if traj.model.objective.uses_potential else 0.0
        j, dj = _objective_tangent(traj, state, xdot, vdot, tan, udot)
        dj += _objective_field_tangent(traj, state, fdot)
        w = traj._weight(k + 1, steps)
        total, dtotal = total + w * j, dtotal + w * dj
        if (k + 1) % every == 0 or k + 1 == steps:
            series.append((k + 1, total * steps / (k + 1) if traj.at_mean else j,
                           dtotal * steps / (k + 1) if traj.at_mean else dj))
        traj.progress("forward", k + 1, steps)
    return total, dtotal, series


def _objective_field_tangent(traj, state: State, fdot: dict) -> float:
    """dJ along the field tangents, for an objective kernel that reads allocated fields
    (objective.gradient just ran its Tape, so the fields' .grad hold dJ/dfield)."""
    if traj.scene.objective.kernel is None:
        return 0.0
    return float(sum(np.sum(f.grad.to_numpy() * fdot[n]) for n, f in traj.floats.items()))


def _objective_tangent(traj, state: State, xdot, vdot, tan: Tangent,
                       udot: float) -> tuple[float, float]:
    """J at the state and its derivative along the tangents (udot: U's, for objectives
    that read the potential)."""
    model = traj.model
    j = model.objective.value(state.x, state.v, state.potential, state.step)
    dx, dv, dm, dp = model.objective.gradient(state.x, state.v, state.step)
    dj = float(np.sum(dx * xdot) + np.sum(dv * vdot) + np.sum(dm * tan.mass))
    dj += sum(val * tan.params.get(k, 0.0) for k, val in dp.items())
    if model.objective.uses_potential:
        dj += udot
    return j, dj
