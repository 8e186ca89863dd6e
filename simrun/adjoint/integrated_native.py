"""The reverse step of a scene's trajectory (integrated.py) as one chain of engine launches,
put together from kernel_native.py's pieces.

Without a controller (the forces at x_(k+1) that the second stage of step k reads are then
those the first stage of step k + 1 reads, bit for bit) the step is folded, as velocity
Verlet's adjoint has always been written by hand, now for every update plan:
    G <- dU/dx at x_k (the stored state's -F), G2 holds dU/dx at x_(k+1) (kept from the step
        reversed just before); replay: first stage; [second stage]
        (snapshots of the fields each launch overwrites, as KernelNative takes them)
    [the second stage's adjoint -> G2-bar]; (G2-bar + pending) through the forces at
        x_(k+1), one H lambda per step; the first stage's adjoint; pending <- G-bar
    the scalar parameters' adjoints (h = factor * dt); G2 <- G; NaN watch.
The pending G-bar of step 0 goes through the forces at x_0 after the sweep (`finish`).
No forces are evaluated in a reverse step: the stored states carry them.

With a controller each stage gets its own force evaluation and H lambda:
    replay: controller(k); forces -> G; first stage; [forces -> G2; second stage]
    [the second stage's adjoint; G2's through the forces at x_(k+1)]
    the first stage's adjoint; G's through the forces at x_k
    the controller's adjoint; the scalar parameters' adjoints; NaN watch.
The forward steps are the trajectory's own (`run`'s stepper)."""

from __future__ import annotations

import numpy as np

import simrun.lang as ti
from simrun.adjoint.kernel_native import (
    KernelNative,
    _like,
    _resolve,
    _Unchainable,
    accumulate,
    adjoint_watch,
    assign,
)
from simrun.lang.api import runtime
from simrun.lang.autodiff.tape import access_of
from simrun.lang.runtime.chain import Chain
from simrun.stepper import updates


