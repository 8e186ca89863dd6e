"""The reverse step of a scene on the integrator's or a thermostat's update plan
(integrated.py) as one chain of engine launches: KernelNative's plan with the plan's update
kernels as the step kernels, each stage with a force evaluation before it.

reverse step k (adjoints of the state after it in f64 fields):
    replay: controller(k); forces -> G; first stage; [forces -> G2; second stage]
        (snapshots of the fields each launch overwrites, as KernelNative takes them)
    [the second stage's adjoint; G2's through the forces at x_(k+1) (the masses' adjoint
        first: the forward-over-reverse pass clears m.grad)]
    the first stage's adjoint; G's through the forces at x_k
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
        plan = self._replay(self.ctrl, self.ctrl_snaps)
        stages = self._stages()
        for launches, snaps, _, G in stages:
            plan += self._forces_into(G) + self._replay(launches, snaps)
        zeroed = [system.m.grad] + [G.grad for *_, G in stages] + \
            [f.grad for f in traj.scratch] + [f.grad for _, f, _, _ in self.step_params]
        plan += [R(updates.zero, (g,)) for g in zeroed]
        for _, snaps, grads, G in reversed(stages):
            plan += self._seed_and_reverse(state, grads, snaps)
            plan.append(R(accumulate, (system.m.grad, self.am, f64)))
            if self.energy:
                plan += self._through_forces(G)
            plan.append(R(updates.zero, (system.m.grad,)))  # the pass left dU/dm there
        plan += self._seed_and_reverse(state, self.ctrl_grads, self.ctrl_snaps)
        plan.append(R(accumulate, (system.m.grad, self.am, f64)))  # a controller reading m
        plan += [R(accumulate, (f.grad, acc, f64)) for _, f, acc, _ in self.step_params]
        plan.append(R(adjoint_watch, (self.ax, self.av, self.bad)))
        return plan

    def _stages(self) -> list[tuple]:
        """(launches, their snapshots, their gradient launches, the G they read) per stage
        of the trajectory's update plan (the second stage: velocity Verlet's and the
        thermostats')."""
        traj, out, start = self.traj, [], 0
        for stage, G in zip(traj.stages, (traj.G, traj.G2)):
            end = start + len(stage)
            if stage:
                out.append((self.twins[start:end], self.twin_snaps[start:end],
                            self.twin_grads[start:end], G))
            start = end
        return out

    def _forces_into(self, G) -> list:
        """The force launches (U, x.grad = dU/dx), x.grad copied into G."""
        if not self.energy:
            return []
        return self.forces[:-1] + [_resolve(assign, (self.system.x.grad, G, self.fp))]
