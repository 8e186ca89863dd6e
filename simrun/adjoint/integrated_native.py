"""The reverse step of a controller scene on the integrator (integrated.py) as one chain of
engine launches: KernelNative's plan with the integrator's update kernels as the step
kernels, each with a force evaluation before it (velocity Verlet: two).

reverse step k (adjoints of the state after it in f64 fields):
    replay: controller(k); forces -> G; kick_drift; [forces -> G2; kick]  (snapshots of the
        fields each launch overwrites, as KernelNative takes them)
    [kick's adjoint; G2's through the forces at x_(k+1) (the masses' adjoint first: the
        forward-over-reverse pass clears m.grad)]
    kick_drift's adjoint; G's through the forces at x_k
    the controller's adjoint; the scalar parameters' adjoints (h = factor * dt); NaN watch.
The forward steps are the trajectory's own (`run`'s stepper)."""

from __future__ import annotations

import simrun.lang as ti
from simrun.adjoint.kernel_native import (
    KernelNative,
    _resolve,
    _Unchainable,
    accumulate,
    assign,
)
from simrun.adjoint.reverse import adjoint_watch
from simrun.lang.api import runtime
from simrun.lang.fields import Field
from simrun.lang.runtime.chain import Chain
from simrun.stepper import updates


class IntegratedNative(KernelNative):
    """KernelNative's reverse step for IntegratedTrajectory (see the module docstring)."""

    @classmethod
    def build(cls, traj) -> IntegratedNative | None:
        if traj.first is None:
            return None  # a thermostat's stages of several launches: the Tape sweep
        if traj.model.uses_potential():
            return None  # the objective reads U and F at stored states: the Tape sweep
        try:
            return cls(traj)
        except _Unchainable:
            return None

    def __init__(self, traj) -> None:  # no forward chain: the steps are `run`'s stepper
        self.traj = traj
        model, system = traj.model, traj.system
        self.system, self.fp = system, system.fp
        self.floats = traj.floats
        self.energy = bool(system.energy)
        self.forward = None
        with updates.ieee():  # the update kernels as `run` compiles them
            self._resolve_launches(traj, model, system)
            self.backward = Chain(runtime(), self._reverse_plan())

    def advance(self, state, k: int):
        return self.traj.advance(state, k)

    def _reverse_plan(self) -> list:
        system, traj, R, f64 = self.system, self.traj, _resolve, ti.f64
        x, v = system.x, system.v
        self._adjoint_fields()
        self.step_params += [(key, f, Field(f64, ()), factor) for key, f, factor in
                             traj.scalars]
        state = [(x.grad, self.ax), (v.grad, self.av)] + \
            [(f.grad, self.af[n]) for n, f in self.floats.items()]
        stages = [(self.twins[0], self.twin_snaps[0], self.twin_grads[0], traj.G)]
        if traj.second is not None:
            stages.append((self.twins[1], self.twin_snaps[1], self.twin_grads[1], traj.G2))
        plan = self._replay(self.ctrl, self.ctrl_snaps)
        for launch, snaps, _, G in stages:
            plan += self._forces_into(G) + self._replay([launch], [snaps])
        zeroed = [system.m.grad] + [G.grad for *_, G in stages] + \
            [f.grad for _, f, _, _ in self.step_params]
        plan += [R(updates.zero, (g,)) for g in zeroed]
        for _, snaps, grad, G in reversed(stages):
            plan += self._seed_and_reverse(state, [grad], [snaps])
            plan.append(R(accumulate, (system.m.grad, self.am, f64)))
            if self.energy:
                plan += self._through_forces(G)
            plan.append(R(updates.zero, (system.m.grad,)))  # the pass left dU/dm there
        plan += self._seed_and_reverse(state, self.ctrl_grads, self.ctrl_snaps)
        plan.append(R(accumulate, (system.m.grad, self.am, f64)))  # a controller reading m
        plan += [R(accumulate, (f.grad, acc, f64)) for _, f, acc, _ in self.step_params]
        plan.append(R(adjoint_watch, (self.ax, self.av, self.bad)))
        return plan

    def _forces_into(self, G) -> list:
        """The force launches (U, x.grad = dU/dx), x.grad copied into G."""
        if not self.energy:
            return []
        return self.forces[:-1] + [_resolve(assign, (self.system.x.grad, G, self.fp))]
