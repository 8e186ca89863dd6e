"""A trajectory's state, objective and gradient sweeps: the base of every scene's
trajectory (integrated.py builds the step, its controller included).

A step is `run`'s: [controller;] the scene's step kernels or the integrator's or thermostat's
updates, reading G = dU/dx at x (`run` leaves it in x.grad), the walls, the forces at the new
x, [a second stage of updates]. A launch that reads `x.grad` runs as a twin that reads G
from a field of its own (`Kernel.with_grad_reads`), so G is an ordinary input with an
adjoint: G-bar goes back through the forces as H G-bar (and the mixed derivatives in the
masses, energy parameters and fields the energy reads) by one forward-over-reverse pass:
second order without finite differences and without gradients of gradients. Forward mode
carries tangents through the same twins under FwdMode, with G's tangent H xdot + ...

Here: the states (x, v, F and every field a step carries), J summed along the trajectory,
the objective's seeds, and the binomial checkpoint sweep, each reverse step the engine's
reverse of the step's launches (reverse_step.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simrun.adjoint import policy, schedule
from simrun.adjoint.kernel_state import KernelAdjoint, KernelState
from simrun.adjoint.model import DiffModel
from simrun.adjoint.reverse_step import ReverseStep
from simrun.adjoint.tangent import TangentStep
from simrun.scene import SceneError
from simrun.stepper.binding import BoundKernel, parameter_names


class KernelTrajectory:
    """State, objective and gradient sweeps of a scene's trajectory on a DiffModel.

    `step_keys` maps each differentiated scalar the steps read (a `step_kernels.params.<name>`
    KEY, `dt`, a thermostat's) to its parameter name; those are read from 0-D fields in the
    twins."""

    def __init__(self, model: DiffModel, step_keys: dict[str, str],
                 progress: Callable[[str, int, int], None] | None = None):
        self.model = model
        self.scene = scene = model.scene
        self.system = system = model.system
        self.ti = system.ti
        self.step_keys = step_keys
        self.at_mean = scene.objective.at == "mean"
        self.progress = progress or (lambda *_: None)
        self.need_energy_grads = False
        self.args_set = False  # a native gradient wrote every launch's scalar arguments
        self._made: dict = {}  # (ReverseStep | TangentStep, policy.native) -> made once
        ti, p = self.ti, scene.particles
        self.G = ti.Vector.field(p.dim, dtype=system.fp, shape=p.count, needs_grad=True,
                                 needs_dual=True)
        system.v._make_dual()
        self.floats = {n: f for n, f in system.extra.items() if f.dtype.is_float}
        for f in self.floats.values():
            f._make_grad()
            f._make_dual()
            f.grad._make_dual()  # the mixed derivative of energies that read the field
        self.twins = [self._twin(b) for b in system.step_kernels]
        # (KEY, 0-D field, d value / d KEY) of each differentiated scalar the steps read
        self.scalars: list = [(key, f, 1.0) for key, name in step_keys.items()
                              for tw in self.twins for n, f in tw.kernel.field_args.items()
                              if n == name]

    def _twin(self, bound: BoundKernel) -> BoundKernel:
        """The step kernel reading G where it reads x.grad, and the differentiated scalars
        from 0-D fields; a read of any other gradient field cannot be differentiated."""
        system = self.system
        compiled = bound.kernel.prepare(bound.args, "primal")[0]
        from simrun.lang.autodiff.tape import access_of

        refuse_random(bound, compiled, "step kernel")
        grads = [f for f in access_of(compiled).reads if getattr(f, "role", "primal") == "grad"]
        if any(f is not system.x.grad for f in grads):
            other = next(f for f in grads if f is not system.x.grad)
            raise SceneError(f"{bound.ref.where}: step kernel '{bound.ref.name}' reads the "
                             f"gradient field '{other.name}'; `simrun grad` differentiates "
                             "step kernels that read x.grad (the energy's dU/dx) only.")
        names = parameter_names(bound.kernel)
        kernel = bound.kernel
        if grads:
            kernel = kernel.with_grad_reads({n: self.G for n, a in zip(names, bound.args)
                                             if a is system.x})
        wanted = sorted({n for n in self.step_keys.values() if n in names})
        if wanted:
            kernel = kernel.with_field_args(wanted)
        return BoundKernel(bound.ref, kernel, bound.args)

    # ------------------------------------------------------------------ forward
    def start(self, x0: np.ndarray, v0: np.ndarray,
              field_shifts: dict[str, np.ndarray] | None = None,
              field_values: dict[str, np.ndarray] | None = None) -> KernelState:
        """The first state: allocated fields as their modules made them, or `field_values`
        (e.g. trained ones), moved by `field_shifts`."""
        system = self.system
        for name, value in (field_values or {}).items():
            f = system.extra[name]
            f.from_numpy(np.asarray(value, dtype=f.to_numpy().dtype))
        for name, shift in (field_shifts or {}).items():
            f = system.extra[name]
            f.from_numpy((f.to_numpy() + shift).astype(f.to_numpy().dtype))
        system.set_state(x0, v0)
        x, v = system.get_state()
        potential, f = system.forces()
        return KernelState(0, x, v, f, potential, self._fields())

    def _fields(self) -> dict[str, np.ndarray]:
        return {n: f.to_numpy() for n, f in self.system.extra.items()}

    def _load(self, state: KernelState) -> None:
        system = self.system
        system.set_state(state.x, state.v)
        for n, f in system.extra.items():
            f.from_numpy(state.fields[n])
        self.G.from_numpy(np.negative(state.f))  # the bits x.grad held in `run`

    def _weight(self, k: int, steps: int) -> float:
        """The objective's weight on the state after k steps (end: the last; mean: 1/n each)."""
        if self.at_mean:
            return 1.0 / steps if k >= 1 else 0.0
        return 1.0 if k == steps else 0.0

    def objective(self, state0: KernelState, steps: int) -> float:
        """J of the trajectory (the forward sweep, nothing stored)."""
        total, state = [0.0], state0
        for k in range(steps):
            state = self.advance(state, k)
            self._accumulate(total, state, steps)
        return total[0]

    def _accumulate(self, total: list, state: KernelState, steps: int) -> None:
        w = self._weight(state.step, steps)
        if w:
            total[0] += w * self.model.objective(state.x, state.v, state.potential, state.step)
        self.progress("forward", state.step, steps)

    # ------------------------------------------------------------------ reverse
    def _seed(self, adj: KernelAdjoint, state: KernelState, w: float) -> None:
        """Add w * dJ/d(state) of the objective at this state."""
        if not w:
            return
        model, extra = self.model, self.system.extra
        for n, values in state.fields.items():  # as the forward's objective saw them (a
            extra[n].from_numpy(values)  # controller's reverse leaves the step's outputs)
        for f in self.floats.values():
            f.grad.fill(0)
        dx, dv, dm, dp = model.objective_grad(state.x, state.v, state.step)
        adj.x += w * dx
        adj.v += w * dv
        adj.mass += w * dm
        adj.add_params(dp, w)
        if self.scene.objective.kernel is not None:  # an objective may read the fields too
            for n, f in self.floats.items():
                adj.fields[n] += w * f.grad.to_numpy()
        if model.uses_potential():
            adj.x -= w * state.f
            if self.need_energy_grads or self.floats:  # U reads the masses, params, fields
                grad_m, grad_p = model.energy_gradients(state.x)
                adj.mass += w * grad_m
                adj.add_params(grad_p, w)
                for n, f in self.floats.items():  # dU/dfield, e.g. a controller's output
                    adj.fields[n] += w * f.grad.to_numpy().astype(float)

    def _check_finite(self, adj: KernelAdjoint, k: int) -> None:
        for name, value in (("positions", adj.x), ("velocities", adj.v)):
            if not np.isfinite(value).all():
                raise FloatingPointError(
                    f"the reverse sweep's adjoint of the {name} became NaN or Inf at step {k} "
                    f"(time {k * self.scene.dt:g}): shorten the horizon (--steps)")

    def gradient(self, state0: KernelState, steps: int, snapshots: int
                 ) -> tuple[float, KernelAdjoint, schedule.Schedule]:
        """J and the adjoints by the binomial checkpoint schedule (schedule.py), each reverse
        step the launches of reverse_step.py."""
        n, dim = state0.x.shape
        adj = KernelAdjoint(np.zeros((n, dim)), np.zeros((n, dim)),
                            {k: np.zeros(a.shape) for k, a in state0.fields.items()
                             if k in self.floats}, np.zeros(n))
        return self._native_gradient(self._reverse_step(), adj, state0, steps, snapshots)

    def _summing(self, total: list, steps: int) -> tuple[Callable, Callable | None]:
        """The trajectory's `advance` and `advance_many` (None where every state counts: at:
        mean), adding each state they reach for the first time into the objective's sum
        `total` (the schedule's first descent; recomputations add nothing)."""
        reached = [0]

        def advance(state: KernelState, k: int) -> KernelState:
            nxt = self.advance(state, k)
            if k + 1 > reached[0]:
                reached[0] = k + 1
                self._accumulate(total, nxt, steps)
            return nxt

        def advance_many(state: KernelState, a: int, b: int) -> KernelState:
            nxt = self.advance_many(state, a, b)
            if b > reached[0]:  # only the end state has weight (at: end)
                reached[0] = b
                self._accumulate(total, nxt, steps)
            return nxt
        return advance, (None if self.at_mean else advance_many)

    def _reverse_step(self) -> ReverseStep:
        """The reverse step under the policy in force (made on first use, kept:
        `reuse.TrajectoryCache` reuses the trajectory)."""
        return self._made_once(ReverseStep)

    def tangent_step(self) -> TangentStep:
        """The step's forward-mode launches under the policy in force (made on first use)."""
        return self._made_once(TangentStep)

    def _made_once(self, kind):
        key = (kind, policy.current().native)
        if key not in self._made:
            self._made[key] = kind(self)
        return self._made[key]

    def _stepwise(self, native, adj: KernelAdjoint, state0: KernelState, steps: int,
                  snapshots: int) -> tuple[float, KernelAdjoint, schedule.Schedule]:
        """`gradient` one reverse step at a time (`native`: the ReverseStep): the adjoints
        stay in its fields, and come out to NumPy only where the
        objective seeds them (and at the end)."""
        total = [0.0]
        native.prepare()
        advance, many = self._summing(total, steps)

        def on_reverse(state: KernelState, k: int) -> None:
            if k == steps - 1:  # the last step: the objective starts at its end state
                end = advance(state, k)
                native.load(end)
                self._seed(adj, end, self._weight(steps, steps))
                native.push(adj)
                native.begin(end)
            finite = native.reverse_step(state, k)
            w = self._weight(k, steps)
            if w or not finite:
                native.pull(adj)
                native.load(state)  # the objective reads the state's fields
                self._seed(adj, state, w)
                self._check_finite(adj, k)
                native.push(adj)
            self.progress("reverse", steps - k, steps)

        self.args_set = native.writes_args  # short advances need not write them again
        try:
            sched = schedule.reverse(state0, steps, snapshots, advance, on_reverse,
                                     KernelState.copy, many)
        finally:
            self.args_set = False
        if steps > 0:
            finite = native.finish(state0)
            native.pull(adj)
            if not finite:
                self._check_finite(adj, 0)
        return total[0], adj, sched


def refuse_random(bound: BoundKernel, compiled, role: str) -> None:
    """A launch drawing ti.random() numbers: a reverse step replays it and would draw other
    numbers than the run did, so its gradient would belong to another noise."""
    if compiled.uses_random:
        raise SceneError(
            f"{bound.ref.where}: {role} '{bound.ref.name}' draws ti.random() numbers; `simrun "
            "grad` replays each step's launches, and a replay draws other numbers than the run "
            "did, so the gradient would belong to another noise. Draw noise keyed by the step "
            "instead (a hash of the particle index and a `step` argument, as the thermostats' "
            "counter-based noise is), or use a thermostat (integrator.type: langevin).")