class IntegratedNative(KernelNative):
    """KernelNative's reverse step for IntegratedTrajectory (see the module docstring)."""

    @classmethod
    def build(cls, traj) -> IntegratedNative | None:
        try:  # an objective reading U: `run`'s stepper keeps U and F in the stored states
            return cls(traj)
        except _Unchainable:
            return None

    def __init__(self, traj) -> None:  # no forward chain: the steps are `run`'s stepper
        self.traj = traj
        model, system = traj.model, traj.system
        self.system, self.fp = system, system.fp
        self.floats = traj.floats
        self.energy = bool(system.energy)
        if self.energy:  # the forces and H lambda as `run` compiles them (fast-math)
            system.forces()
            model.direct_hvp(lean=True)
        self._resolve_launches(traj, model, system)  # each as `run` compiles it
        self.folded = self._foldable()
        if self.folded:
            self.pending = _like(traj.G, self.fp)
            self.backward = Chain(runtime(), self._folded_plan())
            self.last = Chain(runtime(), self._last_forces())
        else:
            self.backward = Chain(runtime(), self._reverse_plan())

    def _foldable(self) -> bool:
        """Whether the second stage's forces are the next step's first (see the module
        docstring): no controller, and the second stage writes nothing the energies read."""
        if self.ctrl or not self.energy:
            return False
        reads = set().union(*(access_of(c).reads for c, _ in self.forces))
        second = self.twins[len(self.traj.stages[0]):]
        return not any(access_of(c).writes & reads for c, _ in second)

    def _reverse_plan(self) -> list:
        system, R, f64 = self.system, _resolve, ti.f64
        self._adjoint_fields()
        plan = self._replay(self.ctrl, self.ctrl_snaps)
        stages = self._stages()
        for launches, snaps, _, G in stages:
            plan += self._forces_into(G) + self._replay(launches, snaps)
        plan += self._zero_grads(stages)
        for _, snaps, grads, G in reversed(stages):
            plan += self._seed_and_reverse(self._state(), grads, snaps)
            plan.append(R(accumulate, (system.m.grad, self.am, f64)))
            if self.energy:
                plan += self._through_forces(G)
            plan.append(R(updates.zero, (system.m.grad,)))  # the pass left dU/dm there
        plan += self._seed_and_reverse(self._state(), self.ctrl_grads, self.ctrl_snaps)
        plan.append(R(accumulate, (system.m.grad, self.am, f64)))  # a controller reading m
        return plan + self._param_plan()

    def _folded_plan(self) -> list:
        system, traj, R, f64, fp = self.system, self.traj, _resolve, ti.f64, self.fp
        self._adjoint_fields()
        stages = self._stages()
        plan = [R(assign, (system.x.grad, traj.G, fp))]  # load() left -F_k there
        for launches, snaps, _, _ in stages:
            plan += self._replay(launches, snaps)
        plan += self._zero_grads(stages)
        first, into = stages[0], assign  # G2-bar = pending (no second stage) or + pending
        if len(stages) > 1:
            plan += self._seed_and_reverse(self._state(), stages[1][2], stages[1][1])
            plan.append(R(accumulate, (system.m.grad, self.am, f64)))
            into = accumulate
        plan.append(R(into, (self.pending, traj.G2.grad, fp)))
        plan += self._through_forces(traj.G2)  # at x_(k+1): the second stage left x there
        plan.append(R(updates.zero, (system.m.grad,)))
        plan += self._seed_and_reverse(self._state(), first[2], first[1])
        plan += [R(accumulate, (system.m.grad, self.am, f64)),
                 R(assign, (traj.G.grad, self.pending, fp)),
                 R(assign, (traj.G, traj.G2, fp))]  # the next reverse step's G2
        return plan + self._param_plan()

    def _last_forces(self) -> list:
        """The pending G-bar of step 0 through the forces at x_0."""
        traj, R, fp = self.traj, _resolve, self.fp
        return [R(assign, (self.pending, traj.G2.grad, fp)), *self._through_forces(traj.G2),
                R(updates.zero, (self.pending,)), R(adjoint_watch, (self.ax, self.av, self.bad))]

    def _state(self) -> list:
        system = self.system
        return [(system.x.grad, self.ax), (system.v.grad, self.av)] + \
            [(f.grad, self.af[n]) for n, f in self.floats.items()]

    def _zero_grads(self, stages: list) -> list:
        """The grads the seeds do not overwrite."""
        system, traj = self.system, self.traj
        zeroed = [system.m.grad] + [G.grad for *_, G in stages] + \
            [f.grad for f in traj.scratch] + [f.grad for _, f, _, _ in self.step_params]
        return [_resolve(updates.zero, (g,)) for g in zeroed]

    def _param_plan(self) -> list:
        """The scalar parameters' adjoints of this step, then the NaN watch."""
        plan = [_resolve(accumulate, (f.grad, acc, ti.f64)) for _, f, acc, _ in
                self.step_params]
        return plan + [_resolve(adjoint_watch, (self.ax, self.av, self.bad))]

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

    # ------------------------------------------------------------------ the folded sweep
    def load(self, state) -> None:
        super().load(state)
        if self.folded:
            self.system.x.grad.from_numpy(np.negative(state.f))  # G = dU/dx as `run` had it

    def begin(self, end) -> None:
        """Before the first reverse step: G2 = dU/dx at the end state, nothing pending."""
        if self.folded:
            self.traj.G2.from_numpy(np.negative(end.f))
            self.pending.fill(0)
            self.after = end.x

    def reverse_step(self, state, k: int) -> bool:
        if self.folded and self.system.neighbor_list is not None:
            self.system.x.from_numpy(self.after)  # H lambda is taken at x_(k+1): its list
            self.system.refresh_neighbors()
            self.after = state.x
        return super().reverse_step(state, k)

    def finish(self, state0) -> bool:
        """After the sweep: the pending G-bar through the forces at x_0."""
        if not self.folded:
            return True
        self.load(state0)
        self.system.refresh_neighbors()
        self.bad.data[()] = 0
        self.last.run(1)
        return not self.bad.data[()]
