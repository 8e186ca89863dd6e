"""The reverse sweep of plain integrator scenes as native programs: the forward sweep is
`run`'s own step (so `grad` sees the same numbers), the reverse step one chain of launches
(reverse.py), the whole checkpoint schedule native programs where the objective reads only
the end state (program.py). H lambda comes from the engine (forward over reverse), never
finite differences.

Velocity Verlet, v1 = v + h/2 a(x, v), x' = x + h v1, v' = v1 + h/2 a(x', v1) with
a = F/m - damping v, has F at x' in both its own last kick and the next step's first kick, so
the reverse sweep folds both into one H lambda per step (the adjoint's ``pending``).

Everything else (the interpreted policy, energies whose launches cannot be chained, forward
mode) is the engine's reverse or forward mode of the same update kernels (integrated.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simrun.adjoint import policy, schedule
from simrun.adjoint.model import DiffModel
from simrun.adjoint.program import NativeProgram
from simrun.adjoint.reverse import NativeReverse
from simrun.stepper.integrators import State


class ObjectiveSum:
    """J summed along a trajectory, shared by the sweeps of integrator scenes (`Trajectory`)
    and of step-kernel scenes (`kernel_sweep.KernelTrajectory`): they bring ``advance``,
    ``model``, ``at_mean`` and ``progress``."""

    def _weight(self, k: int, steps: int) -> float:
        """The objective's weight on the state after k steps (end: the last; mean: 1/n each)."""
        if self.at_mean:
            return 1.0 / steps if k >= 1 else 0.0
        return 1.0 if k == steps else 0.0

    def objective(self, state0, steps: int) -> float:
        """J of the trajectory (the forward sweep, nothing stored)."""
        total, state = [0.0], state0
        for k in range(steps):
            state = self.advance(state, k)
            self._accumulate(total, state, steps)
        return total[0]

    def _accumulate(self, total: list, state, steps: int) -> None:
        w = self._weight(state.step, steps)
        if w:
            total[0] += w * self.model.objective(state.x, state.v, state.potential, state.step)
        self.progress("forward", state.step, steps)


@dataclass
class Adjoint:
    """Adjoints of the step's inputs and the accumulated parameter adjoints."""

    x: np.ndarray
    v: np.ndarray
    pending: np.ndarray  # dJ/dF at the current step's start position, not yet through H
    dt: float = 0.0
    damping: float = 0.0
    mass: np.ndarray | None = None
    params: dict[str, float] = field(default_factory=dict)

    def add_params(self, values: dict[str, float], sign: float = 1.0) -> None:
        for k, val in values.items():
            self.params[k] = self.params.get(k, 0.0) + sign * val


def _copy(state: State) -> State:
    return State(state.step, state.x.copy(), state.v.copy(), state.f.copy(), state.potential)


class Trajectory(ObjectiveSum):
    """Steps, objective and reverse sweep of one scene on a DiffModel."""

    def __init__(self, model: DiffModel, progress: Callable[[str, int, int], None] | None = None):
        self.model = model
        self.scene = scene = model.scene
        self.stepper = model.stepper
        self.h, self.gamma = scene.dt, scene.integrator.damping
        self.m = np.asarray(model.system.masses, float)[:, None]
        self.at_mean = scene.objective.at == "mean"
        self.progress = progress or (lambda *_: None)
        self.need_energy_grads = False  # dU/dm, dU/dp at seeded states (potential objectives)

    def start(self, x0: np.ndarray, v0: np.ndarray) -> State:
        system = self.model.system
        system.set_state(x0, v0)
        x, v = system.get_state()
        potential, f = system.forces()
        return State(0, x, v, f, potential)

    def advance(self, state: State, k: int, count: int = 1) -> State:
        """The state after steps k .. k+count-1 (a new State; `state` is kept)."""
        self.stepper.load(state)
        done, potential = 0, self.model.uses_potential()
        while done < count:  # the NaN watch stops a chain early: go on as the steps would
            done += self.stepper.advance(count - done, potential)
        nxt = State(k + count, state.x, state.v, state.f, state.potential)
        self.stepper.store(nxt)
        if not potential and self.stepper.gradients is not None:
            nxt.potential = float("nan")  # not computed: the objective does not read it
        return nxt

    # ------------------------------------------------------------------ reverse sweep
    def _seed(self, adj: Adjoint, state: State, w: float) -> None:
        """Add w * dJ/d(state) of the objective at this state."""
        if not w:
            return
        dx, dv, dm, dp = self.model.objective_grad(state.x, state.v, state.step)
        adj.x += w * dx
        adj.v += w * dv
        adj.mass += w * dm
        adj.add_params(dp, w)
        if self.model.uses_potential():
            adj.x -= w * state.f  # dU/dx = -F
            if self.need_energy_grads:
                sec = self.model.second(state.x, np.zeros_like(state.x))
                adj.mass += w * sec.grad_m
                adj.add_params(sec.grad_p, w)

    def _through_forces(self, adj: Adjoint, x: np.ndarray, lam: np.ndarray) -> None:
        """F = -dU/dx at x carries the adjoint lam back to x, the masses and the parameters."""
        if not lam.any():
            return
        sec = self.model.second(x, lam)
        adj.x -= sec.h_lam
        adj.mass -= sec.mixed_m
        adj.add_params(sec.mixed_p, -1.0)

    def native_reverse(self) -> NativeReverse | None:
        """The reverse step as one chain of launches (built once), or None where a launch
        cannot be chained: then `job` takes the engine's reverse of the update plan."""
        if not hasattr(self, "_native"):
            hvp = self.model.direct_hvp()
            native = NativeReverse(self, hvp) if hvp.usable() else None
            self._native = native if native is not None and native.chain is not None else None
        return self._native

    def _native_program(self, native: NativeReverse, snapshots: int) -> NativeProgram | None:
        """The whole schedule as native programs (adjoint/program.py), where the forward
        step is a chain and only the final state is seeded (at: end)."""
        if self.at_mean or self.stepper.chain is None or \
                not policy.current().program:
            return None
        program = NativeProgram(self, native, snapshots)
        return program if program.chain is not None else None

    def _seed_native(self, native: NativeReverse, adj: Adjoint, state: State, w: float
                     ) -> None:
        """_seed, with the adjoint moved out of and back into the native step's fields."""
        if not w:
            return
        native.pull(adj)
        self._seed(adj, state, w)
        native.push(adj)

    def native_reverse_step(self, native: NativeReverse, adj: Adjoint, state: State,
                            nxt: State, k: int, steps: int) -> None:
        """reverse_step on the fields (adj is there between native.push and native.pull)."""
        ok = native.step(state, nxt)
        w = self._weight(k, steps)
        if not ok or w:
            native.pull(adj)
            self._seed(adj, state, w)
            self._check_finite(adj, k)
            native.push(adj)
        self.progress("reverse", steps - k, steps)

    def _check_finite(self, adj: Adjoint, k: int) -> None:
        for name, value in (("positions", adj.x), ("velocities", adj.v)):
            if not np.isfinite(value).all():
                raise FloatingPointError(
                    f"the reverse sweep's adjoint of the {name} became NaN or Inf at step {k} "
                    f"(time {k * self.h:g}): the trajectory or its second derivatives "
                    "overflow there; shorten the horizon (--steps) or check the energy terms")

    def gradient(self, state0: State, steps: int, snapshots: int
                 ) -> tuple[float, Adjoint, schedule.Schedule]:
        """J, dJ/d(x0, v0) and the parameter adjoints, by the binomial checkpoint schedule.

        No separate forward sweep: the schedule's first descent advances through every state
        in order, and J is summed there; each reverse step takes the state after it from
        the step reversed just before (no recompute)."""
        n, dim = state0.x.shape
        adj = Adjoint(np.zeros((n, dim)), np.zeros((n, dim)), np.zeros((n, dim)),
                      mass=np.zeros(n))
        reached, total = [0], [0.0]
        later: list = [None]  # (k, state before step k) of the last reversed step
        native = self.native_reverse()
        if native is None:
            raise RuntimeError("no native reverse step: job._reverse_trajectory differentiates "
                               "this scene by the engine's reverse of its update plan")
        program = self._native_program(native, snapshots)
        if program is not None:
            value, sched = program.gradient(state0, steps, snapshots, adj)
            self._through_forces(adj, state0.x, adj.pending)  # F at x0 (the first kick)
            adj.pending = np.zeros_like(adj.pending)
            return value, adj, sched
        native.push(adj)

        def advance(state: State, k: int) -> State:
            nxt = self.advance(state, k)
            if k + 1 > reached[0]:  # first visit: the forward sweep's share of the work
                reached[0] = k + 1
                self._accumulate(total, nxt, steps)
            return nxt

        def advance_many(state: State, a: int, b: int) -> State:
            """Steps a .. b-1 in one native call where no state between needs the objective
            (at: end) and the stepper chains its launches; else one by one."""
            if self.at_mean or self.stepper.chain is None:
                for k in range(a, b):
                    state = advance(state, k)
                return state
            nxt = self.advance(state, a, b - a)
            if b > reached[0]:
                reached[0] = b
                if b == steps:
                    self._accumulate(total, nxt, steps)
                else:
                    self.progress("forward", b, steps)
            return nxt

        def on_reverse(state: State, k: int) -> None:
            if later[0] is not None and later[0][0] == k + 1:
                nxt = later[0][1]
            else:  # the last step: its end state is new, and the objective starts there
                nxt = advance(state, k)
                self._seed_native(native, adj, nxt, self._weight(steps, steps))
            self.native_reverse_step(native, adj, state, nxt, k, steps)
            later[0] = (k, state)

        sched = schedule.reverse(state0, steps, snapshots, advance, on_reverse, _copy,
                                 advance_many)
        native.pull(adj)
        self._through_forces(adj, state0.x, adj.pending)  # F at x0 (the first kick)
        adj.pending = np.zeros_like(adj.pending)
        return total[0], adj, sched


@dataclass
class Tangent:
    """Tangents of the state and of the parameters along one direction."""

    x: np.ndarray
    v: np.ndarray
    mass: np.ndarray
    dt: float = 0.0
    damping: float = 0.0
    params: dict[str, float] = field(default_factory=dict)  # energy and objective KEYs
